"""Peak memory predicted in a real search on CPU: RAM for cache=ram, against what the trial measured."""

import optuna
import pytest

from speedopt.study import flat_attrs
from tests.conftest import run_cli

SEARCH = ["search", "--device", "cpu", "--quality", "off", "--repeats", "0", "--trials", "1", "--steps", "3", "--max-steps", "3",
          "--warmup", "1", "--baseline", "model=yolov5n imgsz=128 batch=8 workers=0 cache=ram", "--no-report"]


def _trial(url: str) -> tuple[optuna.Study, dict]:
    studies = [optuna.load_study(study_name=n, storage=url) for n in optuna.study.get_all_study_names(url)]
    study = next(s for s in studies if "memory_fits" in s.user_attrs)  # not the probe-cache study
    return study, flat_attrs(study.trials[0].user_attrs)


@pytest.mark.slow
def test_the_ram_of_a_cache_ram_trial_is_predicted_within_20_percent(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    # 4 GiB: the demo's cache could then bind (search._memory.could_bind), so the search fits its memory
    done = run_cli(*SEARCH, "--data", str(demo_yaml), "--storage", url, "--ram-limit", "4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    study, attrs = _trial(url)
    assert attrs["status"] == "ok" and attrs["predicted_kind"] == "ram"
    error = abs(attrs["peak_ram_mb"] - attrs["predicted_peak_mb"]) / attrs["peak_ram_mb"]
    assert error < 0.20, (attrs["predicted_peak_mb"], attrs["peak_ram_mb"], attrs["predicted_basis"])
    assert len(study.user_attrs["memory_fits"]) == 1 and "decoded images cached" in attrs["predicted_basis"]


@pytest.mark.slow
def test_a_config_predicted_over_the_ram_limit_is_infeasible_without_running(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = run_cli(*SEARCH, "--data", str(demo_yaml), "--storage", url, "--ram-limit", "0.25", cwd=tmp_path)
    _, attrs = _trial(url)
    assert attrs["status"] == "infeasible" and "predicted peak RAM" in attrs["message"], done.stdout
    assert attrs["images_per_s"] is None and attrs["predicted_peak_mb"] > 0.9 * 256


def test_a_memory_fit_runs_only_where_memory_could_bind(tmp_path):
    """Issue 30: two short fitting trials buy nothing where a cache of a few MB meets GBs of free RAM."""
    from types import SimpleNamespace

    from speedopt import data
    from speedopt.knobs import Knobs
    from speedopt.search._memory import TRAINER_RAM_MB, could_bind

    listing = data.load(data.generate(tmp_path / "d", data.DemoSpec(train=6, val=2, width=640, height=480)))
    request = SimpleNamespace(device="cpu", knobs=Knobs(imgsz=128, cache="ram"))
    gib = 2**30
    assert not could_bind(SimpleNamespace(ram_limit_bytes=64 * gib), request, listing)  # type: ignore[arg-type]
    assert could_bind(SimpleNamespace(ram_limit_bytes=int(TRAINER_RAM_MB * 2**20)), request, listing)  # type: ignore[arg-type]
    assert could_bind(SimpleNamespace(ram_limit_bytes=64 * gib), SimpleNamespace(device="cuda:0", knobs=request.knobs), listing)  # type: ignore[arg-type]
