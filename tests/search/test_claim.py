"""Claims: a step of a study owned by one process, in a real SQLite storage; an owner that died is taken over."""

from __future__ import annotations

import subprocess
import sys
import time

import optuna
import pytest

from speedopt.search._claim import OWNER, claim_name, try_claim
from speedopt.study import is_claim
from speedopt.study.names import study_names


@pytest.fixture
def storage(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'c.db'}")


def test_one_owner_until_it_releases_and_claims_are_not_listed(storage):
    optuna.create_study(study_name="s", storage=storage)
    mine = try_claim(storage, "s", "finals", stale_s=60)
    assert not isinstance(mine, str) and is_claim(mine.name)
    assert "pid" in str(try_claim(storage, "s", "finals", stale_s=60))  # held: who holds it, in words
    assert not isinstance(try_claim(storage, "s", "retry-3", stale_s=60), str)  # another step is another claim
    assert study_names(storage) == ["s"]
    mine.release()
    again = try_claim(storage, "s", "finals", stale_s=60)
    assert not isinstance(again, str) and again.name == mine.name  # free again: the first generation


def _record(storage, name: str, record: dict) -> None:
    claim_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], name)
    storage.set_study_user_attr(claim_id, OWNER, record)


def test_a_claim_whose_owner_died_here_is_taken_over_by_the_next_generation(storage):
    import platform

    import psutil

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(gone.pid).create_time() if psutil.pid_exists(gone.pid) else time.time()
    gone.wait()
    _record(storage, claim_name("s", "finals", 1), {"host": platform.node(), "pid": gone.pid, "started": started, "beat": time.time()})
    taken = try_claim(storage, "s", "finals", stale_s=60)
    assert not isinstance(taken, str) and taken.name == claim_name("s", "finals", 2)
    assert isinstance(try_claim(storage, "s", "finals", stale_s=60), str)  # and it holds
    taken.release()  # the dead owner's claim goes with the run that took it over: none is left behind
    assert [s.study_name for s in storage.get_all_studies()] == []
    again = try_claim(storage, "s", "finals", stale_s=60)
    assert not isinstance(again, str) and again.name == claim_name("s", "finals", 1)


@pytest.mark.parametrize(("beat_age_s", "held"), [(5.0, True), (120.0, False)])
def test_an_owner_on_another_host_holds_while_it_beats(storage, beat_age_s, held):
    _record(storage, claim_name("s", "finals", 1), {"host": "another-host", "pid": 1, "started": 1.0, "beat": time.time() - beat_age_s})
    got = try_claim(storage, "s", "finals", stale_s=60)
    assert isinstance(got, str) == held, got
    if held:
        assert "pid 1 on another-host" in got
