"""How a trial, probe or validation job ends: the closed set of outcomes, and the one mapping from
an exception to an outcome.

A crash is ``error`` with its message, never a bad score. Inside a job process every exception goes
through :func:`status_of`; the parent maps every way the process itself can end (exit code, signal,
timeout) in :func:`speedopt.measure.run_job`.
"""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """How a trial ended."""

    OK = "ok"
    OOM = "oom"
    TIMEOUT = "timeout"
    INFEASIBLE = "infeasible"
    ERROR = "error"


class TrialFinished(Exception):
    """Raised from the trainer's batch hook once warm-up and measured steps are done: stops training."""


class TrialRejected(Exception):
    """Raised inside a trial when the trainer would not run the knobs as asked (it silently halved the
    batch after an OOM, or dropped the RAM cache); carries the status to report."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


def is_oom(exc: BaseException) -> bool:
    """Out of memory: host (MemoryError) or device (torch's OutOfMemoryError, or its message)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return "out of memory" in str(exc).lower()


def status_of(exc: BaseException) -> tuple[Status, str]:
    """The status and one-line message for an exception that ended a trial or probe."""
    if isinstance(exc, TrialRejected):
        return exc.status, str(exc)
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return (Status.OOM if is_oom(exc) else Status.ERROR), first
