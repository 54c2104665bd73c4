"""Ctrl-C during a search: the interrupted trial is noted (and why, in its attrs) and Optuna says nothing of it."""

import logging

import optuna
import pytest
from optuna.trial import TrialState

from speedopt.search._interrupt import OPTUNA_LOGGER, Interrupts
from speedopt.search._recovery import INTERRUPTED
from speedopt.study import Need, open_storage, schema


@pytest.fixture
def study(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(f"sqlite:///{tmp_path}/s.db", Need.CREATE)
    return optuna.create_study(study_name="s", storage=storage, direction="maximize")


def test_ctrl_c_notes_the_trial_and_silences_optunas_traceback_of_it(study, caplog):
    interrupts = Interrupts()

    def objective(trial):
        raise KeyboardInterrupt

    caplog.set_level(logging.WARNING, logger="optuna")
    optuna.logging.enable_propagation()
    try:
        with interrupts.quiet(), pytest.raises(KeyboardInterrupt):
            study.optimize(interrupts.guard(objective))
        logging.getLogger(OPTUNA_LOGGER).warning("Trial 7 failed with value None.")  # another trial: still said
    finally:
        optuna.logging.disable_propagation()
    (trial,) = study.trials
    assert interrupts.trials == {trial._trial_id: 0}
    assert trial.state == TrialState.FAIL and trial.user_attrs[schema.FAILED_BECAUSE] == INTERRUPTED
    said = {r.getMessage() for r in caplog.records}
    assert said == {"Trial 7 failed with value None."}  # nothing about trial 0, no traceback
    assert not logging.getLogger(OPTUNA_LOGGER).filters  # the filter is gone after the loop
