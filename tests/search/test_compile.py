"""torch.compile decided once at the end (issue 46): the space's modes leave the trials, the recommendation is
measured eager and compiled in interleaved rounds (stored and resumed), and compile is recommended only where every
round measured it faster and the run wins back its one-time cost. No trainer: the measurement is a function of the
knobs here; the real one runs in tests/engines/test_compile.py."""

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.search import _compile as compile_mod
from speedopt.search._space import decide_at_end
from speedopt.status import Status
from speedopt.study import Space, outcome, records, schema
from speedopt.study.record_types import CompileDecision, Domain, Repeat


def _decision(eager, compiled, cost=10.0, epochs=100, images=1000, min_gain=0.0, failures=()):
    measured = [Repeat(r, 0, Status.OK, v) for r, v in enumerate(eager)]
    measured += [Repeat(r, 1, Status.OK if v else Status.INFEASIBLE, v) for r, v in enumerate(compiled)]
    costs = (("default", cost),) if cost is not None else ()
    return CompileDecision(0, Knobs(), ("default",), len(eager), epochs, images, min_gain, tuple(measured), costs, failures)


def test_compile_that_is_faster_in_every_round_and_wins_back_its_cost_is_chosen_with_its_payback():
    d = _decision([10.0, 10.0, 10.0], [12.5, 12.0, 13.0], cost=30.0)
    p = d.payback("default")
    assert p.speedup is not None and p.speedup.low == pytest.approx(1.2)
    assert p.saved_s == pytest.approx(100 * 1000 / 10.0 * (1 - 1 / 1.2))  # 100 epochs of 100 s, a sixth saved
    assert p.payback_epochs == pytest.approx(30.0 / (p.saved_s / 100))
    assert d.choice == "default"
    line = d.line()
    assert line.startswith("torch.compile: compile=default, 1.25x (interval 1.20-1.30x") and "30.0 s" in line


def test_compile_whose_cost_the_run_cannot_win_back_keeps_eager():
    d = _decision([10.0, 10.0], [12.0, 12.0], cost=500.0, epochs=1, images=100)  # 1 epoch saves 1.7 s
    assert d.choice is None
    assert d.line().startswith("torch.compile: keep eager: compile=default 1.20x") and "more than it saves over 1 epochs" in d.line()


def test_compile_not_faster_in_every_round_or_under_the_bar_keeps_eager():
    assert _decision([10.0, 10.0, 10.0], [12.0, 9.0, 13.0], cost=0.1).choice is None
    assert _decision([10.0, 10.0], [10.3, 10.4], cost=0.1, min_gain=0.05).choice is None
    assert "by at least 5%" in _decision([10.0, 10.0], [10.3, 10.4], cost=0.1, min_gain=0.05).line()


def test_a_mode_that_could_not_run_is_said_and_not_measured_again():
    d = _decision([10.0], [None], cost=None, failures=(("default", "infeasible: no C++ compiler"),))
    assert d.active() == () and d.complete and d.choice is None
    assert "compile=default could not run here (infeasible: no C++ compiler)" in d.line()


def test_the_record_round_trips_through_the_study_attrs():
    d = _decision([10.0, 11.0], [12.0, 13.0], failures=())
    assert CompileDecision.from_attr(d.to_attr()) == d


def test_a_space_that_lists_compile_modes_samples_none_and_decides_them_at_the_end():
    space = Space({"workers": Domain(choices=(0, 2)), "compile": Domain(choices=("off", "default", "max-autotune"))})
    trials, base, modes, notes = decide_at_end(space, Knobs(compile="default"))
    assert modes == ("default", "max-autotune") and "compile" not in trials.sampled() and trials.fixed()["compile"] == "off"
    assert base.compile == "off" and any("decided once at the end" in n for n in notes)
    pinned = Space({"compile": Domain(choices=("default",))})  # --fix compile=default: every trial compiles, as asked
    assert decide_at_end(pinned, Knobs(compile="default")) == (pinned, Knobs(compile="default"), (), [])


def _study():
    study = optuna.create_study(direction="maximize")
    config = Knobs(batch=8).to_dict()
    user = {"status": "ok", "message": "", "images_per_s": 10.0, "config": config, "requested": config, "feasible": True, "role": "baseline"}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=10.0, user_attrs=user))
    return study


def test_the_rounds_interleave_eager_and_compiled_store_each_measurement_and_resume():
    study, order = _study(), []
    speeds = {"off": [10.0, 10.0, 10.0], "default": [14.0, 13.0, 15.0]}

    def measure(knobs):
        order.append(knobs.compile)
        if len(order) == 4:
            raise KeyboardInterrupt  # interrupted in round 2
        rate = speeds[knobs.compile].pop(0)
        return TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=rate, steps=5,
                           compile_s=40.0 if knobs.compile != "off" else None)

    rec = records(study)[0]
    fresh = compile_mod.planned(rec, ("default",), 3, 100, 500, 0.0)
    with pytest.raises(KeyboardInterrupt):
        compile_mod.run(study, fresh, measure)
    assert len(schema.read_compile(study).measured) == 3  # what was measured is kept
    decision = compile_mod.run(study, fresh, measure)
    assert order == ["off", "default", "off", "default", "default", "off", "default"]  # resumed at the missing one
    assert decision.complete and decision.cost("default") == 40.0 and decision.choice == "default"
    result = outcome(study)
    assert result.compile == decision and result.compiled == "default"
