"""The finals: which configs are re-measured, in which order, how they are stored and resumed (no trainer:
the measurement is a function of the knobs here; the real one runs in tests/search/test_run.py)."""

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.search import _finals as finals_mod
from speedopt.status import Status
from speedopt.study import Finals, finalists, outcome, records


def _trial(batch, ips, role=None, feasible=True):
    config = Knobs(batch=batch).to_dict()
    user = {"status": "ok", "message": "", "images_per_s": ips, "config": config, "requested": config, "feasible": feasible}
    if role:
        user["role"] = role
    return create_trial(state=TrialState.COMPLETE, value=ips, user_attrs=user)


@pytest.fixture
def study():
    s = optuna.create_study(direction="maximize")
    for t in (
        _trial(8, 10.0, role="baseline"),
        _trial(16, 14.0),
        _trial(16, 13.0),  # the same config again: one finalist per config
        _trial(32, 30.0, feasible=False),  # fastest, rejected by the mAP constraint: never a finalist
        _trial(8, 11.0),  # the baseline's config: not a finalist
        _trial(4, 12.0),
        _trial(2, 11.5),
    ):
        s.add_trial(t)
    return s


def test_finalists_are_the_fastest_distinct_feasible_configs_after_the_baseline(study):
    assert finalists(records(study), 2) == (0, 1, 5)
    assert finalists(records(study), 9) == (0, 1, 5, 6)


def _measure_by_batch(speeds, order):
    def measure(knobs):
        order.append(knobs.batch)
        rate = speeds[knobs.batch].pop(0)
        status = Status.OK if rate is not None else Status.OOM
        return TrialResult(status, "", knobs, knobs, "cpu", "ultralytics", images_per_s=rate, ci_rel=0.02, steps=20)

    return measure


def test_rounds_interleave_the_baseline_and_every_finalist_and_store_each_measurement(study):
    order = []
    speeds = {8: [10.0, 9.0, 11.0], 16: [15.0, 13.5, 16.5], 4: [14.0, 12.8, 15.5]}  # both clear the bar, close: every round runs
    finals = finals_mod.run(study, records(study), 2, 3, _measure_by_batch(speeds, order))
    assert order == [8, 16, 4] * 3
    assert finals.complete and len(finals.measured) == 9
    assert finals.series(1) == [15.0, 13.5, 16.5]
    stored = Finals.from_attr(study.user_attrs["finals"])
    assert stored == finals
    result = outcome(study)
    assert result.recommended.number == 1 and result.speedup.median == pytest.approx(1.5)
    assert result.speedup.low == pytest.approx(1.5) and result.speedup.certain
    assert result.finals.speedups()[5].low == pytest.approx(1.4)  # trial 5 (batch 4) clears, with a lower median


def test_no_certain_gain_recommends_the_baseline(study):
    speeds = {8: [10.0, 10.0], 16: [11.0, 9.5], 4: [9.0, 10.2]}
    finals_mod.run(study, records(study), 2, 2, _measure_by_batch(speeds, []))
    result = outcome(study)
    assert result.keep_settings and result.recommended.number == 0 and result.speedup is None
    assert result.verdict_text().startswith("no measurable gain on this machine: keep your settings")


def test_a_failed_repeat_is_stored_with_its_status_and_leaves_its_round_out(study):
    speeds = {8: [10.0, 10.0, 10.0], 16: [20.0, None, 21.0], 4: [1.0, 1.0, 1.0]}
    finals = finals_mod.run(study, records(study), 2, 3, _measure_by_batch(speeds, []))
    assert [m.status for m in finals.measured if m.of == 1] == ["ok", "oom", "ok"]
    assert finals.speedups()[1].rounds == 2


def test_interrupted_finals_resume_where_they_stopped(study):
    order = []
    speeds = {8: [10.0, 10.0], 16: [20.0, 20.0], 4: [19.0, 19.0]}
    measure = _measure_by_batch(speeds, order)

    def interrupted(knobs):
        if len(order) == 4:
            raise KeyboardInterrupt
        return measure(knobs)

    with pytest.raises(KeyboardInterrupt):
        finals_mod.run(study, records(study), 2, 2, interrupted)
    assert len(Finals.from_attr(study.user_attrs["finals"]).measured) == 4
    finals = finals_mod.run(study, records(study), 2, 2, measure)
    assert order == [8, 16, 4, 8, 16, 4] and finals.complete


def test_nothing_to_compare_runs_no_finals():
    s = optuna.create_study(direction="maximize")
    s.add_trial(_trial(8, 10.0, role="baseline"))
    s.add_trial(_trial(8, 10.5))
    assert finals_mod.run(s, records(s), 3, 3, lambda knobs: pytest.fail("measured")) is None
    assert outcome(s).recommended.number == 0 and outcome(s).speedup is None


