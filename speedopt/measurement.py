"""What a trial measures, and the closed set of ways a trial can end.

:class:`StepClock` is engine-independent: an engine calls ``batch_start`` when a batch has arrived
and ``batch_end`` when its step finished, and the clock turns that into steady-state throughput and
a data-wait / compute split. :class:`TrialResult` is what crosses from the trial to everything else.
"""

from __future__ import annotations

import dataclasses
import enum
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """How a trial ended. A crash is ``error`` with its message, never a bad score."""

    OK = "ok"
    OOM = "oom"
    TIMEOUT = "timeout"
    INFEASIBLE = "infeasible"
    ERROR = "error"


class TrialFinished(Exception):
    """Raised from the trainer's batch hook once warm-up and measured steps are done: stops training."""


class TrialRejected(Exception):
    """Raised inside a trial when the trainer would not run the knobs as asked (e.g. it silently
    halved the batch after an OOM, or dropped the RAM cache); carries the status to report."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class StepStats:
    """Timing of the measured steps (warm-up excluded). Times are seconds on a monotonic clock."""

    images_per_s: float
    step_s_median: float
    step_s_p90: float
    data_wait_fraction: float
    measured_s: float
    measured_images: int
    window: tuple[float, float]


class StepClock:
    """Times batches: the wait for each batch (data) and the step itself (compute).

    A step's interval runs from the end of the previous step to the end of this one, so the
    intervals tile the measured window and images_per_s = images / window length.
    """

    def __init__(
        self,
        warmup: int,
        steps: int,
        progress: Callable[[str, int, int], None] | None = None,
        now: Callable[[], float] = time.perf_counter,
    ):
        if warmup < 1 or steps < 2:
            raise ValueError("need warmup >= 1 and steps >= 2")
        self.warmup, self.steps = warmup, steps
        self._progress = progress
        self._now = now
        self.first_batch_at: float | None = None
        self._batches = 0
        self._last_end: float | None = None
        self._start: float | None = None
        self._intervals: list[float] = []
        self._waits: list[float] = []
        self._images: list[int] = []

    @property
    def batches(self) -> int:
        """Batches completed so far, warm-up included."""
        return self._batches

    def batch_start(self) -> None:
        """A batch has arrived from the dataloader; its step begins."""
        self._start = self._now()
        if self.first_batch_at is None:
            self.first_batch_at = self._start

    def batch_end(self, images: int) -> None:
        """The step finished (device synchronised by the caller); raises TrialFinished when done."""
        end = self._now()
        if self._batches >= self.warmup and self._last_end is not None and self._start is not None:
            self._intervals.append(end - self._last_end)
            self._waits.append(self._start - self._last_end)
            self._images.append(images)
        self._batches += 1
        self._last_end = end
        if self._progress:
            if self._batches <= self.warmup:
                self._progress("warmup", self._batches, self.warmup)
            else:
                self._progress("measure", self._batches - self.warmup, self.steps)
        if self._batches >= self.warmup + self.steps:
            raise TrialFinished

    @property
    def window(self) -> tuple[float, float] | None:
        """(start, end) of the measured window, once at least one step was measured."""
        if not self._intervals or self._last_end is None:
            return None
        return self._last_end - sum(self._intervals), self._last_end

    def stats(self) -> StepStats:
        """Statistics of the measured steps; needs all steps measured."""
        if len(self._intervals) < self.steps:
            raise RuntimeError(f"only {len(self._intervals)} of {self.steps} steps measured")
        total = sum(self._intervals)
        ordered = sorted(self._intervals)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        window = self.window
        assert window is not None
        return StepStats(
            images_per_s=sum(self._images) / total,
            step_s_median=statistics.median(ordered),
            step_s_p90=p90,
            data_wait_fraction=min(1.0, max(0.0, sum(self._waits) / total)),
            measured_s=total,
            measured_images=sum(self._images),
            window=window,
        )


@dataclass(frozen=True)
class TrialResult:
    """One trial's outcome and measurements; ``None`` where a figure was not measured."""

    status: Status
    message: str
    config: dict[str, Any]
    requested: dict[str, Any]
    device: str
    engine: str
    engine_version: str | None = None
    notes: tuple[str, ...] = ()
    images_per_s: float | None = None
    step_s_median: float | None = None
    step_s_p90: float | None = None
    data_wait_fraction: float | None = None
    setup_s: float | None = None
    measured_s: float | None = None
    wall_s: float | None = None
    peak_ram_mb: float | None = None
    peak_gpu_mem_mb: float | None = None
    gpu_util_mean: float | None = None
    cpu_util_mean: float | None = None
    steps: int | None = None
    warmup: int | None = None
    images_used: int | None = None
    images_total: int | None = None
    train_build_s: float | None = None  # train dataset build (label scan + cache fill) for images_used
    val_build_s: float | None = None
    val_images: int | None = None
    network_blocked: tuple[str, ...] = ()
    log_tail: str = field(default="", repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the ``--json`` output and the trial's stored attrs)."""
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        data["notes"] = list(self.notes)
        data["network_blocked"] = list(self.network_blocked)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """Inverse of :meth:`to_dict`."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values["status"])
        values["notes"] = tuple(values.get("notes", ()))
        values["network_blocked"] = tuple(values.get("network_blocked", ()))
        return cls(**values)


def status_of(exc: BaseException) -> tuple[Status, str]:
    """The status and one-line message for an exception that ended a trial or probe."""
    if isinstance(exc, TrialRejected):
        return exc.status, str(exc)
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, MemoryError) or "out of memory" in text.lower() or type(exc).__name__ == "OutOfMemoryError":
        return Status.OOM, first
    return Status.ERROR, first
