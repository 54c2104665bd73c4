"""Where a running job is: :class:`TrialProgress`, read by the runner from the child's ``progress.json``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrialProgress:
    """One progress update of a running trial, probe or labels job, as its child process last wrote it."""

    phase: str = "setup"  # setup, labels, warmup, measure (a trial's steps), epoch (a probe's); a probe's label before it
    done: int | None = None  # steps (or epochs) of the phase done so far ...
    of: int | None = None  # ... of this many (None: not counted)
    images_per_s: float | None = None  # a trial's running images/s, once steps are measured (all ranks under DDP)
    job: str | None = None  # which job of a command it is (speedopt ceilings: train, data or compute)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialProgress:
        """The update the child wrote (``phase``, ``done``, ``of`` and ``rate``, each where known)."""
        rate = data.get("rate")
        return cls(
            phase=str(data.get("phase", "setup")),
            done=_count(data.get("done")),
            of=_count(data.get("of")),
            images_per_s=float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None,
        )

    def text(self) -> str:
        """``measure 3/20`` (or ``setup``)."""
        where = f" {self.done}/{self.of}" if self.done is not None else ""
        return f"{self.phase}{where}"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


Progress = Callable[[TrialProgress], None]
