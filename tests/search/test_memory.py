"""Peak memory predicted in a real search on CPU: RAM for cache=ram, against what the trial measured."""

from typing import Any, cast

import optuna
import pytest

from speedopt.data import Dataset
from speedopt.knobs import COMPILE_OFF, MODEL_SCALES, Knobs
from speedopt.measure import TrialRequest, TrialResult
from speedopt.search import _memory_model as memory
from speedopt.search._memory import could_bind, predicted
from speedopt.study import StudyProtocol, flat_attrs
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
    from speedopt.search._memory import TRAINER_RAM_MB

    listing = data.load(data.generate(tmp_path / "d", data.DemoSpec(train=6, val=2, width=640, height=480)))
    request = SimpleNamespace(device="cpu", knobs=Knobs(imgsz=128, cache="ram"))
    gib = 2**30
    assert not could_bind(SimpleNamespace(ram_limit_bytes=64 * gib), request, listing)  # type: ignore[arg-type]
    assert could_bind(SimpleNamespace(ram_limit_bytes=int(TRAINER_RAM_MB * 2**20)), request, listing)  # type: ignore[arg-type]


def _on_a_gpu(memory_mb: int, batch: tuple[int, ...]) -> StudyProtocol:
    """A study's protocol on a machine with one GPU of ``memory_mb``: mocked, only the GPU entry (none exists here)."""
    from speedopt.data import DatasetFingerprint
    from speedopt.machine import Gpu, MachineFingerprint, MachineKey
    from speedopt.quality import Policy
    from speedopt.study import Space
    from speedopt.study.record_types import Domain

    gpu = Gpu("NVIDIA H200", memory_mb)
    machine = MachineFingerprint(MachineKey("cpu", 16, 128, (gpu.name,)), gpus=(gpu,))
    return StudyProtocol(
        data="data.yaml", dataset=DatasetFingerprint(6, 2, 1, 640, 480, 0, "id"), machine=machine, engine="ultralytics",
        engine_version=None, device="0", space=Space({"batch": Domain(choices=batch), "model": Domain(choices=MODEL_SCALES)}),
        baseline=Knobs(), quality=Policy(), trials=10,
    )


def _gpu_request(**knobs: Any) -> TrialRequest:
    return TrialRequest("data.yaml", Knobs(**knobs), Knobs(**knobs), device="0")


LISTING = cast(Dataset, None)  # a GPU's rule never reads the dataset (the RAM cache is the CPU's rule)


def test_on_a_gpu_a_memory_fit_runs_where_the_batch_varies():
    assert could_bind(_on_a_gpu(143_771, (16, 64, 256)), _gpu_request(batch=16), LISTING)


def test_on_a_gpu_with_the_batch_fixed_far_from_its_memory_no_fit_runs():
    """Issue 46: on an H200 fits ran two short jobs per signature at a fixed batch, with 139 GB free."""
    h200 = _on_a_gpu(143_771, (16,))
    assert not could_bind(h200, _gpu_request(model="yolov5x", batch=16), LISTING)
    assert not could_bind(h200, _gpu_request(model="yolov5s", batch=64, imgsz=1280, gpus=2), LISTING)  # 32 per GPU


def test_on_a_gpu_a_bound_near_its_memory_or_no_bound_runs_a_fit(tmp_path):
    h200 = _on_a_gpu(143_771, (16,))
    near = _gpu_request(model="yolov5x", batch=64, imgsz=1280)  # 16x the README's V100 batch and pixels
    assert memory.bound(near.knobs).peak_mb >= memory.LIMIT * 143_771 and could_bind(h200, near, LISTING)
    assert could_bind(_on_a_gpu(16_384, (16,)), _gpu_request(batch=16), LISTING)  # a 16 GB card: the bound is 32 GB
    assert memory.bound(Knobs(amp=False, batch=128)).peak_mb == 2 * memory.bound(Knobs(batch=128)).peak_mb  # fp32
    custom = str(tmp_path / "mine.yaml")
    assert memory.bound(Knobs(model=custom)) is None and could_bind(h200, _gpu_request(model=custom), LISTING)
    assert memory.bound(Knobs(model=str(tmp_path / "yolov5su.pt"))) == memory.bound(Knobs())


def test_a_memory_fit_never_compiles_and_its_key_ignores_compile():
    fit = memory.fit_knobs(Knobs(compile="default", channels_last="on"), "0", 8)
    assert fit.compile == COMPILE_OFF and fit.channels_last == "on"
    assert memory.memory_key(Knobs(compile="max-autotune-no-cudagraphs"), "0") == memory.memory_key(Knobs(), "0")


def test_no_fit_runs_and_the_trial_runs_unpredicted_where_memory_cannot_bind():
    import optuna

    def fitting(*args: Any, **kwargs: Any) -> TrialResult:
        raise AssertionError("a fitting trial ran")

    request = _gpu_request(batch=16, compile="default")
    study = optuna.create_study()
    assert predicted(study, _on_a_gpu(143_771, (16,)), request, LISTING, print, fitting) == (request, None)
