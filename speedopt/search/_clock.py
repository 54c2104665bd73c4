"""The search's stopwatch: wall time per stage, added to the study's bill (:class:`~speedopt.study.Bill`).

Stages nest (a trial's quality probes run inside the trials' loop); each second counts once, in the
innermost stage. When the outermost stage ends, this process's seconds are added to the study's bill, so
a resumed search and several workers add up; an interrupted stage is billed as far as it ran.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from speedopt.study import Stage, schema

if TYPE_CHECKING:
    import optuna


class Clock:
    """Times the stages of one run of a search; :meth:`bind` names the study whose bill they go to."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._inner: list[float] = []  # per open stage: seconds its nested stages took
        self._study: optuna.Study | None = None

    def bind(self, study: optuna.Study) -> None:
        self._study = study

    def add(self, stage: Stage, seconds: float) -> None:
        """Bill ``seconds`` measured elsewhere (the copies made before the study opened)."""
        if seconds > 0:
            self.spent[stage] = self.spent.get(stage, 0.0) + seconds
            self._flush()

    @contextlib.contextmanager
    def stage(self, name: Stage) -> Iterator[None]:
        """Time the block as ``name``, less any stage nested in it."""
        started = time.monotonic()
        self._inner.append(0.0)
        try:
            yield
        finally:
            elapsed = time.monotonic() - started
            self.spent[name] = self.spent.get(name, 0.0) + elapsed - self._inner.pop()
            if self._inner:
                self._inner[-1] += elapsed
            else:
                self._flush()

    def _flush(self) -> None:
        if self._study is not None and self.spent and not self._inner:
            schema.add_to_bill(self._study, self.spent)
            self.spent = {}
