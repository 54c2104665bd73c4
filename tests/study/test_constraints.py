"""A trial's constraints as the list every Optuna reader knows (issue 56): optuna-dashboard reads only it; older
studies (named constraints) read, served and copied with it, a never-judged accuracy change infeasible."""

import optuna
from optuna.trial import TrialState, create_trial

from speedopt.study import schema


def _older(study: optuna.Study, verdict: str, map_loss: float) -> None:
    """A trial as a study stored it before issue 56: the named constraints only."""
    study.add_trial(create_trial(
        state=TrialState.COMPLETE, value=1.0, user_attrs={"accuracy": {"verdict": verdict}},
        system_attrs={"constraints:measured": 0.0, "constraints:map_loss": map_loss},
    ))


def test_a_trial_stores_its_constraints_as_the_list(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/s.db", direction="maximize")
    trial = study.ask()
    schema.write_constraints(trial, 1.0, -0.5)
    study.tell(trial, 0.0)
    (frozen,) = study.trials
    assert frozen.system_attrs["constraints"] == [1.0, -0.5]
    assert frozen.constraints == {"0": 1.0, "1": -0.5}  # as Optuna reads the list: measured, map_loss
    assert schema.constraint_list(frozen) == [1.0, -0.5]


def test_a_never_judged_accuracy_change_of_an_older_study_is_read_infeasible():
    """Stored feasible (0) before issue 56; Verdict.constraint stores 1 now (tests/quality/test_judge.py)."""
    study = optuna.create_study(direction="maximize")
    _older(study, "unprobed", 0.0)
    _older(study, "feasible", -0.01)
    study.add_trial(create_trial(state=TrialState.PRUNED, value=None))  # no constraints at all
    assert [schema.constraint_list(t) for t in study.trials] == [[0.0, 1.0], [0.0, -0.01], None]


def test_an_older_study_is_copied_with_the_list(tmp_path):
    """What `speedopt import` and `export` do: optuna.copy_study through with_constraint_lists."""
    source = optuna.create_study(study_name="old", storage=f"sqlite:///{tmp_path}/old.db", direction="maximize")
    _older(source, "unprobed", 0.0)
    _older(source, "rejected", 0.03)
    before = [dict(t.system_attrs) for t in source.trials]
    storage = optuna.storages.get_storage(f"sqlite:///{tmp_path}/old.db")
    optuna.copy_study(from_study_name="old", from_storage=schema.with_constraint_lists(storage), to_storage=f"sqlite:///{tmp_path}/new.db")
    copied = optuna.load_study(study_name="old", storage=f"sqlite:///{tmp_path}/new.db").trials
    assert [t.system_attrs["constraints"] for t in copied] == [[0.0, 1.0], [0.0, 0.03]]
    assert copied[0].constraints == {"0": 0.0, "1": 1.0}  # one form: the named ones are not copied beside it
    assert [dict(t.system_attrs) for t in optuna.load_study(study_name="old", storage=f"sqlite:///{tmp_path}/old.db").trials] == before
