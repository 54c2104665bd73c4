"""The step clock: steady-state throughput and the data-wait / compute split of a trial.

:class:`StepClock` is engine-independent: an engine calls ``batch_start`` when a batch has arrived
and ``batch_end`` when its step finished (device synchronised), and the clock turns that into
images/s over the measured window. It stops training by raising :class:`TrialFinished`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from speedopt.status import TrialFinished


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
