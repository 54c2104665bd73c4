"""The step clock: steady-state throughput and the data-wait / compute split of a trial.

:class:`StepClock` is engine-independent: an engine calls ``batch_start`` when a batch has arrived
and ``batch_end`` when its step finished (device synchronised), and the clock turns that into
images/s over the measured window. It stops training by raising :class:`TrialFinished`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from speedopt.status import TrialFinished

#: The adaptive window's stopping rule: the 90% confidence interval of the mean step time within +/-5%.
LEVEL = 0.90
TARGET = 0.05


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
    steps: int = 0  # measured steps (the window adapts between the minimum and the maximum)
    warmup: int = 0  # warm-up batches run before the window
    ci_rel: float | None = None  # half-width of the 90% confidence interval of the mean step time, / the mean
    converged: bool = False  # ci_rel reached the target before the maximum steps
    step_s: tuple[float, ...] = ()  # every measured step's interval, in order (the trace behind the figures)
    warmup_s: tuple[float, ...] = ()  # every warm-up batch's interval (the first: its step alone), in order


def preload() -> None:
    """Import what :func:`t_quantiles` needs (scipy.special, about 0.6 s), in a warm worker, once for every job."""
    import scipy.special  # noqa: F401


def t_quantiles(most: int, level: float = LEVEL) -> list[float]:
    """Student's t quantiles for a two-sided ``level`` interval of a mean of n samples, indexed by n (0..most).

    Computed once, before training starts: importing scipy (a few hundred ms) or calling it between two
    steps would land inside a measured step (:mod:`speedopt._student`).
    """
    from speedopt._student import t_quantiles as quantiles

    return [float("inf"), float("inf"), *quantiles(range(1, max(most, 2)), 0.5 + level / 2)]


def one_time_s(warmup_s: Sequence[float], steady_s: Sequence[float]) -> float | None:
    """The one-time cost in a trial's warm-up: what its warm-up steps took beyond as many steady steps (the
    measured window's median). None without both. For a compiled model this is the compile (and the eager
    first-step costs an uncompiled run pays too, a small share of it)."""
    if not warmup_s or not steady_s:
        return None
    steady = statistics.median(steady_s)
    return max(0.0, sum(warmup_s) - steady * len(warmup_s))


def mean_ci_rel(samples: list[float], quantiles: list[float]) -> float:
    """Half-width of the confidence interval of the mean of ``samples``, relative to the mean (the samples
    taken as independent); ``quantiles`` from :func:`t_quantiles`."""
    n = len(samples)
    mean = statistics.fmean(samples)
    if n < 2 or mean <= 0:
        return float("inf")
    return float(quantiles[min(n, len(quantiles) - 1)] * statistics.stdev(samples) / n**0.5 / mean)


class StepClock:
    """Times batches: the wait for each batch (data) and the step itself (compute).

    A step's interval runs from the end of the previous step to the end of this one, so the
    intervals tile the measured window and images_per_s = images / window length.

    A window is only done when its two halves also agree within ``target`` (a rate that still drifts is
    not steady, however tight its interval). Warm-up lasts ``warmup`` batches and, with dataloader workers, until the prefetch queue they
    filled while the model was built (``queued`` batches) has been consumed: after ``max(warmup,
    queued)`` batches, the first batch that had to wait for data shows the queue empty; a config
    whose queue never empties is compute-bound and the queue holds no bias (warm-up stops at
    ``warmup + 3 * queued`` batches). Then the window adapts: at least ``steps`` steps, and on until the
    90% confidence interval of the mean step time is within +/-``target`` of it, or ``max_steps``. An engine that
    names its optimizer's cadence (:meth:`cycle`: a step every N batches) gets a window of whole cycles.

    Epoch ends are part of the window, as they are part of a real run. The trainer's epoch-end work
    (scheduler step, EMA attributes, the loader's next pass; trials validate instantly and save no
    checkpoint) runs between one step's end and the next batch's arrival, so it lands in the next
    step's interval, counted as waiting for data. A trial trains on a subset just big enough for its
    batches, so its window crosses an epoch end only when the whole train set is smaller than that,
    and then once per epoch of batches, as the full run does. Validation, which the real run pays at
    each epoch end too, is timed separately for the report's projection.
    """

    def __init__(
        self,
        warmup: int,
        steps: int,
        progress: Callable[[str, int, int], None] | None = None,
        now: Callable[[], float] = time.perf_counter,
        max_steps: int | None = None,
        queued: int = 0,
        target: float = TARGET,
    ):
        if warmup < 1 or steps < 2:
            raise ValueError("need warmup >= 1 and steps >= 2")
        self.warmup, self.steps = warmup, steps
        self.max_steps = max(steps, max_steps or steps)
        self.queued, self.target = queued, target
        self._progress = progress
        self._now = now
        self.first_batch_at: float | None = None
        self._batches = 0
        self._warm: int | None = None  # warm-up batches, once warm-up is over
        self._last_end: float | None = None
        self._start: float | None = None
        self._intervals: list[float] = []
        self._waits: list[float] = []
        self._images: list[int] = []
        self._warm_s: list[float] = []
        self._ci: float | None = None
        self._quantiles = t_quantiles(self.max_steps)
        self._cycle = 1

    def cycle(self, batches: int) -> None:
        """Batches per optimizer step in the window (the trainer's nominal accumulation): the window then ends on a
        whole number of cycles, so it holds as many optimizer steps per batch as the run's steady state. Where the
        maximum window holds no whole cycle beyond the minimum, the window is as before."""
        if batches > 1 and -(-self.steps // batches) * batches <= self.max_steps:
            self._cycle = batches

    @property
    def batches(self) -> int:
        """Batches completed so far, warm-up included."""
        return self._batches

    @property
    def warmup_cap(self) -> int:
        """The most warm-up batches this clock runs."""
        return self.warmup + 3 * self.queued

    def batch_start(self) -> None:
        """A batch has arrived from the dataloader; its step begins."""
        self._start = self._now()
        if self.first_batch_at is None:
            self.first_batch_at = self._start

    def batch_end(self, images: int) -> None:
        """The step finished (device synchronised by the caller); raises TrialFinished when done."""
        end = self._now()
        wait = self._start - self._last_end if self._start is not None and self._last_end is not None else 0.0
        compute = end - self._start if self._start is not None else 0.0
        if self._warm is not None and self._last_end is not None:
            self._intervals.append(end - self._last_end)
            self._waits.append(wait)
            self._images.append(images)
        self._batches += 1
        if self._warm is None:
            self._warm_s.append(end - (self._last_end if self._last_end is not None else (self._start or end)))
        self._last_end = end
        if self._warm is None:
            self._end_warmup_if_due(waited=wait > 0.05 * compute)
            self._report("warmup", self._batches, self.warmup_cap if self._warm is None else self._batches)
            return
        self._report("measure", len(self._intervals), self.max_steps)
        if self._done():
            raise TrialFinished

    def _end_warmup_if_due(self, waited: bool) -> None:
        if self._batches < max(self.warmup, self.queued):
            return
        if self.queued == 0 or waited or self._batches >= self.warmup_cap:
            self._warm = self._batches

    def _done(self) -> bool:
        n = len(self._intervals)
        if n < self.steps or n % self._cycle:
            return False
        self._ci = mean_ci_rel(self._intervals, self._quantiles)
        return (self._ci <= self.target and self.drift() <= self.target) or n + self._cycle > self.max_steps

    def drift(self) -> float:
        """How far the mean step of the window's second half is from its first half's, relative to the
        whole window's mean: a window whose rate still moves has not reached steady state."""
        n = len(self._intervals)
        if n < 4:
            return float("inf")
        half = n // 2
        first, second = statistics.fmean(self._intervals[:half]), statistics.fmean(self._intervals[n - half :])
        return abs(second - first) / statistics.fmean(self._intervals)

    def _report(self, phase: str, done: int, of: int) -> None:
        if self._progress:
            self._progress(phase, done, of)

    def running(self) -> float | None:
        """Images/s over the steps measured so far (None before the first): what a pruner may judge mid-trial."""
        total = sum(self._intervals)
        return sum(self._images) / total if total > 0 else None

    @property
    def window(self) -> tuple[float, float] | None:
        """(start, end) of the measured window, once at least one step was measured."""
        if not self._intervals or self._last_end is None:
            return None
        return self._last_end - sum(self._intervals), self._last_end

    def stats(self) -> StepStats:
        """Statistics of the measured steps; needs at least the minimum steps measured."""
        if len(self._intervals) < self.steps:
            raise RuntimeError(f"only {len(self._intervals)} of {self.steps} steps measured")
        total = sum(self._intervals)
        ordered = sorted(self._intervals)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        window = self.window
        assert window is not None
        ci: float | None = self._ci if self._ci is not None else mean_ci_rel(self._intervals, self._quantiles)

        ci = ci if ci is not None and math.isfinite(ci) else None
        return StepStats(
            images_per_s=sum(self._images) / total,
            step_s_median=statistics.median(ordered),
            step_s_p90=p90,
            data_wait_fraction=min(1.0, max(0.0, sum(self._waits) / total)),
            measured_s=total,
            measured_images=sum(self._images),
            window=window,
            steps=len(self._intervals),
            warmup=self._warm or 0,
            ci_rel=ci,
            converged=ci is not None and ci <= self.target and self.drift() <= self.target,

            step_s=tuple(round(s, 5) for s in self._intervals),
            warmup_s=tuple(round(s, 5) for s in self._warm_s),

        )
