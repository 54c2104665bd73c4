"""Export a study made by a real search to one file, import it into a fresh storage: nothing lost."""

import optuna
import pytest

from speedopt.quality import CACHE_STUDY
from tests.conftest import run_cli


def _trial_view(t):
    return (t.number, t.state, t.values, t.params, t.distributions, t.user_attrs, t.system_attrs,
            t.datetime_start, t.datetime_complete, t.intermediate_values)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["db", "log"])
def test_export_import_round_trip(small_study, tmp_path, suffix):
    work, url, name = small_study
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
    assert len(a.trials) == len(b.trials) == 3
    for x, y in zip(a.trials, b.trials):
        assert _trial_view(x) == _trial_view(y)
    assert a.user_attrs == b.user_attrs  # fingerprints, space, protocol
    assert a._storage.get_study_system_attrs(a._study_id) == b._storage.get_study_system_attrs(b._study_id)  # note
    cache_a = optuna.load_study(study_name=CACHE_STUDY, storage=url).user_attrs
    cache_b = optuna.load_study(study_name=CACHE_STUDY, storage=fresh).user_attrs
    assert cache_a and cache_a == cache_b

    twice = run_cli("import", str(out), "--storage", fresh, cwd=tmp_path)
    assert twice.returncode == 2 and "already exists" in twice.stderr


def test_import_missing_file_exit_2(tmp_path):
    done = run_cli("import", str(tmp_path / "none.db"), cwd=tmp_path)
    assert done.returncode == 2 and "not found" in done.stderr and "Traceback" not in done.stderr
