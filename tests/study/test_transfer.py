"""Export a study made by a real search to one file, import it into a fresh storage: nothing lost."""

import shutil

import optuna
import pytest

from speedopt import quality
from speedopt.quality import CACHE_STUDY
from speedopt.status import Status
from speedopt.study import schema
from tests.conftest import run_cli


def _trial_view(t):
    return (t.number, t.state, t.values, t.params, t.distributions, t.user_attrs, t.system_attrs,
            t.datetime_start, t.datetime_complete, t.intermediate_values)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["db", "log"])
def test_export_import_round_trip(small_study, tmp_path, suffix):
    work, shared, name = small_study
    shutil.copy(shared.removeprefix("sqlite:///"), tmp_path / "copy.db")  # the shared study stays as it is
    url = f"sqlite:///{tmp_path / 'copy.db'}"
    # A probe-cache entry of the study's dataset and one of another's (the shared study ran no probes: quality off)
    study = optuna.load_study(study_name=name, storage=url)
    cache = quality.ProbeCache(study._storage)
    for dataset in (schema.read_protocol(study).dataset.id, "another-dataset"):
        sig = quality.signature(schema.read_protocol(study).baseline)
        cache.put(quality.cache_key(dataset, sig, quality.Policy(), 0, "ultralytics"),
                  quality.ProbeResult(Status.OK, "", sig, 0, 1, 0.5, dataset, 0.1, 0.05, 24))
    out = tmp_path / f"small.{suffix}"
    done = run_cli("export", "--study", name, "--storage", url, "-o", str(out), cwd=work)
    assert done.returncode == 0, done.stderr
    again = run_cli("export", "--study", name, "--storage", url, "-o", str(out), cwd=work)
    assert again.returncode == 2 and "already exists" in again.stderr  # never overwrites

    fresh = f"sqlite:///{tmp_path}/fresh.db"
    done = run_cli("import", str(out), "--storage", fresh, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    a = optuna.load_study(study_name=name, storage=url)
    b = optuna.load_study(study_name=name, storage=fresh)
    assert len(a.trials) == len(b.trials) >= 3  # 3 complete, and any repeated proposal pruned beside them
    for x, y in zip(a.trials, b.trials):
        assert _trial_view(x) == _trial_view(y)
    assert a.user_attrs == b.user_attrs  # fingerprints, space, protocol
    assert a._storage.get_study_system_attrs(a._study_id) == b._storage.get_study_system_attrs(b._study_id)  # note
    cache_a = optuna.load_study(study_name=CACHE_STUDY, storage=url).user_attrs
    cache_b = optuna.load_study(study_name=CACHE_STUDY, storage=fresh).user_attrs
    ours = {k: v for k, v in cache_a.items() if v["dataset"] == schema.read_protocol(a).dataset.id}
    assert len(cache_a) == 2 and len(ours) == 1 and cache_b == ours  # the study's dataset's entries travel, no other

    twice = run_cli("import", str(out), "--storage", fresh, cwd=tmp_path)
    assert twice.returncode == 2 and "already exists" in twice.stderr


def test_import_missing_file_exit_2(tmp_path):
    done = run_cli("import", str(tmp_path / "none.db"), cwd=tmp_path)
    assert done.returncode == 2 and "not found" in done.stderr and "Traceback" not in done.stderr
