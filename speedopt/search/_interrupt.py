"""Ctrl-C during a search: the trial it interrupted is retried on the next run, and no traceback is shown.

Optuna fails a trial whose objective raised ``KeyboardInterrupt`` and logs it with its traceback (a
screen of frames for one key press); nothing would ever run it again, so an interrupted baseline
left the study without one. :class:`Interrupts` wraps the objective to note which trial was
interrupted (and why, in the trial's attrs, for the report), keeps Optuna from logging it, and hands
the trial to :func:`speedopt.study.retry_interrupted`, as a killed trial is retried.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from speedopt.search._recovery import say_interrupted

if TYPE_CHECKING:
    import optuna

#: The Optuna logger that reports a failed trial (with the traceback of its exception).
OPTUNA_LOGGER = "optuna.study._optimize"


class Interrupts(logging.Filter):
    """The trials this process was running when Ctrl-C came; as a log filter, silences Optuna on them."""

    def __init__(self) -> None:
        super().__init__()
        self.trials: dict[int, int] = {}  # trial id -> trial number

    def guard(self, objective: Callable[[optuna.Trial], float]) -> Callable[[optuna.Trial], float]:
        """``objective`` that notes the trial it was running when interrupted (and says so in its attrs)."""

        def run_one(trial: optuna.Trial) -> float:
            try:
                return objective(trial)
            except KeyboardInterrupt:
                self.trials[trial._trial_id] = trial.number
                with contextlib.suppress(Exception):  # a second Ctrl-C or a lost storage: the next start retries it
                    say_interrupted(trial)
                raise

        return run_one

    def filter(self, record: logging.LogRecord) -> bool:
        """Drop Optuna's "Trial N failed ..." lines (and traceback) for an interrupted trial."""
        message = record.getMessage()
        return not any(message.startswith(f"Trial {number} failed") for number in self.trials.values())

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """While the loop runs, Optuna logs nothing about the trials Ctrl-C interrupted."""
        logger = logging.getLogger(OPTUNA_LOGGER)
        logger.addFilter(self)
        try:
            yield
        finally:
            logger.removeFilter(self)
