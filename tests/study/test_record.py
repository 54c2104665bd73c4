"""One definition of the best trial, read from stored trials (in-memory Optuna studies, no trainer)."""

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.quality import Feasibility
from speedopt.status import Status
from speedopt.study import TrialRecord, best_trial, outcome, records
from speedopt.study._record import ranked


def _trial(ips, status="ok", feasible=True, role=None, **attrs):
    user = {"status": status, "message": "", "images_per_s": ips, "config": Knobs(batch=int(ips or 1)).to_dict(), **attrs}
    if feasible is not None:
        user["feasible"] = feasible
    if role:
        user["role"] = role
    return create_trial(state=TrialState.COMPLETE, value=ips or 0.0, user_attrs=user)


@pytest.fixture
def study():
    s = optuna.create_study(direction="maximize")
    for t in (
        _trial(10.0, role="baseline"),
        _trial(40.0, feasible=False, probe_map50_95=0.1, signature={"imgsz": 96}, map_loss=0.2),  # fastest, rejected
        _trial(30.0, feasible="unknown"),  # never probed: could not have been the best
        _trial(25.0),
        _trial(None, status="oom"),
        _trial(25.0),  # ties the earlier 25.0: the earlier trial wins
        _trial(35.0, feasible=None),  # measured, but no verdict was stored
    ):
        s.add_trial(t)
    return s


def test_feasibility_read_from_the_stored_attrs(study):
    got = [r.feasibility for r in records(study)]
    F = Feasibility
    assert got == [F.FEASIBLE, F.REJECTED, F.UNPROBED, F.FEASIBLE, F.NOT_MEASURED, F.FEASIBLE, F.UNPROBED]
    assert [r.ok_and_feasible for r in records(study)] == [True, False, False, True, False, True, False]


def test_best_is_the_fastest_measured_ok_and_feasible_earliest_on_ties(study):
    best = best_trial(records(study))
    assert best is not None and best.number == 3 and best.images_per_s == 25.0
    assert [r.number for r in ranked(records(study))] == [3, 5, 0]


def test_outcome_counts_and_speedup(study):
    result = outcome(study)
    assert result.complete == 7 and result.by_status == {Status.OK: 6, Status.OOM: 1}
    assert result.baseline.number == 0 and result.best.number == 3
    assert result.speedup is None and result.recommended.number == 3  # no finals: unconfirmed, no claim
    assert "no speedup claimed" in result.verdict_text()

    assert (result.unprobed, result.rejected) == (2, 1)
    assert [p.signature for p in result.probed] == [{"imgsz": 96}]
    assert result.protocol is None  # not made by speedopt search: no protocol to read
    assert result.counts_text() == "6 ok, 1 oom"


def test_no_best_without_a_feasible_trial():
    s = optuna.create_study(direction="maximize")
    s.add_trial(_trial(50.0, feasible=False))
    assert best_trial(records(s)) is None and outcome(s).speedup is None


def test_trials_without_a_measurement_are_not_records():
    s = optuna.create_study(direction="maximize")
    s.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0))
    s.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"status": "ok", "config": {}}))
    assert records(s) == [] and TrialRecord.from_frozen(s.trials[0]) is None