def test_new_finalists_keep_the_earlier_finals_measurements(study):
    speeds = {8: [10.0] * 4, 16: [15.0] * 4, 4: [12.0] * 2}
    finals_mod.run(study, records(study), 1, 2, _measure_by_batch(speeds, []))
    first = study.user_attrs["finals"]
    finals = finals_mod.run(study, records(study), 2, 2, _measure_by_batch(speeds, []))
    assert finals.trials == (0, 1, 5) and len(finals.measured) == 6
    assert study.user_attrs["finals_previous"] == [first]


def test_a_finalist_whose_round_misses_the_bar_is_dropped_and_the_decision_is_the_full_rounds(study):
    order = []
    speeds = {8: [10.0, 10.0, 10.0], 16: [13.0, 11.0, 12.0], 4: [9.0, 30.0, 30.0]}  # batch 4 at 0.9x in round 1
    finals = finals_mod.run(study, records(study), 2, 3, _measure_by_batch(speeds, order))
    assert order == [8, 16, 4, 8, 16, 8, 16]  # batch 4 never again: min-max can only fall
    assert [d.trial for d in finals.dropped] == [5] and finals.dropped[0].after == 0
    assert finals.complete and finals.rounds == 3 and finals.decision().choice == 1
    assert Finals.from_attr(study.user_attrs["finals"]) == finals
    assert any("dropped after round 1" in line for line in finals.notes())


def test_when_no_finalist_can_clear_the_bar_the_finals_end(study):
    order = []
    speeds = {8: [10.0] * 3, 16: [9.0] * 3, 4: [9.5] * 3}
    finals = finals_mod.run(study, records(study), 2, 3, _measure_by_batch(speeds, order))
    assert order == [8, 16, 4] and finals.end == 1 and finals.complete
    assert outcome(study).keep_settings


def test_a_lone_leader_far_above_the_bar_skips_the_last_round_and_a_close_one_does_not(study):
    order = []
    speeds = {8: [10.0] * 3, 16: [20.0, 20.5, 20.0], 4: [9.0] * 3}
    finals = finals_mod.run(study, records(study), 2, 3, _measure_by_batch(speeds, order))
    assert order == [8, 16, 4, 8, 16] and finals.end == 2 and "chance" in finals.end_why
    assert outcome(study).recommended.number == 1 and outcome(study).speedup.rounds == 2

    close = optuna.create_study(direction="maximize")
    for t in study.get_trials():
        close.add_trial(create_trial(state=t.state, value=t.value, user_attrs={k: v for k, v in t.user_attrs.items() if k != "finals"}))
    order = []
    speeds = {8: [10.0] * 3, 16: [10.6, 10.7, 10.6], 4: [9.0] * 3}  # 6-7% above the bar: a third round could miss it
    finals = finals_mod.run(close, records(close), 2, 3, _measure_by_batch(speeds, order))
    assert order == [8, 16, 4, 8, 16, 8, 16] and finals.end is None


def test_a_changed_bar_looks_at_the_drops_again(study):
    speeds = {8: [10.0] * 6, 16: [10.3] * 6, 4: [10.4] * 6}
    finals = finals_mod.run(study, records(study), 2, 2, _measure_by_batch(speeds, []), min_gain=0.05)
    assert finals.end == 1 and len(finals.measured) == 3
    finals = finals_mod.run(study, records(study), 2, 2, _measure_by_batch(speeds, []), min_gain=0.0)
    assert finals.complete and not finals.dropped and len(finals.measured) == 6 and finals.decision().choice == 5


def test_a_finalist_far_behind_the_leader_is_dropped_and_a_close_one_is_not(study):
    order = []
    speeds = {8: [10.0] * 3, 16: [20.0, 19.0, 21.0], 4: [12.0] * 3, 2: [19.0, 20.0, 20.0]}
    finals = finals_mod.run(study, records(study), 3, 3, _measure_by_batch(speeds, order))
    assert finals.trials == (0, 1, 5, 6)
    behind = [d for d in finals.dropped if d.trial == 5]  # 1.2x against the leader's 2.0x after one round
    assert behind and behind[0].after == 0 and "far behind trial 1" in behind[0].why
    assert all(d.trial != 6 for d in finals.dropped)  # 1.9x: close to the leader, measured on
    assert order[:4] == [8, 16, 4, 2] and 4 not in order[4:] and finals.complete


def test_finalists_close_to_each_other_and_far_above_the_bar_skip_the_last_round(study):
    order = []
    speeds = {8: [10.0] * 3, 16: [20.0, 20.4, 20.0], 4: [19.6, 20.0, 19.8]}  # 2.0x and 1.98x: within 5% of each other
    finals = finals_mod.run(study, records(study), 2, 3, _measure_by_batch(speeds, order))
    assert order == [8, 16, 4] * 2 and finals.end == 2 and "within 5% of each other" in finals.end_why
    assert outcome(study).recommended.number in (1, 5) and outcome(study).speedup.rounds == 2
