"""The probe budget: how much a quality probe trains, how far it may grow, and the paired loss it yields.

A budget is *informative* when the baseline's probes learned something (mAP50-95 of at least
:data:`LOW_MAP`, :func:`not_informative`): probes that learned nothing score every signature about
as little, so they decide nothing. The seeds' own spread is no reason to stay blind: candidate and
baseline share seeds (data order, augmentation), and the verdict is read from their per-seed
differences (:mod:`speedopt.quality._rule`), whose spread is what matters.

A budget grows along one ladder (:meth:`ProbeBudget.grown`): epochs double up to four times what was
asked, then the fraction of the train set doubles up to all of it, then epochs double again. It never
passes the share of the user's run a probe may train (:meth:`ProbeBudget.within`: 5% of ``--epochs``
x train images by default), whatever else allows it.
"""

from __future__ import annotations

from dataclasses import dataclass

LOW_MAP = 0.05  # below this baseline mAP50-95 a probe cannot tell signatures apart
#: One-sided confidence of a screening look's bounds (:data:`speedopt.quality._rule.SCREEN_CONFIDENCE`).
CONFIDENCE = 0.9


@dataclass(frozen=True)
class ProbeBudget:
    """Epochs on a fraction of the train set: what one probe trains."""

    epochs: int
    fraction: float

    @property
    def size(self) -> float:
        """Epochs x fraction: what a probe's time roughly scales with, in epochs of the whole train set."""
        return self.epochs * self.fraction

    def within(self, share: float, run_epochs: int) -> bool:
        """Whether one probe trains at most ``share`` of the user's run (``run_epochs`` x the train set)."""
        return self.size <= share * run_epochs + 1e-9

    def grown(self, asked: ProbeBudget) -> ProbeBudget:
        """The next budget up the ladder from this one: epochs double up to 4x the asked
        epochs, then the fraction doubles up to 1, then epochs double without end (the share cap ends it)."""
        if self.epochs < 4 * asked.epochs:
            return ProbeBudget(min(2 * self.epochs, 4 * asked.epochs), self.fraction)
        if self.fraction < 1:
            return ProbeBudget(self.epochs, min(1.0, 2 * self.fraction))
        return ProbeBudget(2 * self.epochs, 1.0)

    def twice(self, asked: ProbeBudget, share: float, run_epochs: int) -> ProbeBudget | None:
        """A confirmation's long budget: the first up the ladder from this one at least twice its size (the cheapest
        second length that shows how a loss moves with training); None when it would pass the share cap."""
        budget: ProbeBudget = self
        while budget.size < 2 * self.size - 1e-9:
            budget = budget.grown(asked)
        return budget if budget.within(share, run_epochs) else None

    def __str__(self) -> str:
        return f"{self.epochs} epoch{'' if self.epochs == 1 else 's'} on {self.fraction:g} of the train set"


def cap_text(share: float, run_epochs: int) -> str:
    """``5% of your 100-epoch run (5 epochs of the train set)``: the most one probe may train."""
    return f"{100 * share:g}% of your {run_epochs}-epoch run ({share * run_epochs:g} epochs of the train set)"


def not_informative(reference: float) -> str:
    """Why probes whose baseline scored ``reference`` (mean mAP50-95 over its seeds) decide nothing; empty
    when they can. A probe that learned nothing reads a loss of 0.0000 for a config that trains at a tenth of
    the image size."""
    if reference < LOW_MAP:
        return f"the baseline probes reached only mAP50-95 {reference:.4f} (under {LOW_MAP:g}): they learned too little"
    return ""


def t_quantile(n: int, confidence: float = CONFIDENCE) -> float:
    """Student's t quantile for a one-sided ``confidence`` bound on a mean of ``n`` paired differences."""
    from speedopt._student import t_quantiles

    return t_quantiles([n - 1], confidence)[0]
