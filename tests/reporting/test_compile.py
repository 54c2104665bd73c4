"""The report's torch.compile section and the recommendation it changes: the command compiles only where the
decision chose a mode on the recommended trial, at the compiled rounds' images/s (no trainer: stored records)."""

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.reporting import recommend
from speedopt.reporting._compile import compile_section
from speedopt.search import SearchConfig, plan
from speedopt.status import Status
from speedopt.study import outcome, schema
from speedopt.study.record_types import CompileDecision, Repeat


@pytest.fixture(scope="module")
def protocol(demo_yaml):
    return plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off")).protocol


def _study(protocol, compiled, trial=0):
    study = optuna.create_study(direction="maximize")
    schema.write_protocol(study, protocol)
    config = Knobs(model="yolov5n", batch=8).to_dict()
    user = {"status": "ok", "message": "", "images_per_s": 10.0, "config": config, "requested": config, "feasible": True, "role": "baseline"}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=10.0, user_attrs=user))
    measured = [Repeat(r, 0, Status.OK, 10.0) for r in range(2)] + [Repeat(r, 1, Status.OK, v) for r, v in enumerate(compiled)]
    schema.write_compile(study, CompileDecision(trial, Knobs(**config), ("default",), 2, 100, 1000, 0.0, tuple(measured), (("default", 20.0),)))
    return study


def test_a_chosen_mode_is_in_the_command_at_the_compiled_rounds_speed(protocol):
    rec = recommend(_study(protocol, [13.0, 15.0]))
    assert rec is not None and rec.knobs.compile == "default" and rec.trial.config.compile == "off"
    assert "compile=True" in rec.command() and rec.images_per_s == 14.0
    section = "\n".join(compile_section(outcome(_study(protocol, [13.0, 15.0]))))
    assert "| 1 | 10.0 | 13.0 |" in section and "torch.compile: compile=default" in section and "pays back within" in section


def test_keep_eager_or_a_decision_on_another_trial_leaves_the_command_eager(protocol):
    for study in (_study(protocol, [9.0, 11.0]), _study(protocol, [13.0, 15.0], trial=7)):
        rec = recommend(study)
        assert rec is not None and rec.knobs.compile == "off" and "compile=" not in rec.command() and rec.images_per_s == 10.0
    assert "keep eager" in "\n".join(compile_section(outcome(_study(protocol, [9.0, 11.0]))))
