"""The stop rules' one shape: what the trials loop asks after each trial this process ran.

A stop rule is asked in the loop (:mod:`speedopt.search._trials`), between Optuna's ``Study.optimize`` calls and not
inside one of its callbacks, so a rule may run what it needs to answer (the ceiling stop measures the best config's
ceilings there). Every rule is asked after every trial, in the list's order; the loop stops when one says why.

The other kinds of rule have a shape each: a skip (:class:`speedopt.search._skip.Skips`) is asked before a trial
measures, a prune (:mod:`speedopt.search._prune`) while it measures, by Optuna.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


class StopRule(abc.ABC):
    """A rule that may end the study's trials after ``trial``."""

    #: The study keeps the stop's why for the report (:func:`~speedopt.search._budget.stop_study`); the budget's
    #: (the study holds its trials) is no news and is not kept.
    kept: ClassVar[bool] = True

    @abc.abstractmethod
    def why(self, study: optuna.Study, trial: FrozenTrial) -> str | None:
        """Why the study's trials stop after ``trial`` (None: go on)."""
