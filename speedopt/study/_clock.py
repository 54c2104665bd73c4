"""The search's stopwatch: wall time per stage, added to the study's bill (:class:`~speedopt.study._bill.Bill`).

Stages nest (a trial's quality probes run inside the trials' loop); each second counts once, in the
innermost stage. When the outermost stage ends, this process's seconds are added to the study's bill, so
a resumed search and several workers add up; an interrupted stage is billed as far as it ran.

Two kinds of seconds are not a stage's work. Time spent waiting for the host lock (another process was
measuring on this host: :func:`~speedopt.isolation.lock_use`) is billed apart, as ``waited``. And a run
that measures nothing (a rerun of a finished study: no trial, no finals round, no copy) adds nothing at
all: its seconds, the warm worker's start among them, stay off the bill until this run does some work.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from speedopt.isolation import lock_use
from speedopt.study._bill import Stage
from speedopt.study._schema import add_to_bill

if TYPE_CHECKING:
    import optuna


@dataclass
class _Open:
    """One stage still running: seconds its nested stages took, and the lock waits they already billed."""

    nested_s: float = 0.0
    nested_wait_s: float = 0.0


class Clock:
    """Times the stages of one run of a search; :meth:`bind` names the study whose bill they go to."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.waited_s = 0.0  # waiting for the host lock, not yet on the bill
        self._open: list[_Open] = []
        self._study: optuna.Study | None = None
        self._held = lock_use().held  # measurements this thread held the lock for before this run
        self._worked = False

    def bind(self, study: optuna.Study) -> None:
        self._study = study

    @property
    def worked(self) -> bool:
        """This run measured something (held the host lock for a job) or did other billed work (:meth:`add`)."""
        self._worked = self._worked or lock_use().held > self._held
        return self._worked

    def add(self, stage: Stage, seconds: float, work: bool = False) -> None:
        """Bill ``seconds`` measured elsewhere: work done (``work``: the copies made before the study opened), or a
        cost of this run that is billed only once the run works (the warm worker's start)."""
        if seconds > 0:
            self.spent[stage] = self.spent.get(stage, 0.0) + seconds
            self._worked = self._worked or work
            self._flush()

    @contextlib.contextmanager
    def stage(self, name: Stage) -> Iterator[None]:
        """Time the block as ``name``, less any stage nested in it and any wait for the host lock."""
        started, waited = time.monotonic(), lock_use().waited_s
        self._open.append(_Open())
        try:
            yield
        finally:
            elapsed, wait = time.monotonic() - started, lock_use().waited_s - waited
            inner = self._open.pop()
            own_wait = max(0.0, wait - inner.nested_wait_s)
            self.spent[name] = self.spent.get(name, 0.0) + max(0.0, elapsed - inner.nested_s - own_wait)
            self.waited_s += own_wait
            if self._open:
                self._open[-1].nested_s += elapsed
                self._open[-1].nested_wait_s += wait
            else:
                self._flush()

    def _flush(self) -> None:
        """Add what this run spent to the study's bill: only once it worked, and never inside a stage."""
        if self._study is None or self._open or not self.worked or not (self.spent or self.waited_s):
            return
        add_to_bill(self._study, self.spent, self.waited_s)
        self.spent, self.waited_s = {}, 0.0
