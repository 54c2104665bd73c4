"""The probe budget: how much a quality probe trains, when that is enough to judge, and how it grows.

A probe budget is *informative* when the baseline's probes could tell signatures apart
(:func:`not_informative`): they learned something (mAP50-95 of at least :data:`LOW_MAP`), and their seeds
agree (the seeds' spread is at most a quarter of that mAP, and at most twice the allowed loss). When
it is not, the budget grows (:meth:`ProbeBudget.grown`): epochs double up to four times what was
asked, then the fraction of the train set doubles up to all of it, then epochs double again, while
the baseline's probes stay inside a time cap. A candidate is then compared with the baseline on the
same seeds (:func:`paired_loss`): the same seed is the same data order and augmentation, so their
difference carries less noise than two independent runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LOW_MAP = 0.05  # below this baseline mAP50-95 a probe cannot tell signatures apart
MAX_EPOCHS = 300  # the ladder ends here, whatever the cap: longer is a training run, not a probe


@dataclass(frozen=True)
class ProbeBudget:
    """Epochs on a fraction of the train set: what one probe trains."""

    epochs: int
    fraction: float

    @property
    def size(self) -> float:
        """Epochs x fraction: what a probe's time roughly scales with."""
        return self.epochs * self.fraction

    def grown(self, asked: ProbeBudget) -> ProbeBudget | None:
        """The next budget up the ladder from this one (None at its end): epochs double up to 4x the asked
        epochs, then the fraction doubles up to 1, then epochs double up to :data:`MAX_EPOCHS`."""
        if self.epochs < 4 * asked.epochs:
            return ProbeBudget(min(2 * self.epochs, 4 * asked.epochs), self.fraction)
        if self.fraction < 1:
            return ProbeBudget(self.epochs, min(1.0, 2 * self.fraction))
        if self.epochs < MAX_EPOCHS:
            return ProbeBudget(min(2 * self.epochs, MAX_EPOCHS), 1.0)
        return None

    def __str__(self) -> str:
        return f"{self.epochs} epoch{'' if self.epochs == 1 else 's'} on {self.fraction:g} of the train set"


def not_informative(reference: float, spread: float, allowed: float) -> str:
    """Why probes of this budget cannot tell signatures apart; empty when they can.

    ``reference`` is the baseline's mean mAP50-95 over its seeds, ``spread`` their range. Probes that
    learned nothing score every candidate about as little, so a loss of 0.0000 would read as "kept"
    for a config that trains at a tenth of the image size; seeds that disagree by more than the loss
    the user allows cannot say whether a candidate kept it.
    """
    if reference < LOW_MAP:
        return f"the baseline probes reached only mAP50-95 {reference:.4f} (under {LOW_MAP:g}): they learned too little"
    if spread > reference / 4:
        return f"the baseline probes' seeds differ by {spread:.4f}, over a quarter of their mAP50-95 {reference:.4f}"
    if spread > 2 * allowed:
        return f"the baseline probes' seeds differ by {spread:.4f}, over twice the allowed loss {allowed:.4f}"
    return ""


def paired_loss(baseline: tuple[float, ...], candidate: tuple[float, ...]) -> tuple[float, float]:
    """The mAP loss and its interval's half-width, from probes paired seed by seed.

    The loss is the mean of the per-seed differences (baseline - candidate); the half-width is two
    standard errors of that mean (with two seeds: the two differences' distance apart). It is an
    estimate from few seeds, not a guarantee: more seeds (``--probe-seeds``) narrow it honestly.
    """
    if len(baseline) != len(candidate) or len(baseline) < 2:
        raise ValueError("paired probes need the same seeds, at least two")
    diffs = [b - c for b, c in zip(baseline, candidate, strict=True)]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    return mean, 2 * sd / math.sqrt(len(diffs))
