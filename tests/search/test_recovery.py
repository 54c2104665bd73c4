"""Trials whose run ended early: interrupted, killed, or stale; failed once, retried once with the same
knobs and role, and listed with their retry (synthetic studies: no trainer runs)."""

import datetime as dt
import sqlite3

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from speedopt.defaults import GRACE_S
from speedopt.search._recovery import (
    INTERRUPTED,
    awaited,
    recover_interrupted,
    recover_stale,
    retry_callback,
    retry_interrupted,
    worker_id,
)
from speedopt.study import Need, open_storage, outcome, schema
from speedopt.study._failed import failed_trials

pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")  # trials asked outside optimize()

DIST = {"cache": CategoricalDistribution(("none", "ram", "disk"))}
OTHER_HOST = {"host": "another-node", "pid": 1, "started": 0.0}


@pytest.fixture
def study(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(f"sqlite:///{tmp_path}/s.db", Need.CREATE, on_stale=retry_callback())  # as the search opens it
    return optuna.create_study(study_name="s", storage=storage, direction="maximize")


def _running(study, worker, role="baseline", cache="none"):
    """A RUNNING trial as a worker leaves it: enqueued with its role, asked, its worker recorded."""
    study.enqueue_trial({"cache": cache}, user_attrs={"role": role})
    trial = study.ask(DIST)
    trial.set_user_attr("worker", worker)
    trial.set_user_attr("status", "ok")  # a measurement half written when the run ended
    return study._storage.get_trial(trial._trial_id)


def _failed(study, worker, ended, role="baseline"):
    """A FAIL trial that was never retried (as speedopt left an interrupted baseline before)."""
    now = dt.datetime.now()
    study.add_trial(FrozenTrial(
        number=0, state=TrialState.FAIL, value=None, datetime_start=ended - dt.timedelta(seconds=5), datetime_complete=ended,
        params={"cache": "none"}, distributions=DIST, user_attrs={"role": role, "worker": worker}, system_attrs={},
        intermediate_values={}, trial_id=0,
    ))
    assert ended <= now
    return study.trials[-1]


def test_a_retry_keeps_the_role_and_knobs_and_drops_what_the_failed_run_wrote(study):
    trial = _running(study, OTHER_HOST)
    study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    retry_callback()(study, study._storage.get_trial(trial._trial_id))
    again = study.trials[-1]
    assert again.state == TrialState.WAITING and again.params == {"cache": "none"}
    assert again.user_attrs == {"role": "baseline"}  # the baseline stays the baseline; no stale worker or status
    assert again.system_attrs["failed_trial"] == trial.number


def test_an_interrupted_trial_is_failed_and_retried_once(study):
    trial = _running(study, worker_id())
    assert retry_interrupted(study, study._storage, {trial._trial_id: trial.number}) == [trial.number]
    assert retry_interrupted(study, study._storage, {trial._trial_id: trial.number}) == []  # never twice
    states = [(t.number, t.state, t.user_attrs.get("role")) for t in study.trials]
    assert states == [(0, TrialState.FAIL, "baseline"), (1, TrialState.WAITING, "baseline")]
    assert study.trials[0].user_attrs[schema.FAILED_BECAUSE] == INTERRUPTED


def test_a_running_trial_of_this_process_is_retried_after_ctrl_c_even_if_not_noted(study):
    trial = _running(study, worker_id())
    assert retry_interrupted(study, study._storage, {}) == [trial.number]


def test_a_failed_trial_never_retried_is_retried_on_the_next_start(study):
    # A study from before interrupts were retried: the baseline FAIL, nothing queued.
    _failed(study, {"host": "gone", "pid": 1, "started": 0.0}, dt.datetime.now() - dt.timedelta(seconds=3 * GRACE_S))
    assert recover_interrupted(study, study._storage) == [0]
    assert recover_interrupted(study, study._storage) == []
    retry = study.trials[1]
    assert retry.state == TrialState.WAITING and retry.user_attrs == {"role": "baseline"}


def test_a_fresh_failure_on_another_host_is_left_to_that_host(study):
    _failed(study, OTHER_HOST, dt.datetime.now())  # its own process may be retrying it right now
    assert recover_interrupted(study, study._storage) == []
    assert len(study.trials) == 1


def test_a_retry_that_failed_again_is_not_retried_again(study):
    trial = _running(study, worker_id())
    retry_interrupted(study, study._storage, {trial._trial_id: trial.number})
    retry = study.ask(DIST)  # the retry runs, and is interrupted too
    retry.set_user_attr("worker", worker_id())
    assert retry_interrupted(study, study._storage, {retry._trial_id: retry.number}) == []
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.FAIL]  # failed, and not retried a second time
    assert recover_interrupted(study, study._storage) == []


def test_a_trial_that_stopped_beating_is_failed_and_retried(study, tmp_path):
    trial = _running(study, OTHER_HOST)
    study._storage.record_heartbeat(trial._trial_id)
    assert recover_stale(study, study._storage) == []  # beating: alive
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', ?)", (f"-{GRACE_S + 5} seconds",))
    assert recover_stale(study, study._storage) == [trial.number]
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.WAITING]
    assert study.trials[1].user_attrs == {"role": "baseline"}


def test_a_worker_waits_for_running_trials_it_can_recover(study, tmp_path):
    mine = _running(study, worker_id(), role=None, cache="ram")
    theirs = _running(study, OTHER_HOST, role=None, cache="disk")
    assert awaited(study, study._storage, longest_s=3600) == [theirs.number]  # not its own
    assert awaited(study, study._storage, longest_s=0) == []  # running longer than any trial may: it never beat
    journal = optuna.create_study(study_name="j", storage=open_storage(f"{tmp_path}/j.log", Need.CREATE))
    _running(journal, OTHER_HOST)
    assert awaited(journal, journal._storage, longest_s=3600) == []  # no heartbeat: another host cannot be judged
    assert mine.number != theirs.number


def test_the_outcome_lists_trials_that_ended_early_with_their_retry(study):
    trial = _running(study, worker_id())
    retry_interrupted(study, study._storage, {trial._trial_id: trial.number})
    (failed,) = failed_trials(study)
    assert (failed.number, failed.role, failed.why, failed.retried_as) == (0, "baseline", INTERRUPTED, 1)
    assert failed.text() == "trial 0 (baseline): interrupted (Ctrl-C); retried as trial 1"
    assert outcome(study).failed_text() == "; 1 ended early (trial 0 retried as trial 1)"
