"""The rule: how paired looks at a candidate become a verdict about the user's run, at a stated risk.

A *look* probes the baseline and a candidate on the same seeds at one budget and pairs them seed by seed.
The rule has two stages, kept apart so that choosing a candidate and vouching for it never share a seed:

- **Screening** (liberal, :data:`SCREEN_CONFIDENCE` per bound): looks on the policy's seeds at the asked budget
  (more seeds, then larger budgets, while the interval straddles). It can say *lost*; what it calls kept is
  only a candidate for confirmation.
- **Confirmation** on fresh seeds (``--confirm-seeds`` of them from :data:`CONFIRM_SEED0` on, never used to screen),
  at the screened budget and at the next one up the ladder at least twice as long, within the share cap
  (:meth:`~speedopt.quality._budget.ProbeBudget.twice`), so every kept rests on looks at two probe lengths. The search's stated risk (``--risk``) is spent over every confirmation it starts: the
  i-th gets half of what the earlier ones left (:func:`confirm_risk`), split evenly over its looks. So the
  chance that any confirmed candidate loses more than allowed stays within the risk (normal per-seed
  differences), however many candidates were screened and however many looks each took.

At each look the spread of the differences has a floor (:func:`floor`): the median spread of every paired look
at that budget in this search, so two seeds that agree by chance cannot make a kept. And a kept must hold at the
run's length (:func:`run_loss`): where the loss grows from the short look to the long one, the growth is carried
on, linear in the log of the length, to the user's ``--epochs`` (no credit for a loss that shrinks). Nor is a kept
read where the baseline's own probes get worse from the short length to the long one (:func:`disrupted`): the
probes then watch the fine-tune's disruption, not how it ends.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from speedopt.quality._budget import CONFIDENCE, ProbeBudget, t_quantile
from speedopt.quality._policy import Feasibility

#: One-sided confidence of each bound of a screening look's interval (screening decides "lost" and who is confirmed).
SCREEN_CONFIDENCE = CONFIDENCE
#: The first fresh seed of a confirmation: screening uses seeds 0 to the policy's most (64 at most).
CONFIRM_SEED0 = 1000


@dataclass(frozen=True)
class Look:
    """One look: the budget, the seeds, both sides' per-seed mAP50-95 and the candidate's mean mAP50."""

    budget: ProbeBudget
    seeds: tuple[int, ...]
    base: tuple[float, ...]
    cand: tuple[float, ...]
    map50: float

    @property
    def diffs(self) -> tuple[float, ...]:
        """Per-seed losses: baseline minus candidate."""
        return tuple(b - c for b, c in zip(self.base, self.cand, strict=True))

    @property
    def loss(self) -> float:
        return statistics.fmean(self.diffs)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.diffs)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.cand)

    @property
    def reference(self) -> float:
        return statistics.fmean(self.base)


def half_width(look: Look, confidence: float, floor_sd: float = 0.0) -> float:
    """The one-sided ``confidence`` Student-t bound's half-width of the look's mean loss, its spread floored."""
    n = len(look.diffs)
    return t_quantile(n, confidence) * max(look.sd, floor_sd) / math.sqrt(n)


def floor(spreads: Sequence[float]) -> float:
    """The floor under a look's spread: the median spread of the search's paired looks at its budget (this one
    included), so a candidate's seeds that agree by chance count as no less noisy than the search's typical pair."""
    ordered = sorted(spreads)
    middle = len(ordered) // 2
    return 0.0 if not ordered else ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def verdict(loss: float, half: float, allowed: float) -> Feasibility:
    """Lost when the whole interval is beyond the allowed loss, kept when it is within, else unknown (straddles)."""
    if loss - half > allowed:
        return Feasibility.REJECTED
    if loss + half <= allowed:
        return Feasibility.FEASIBLE
    return Feasibility.UNKNOWN


def confirm_risk(risk: float, index: int) -> float:
    """The risk the ``index``-th confirmation of a search (0 first) may spend: half of what the earlier ones left,
    so all of them together never spend more than ``risk``."""
    return risk / (1 << (index + 1))


def disrupted(short: Look, long: Look, allowed: float) -> bool:
    """Whether the baseline's probes lose more than ``allowed`` from the short length to the long one, beyond their
    noise (and the upper end of the one-sided :data:`SCREEN_CONFIDENCE` bound of the per-seed change below zero). A
    fine-tune that is worse after more training is in its disruption phase (the learning rate's first peak): what a
    candidate that disrupts less (a frozen backbone) gains there is gone by the run's end, so no kept can be read
    from it. A decline within the allowed loss cannot fake an advantage beyond it."""
    change = [b - a for a, b in zip(short.base, long.base, strict=True)]
    n = len(change)
    mean = statistics.fmean(change)
    return mean < -allowed and mean + t_quantile(n, SCREEN_CONFIDENCE) * statistics.stdev(change) / math.sqrt(n) < 0


def run_loss(short: Look, long: Look, run_size: float) -> tuple[float, float]:
    """The loss predicted at the run's size (epochs of the whole train set) and the growth it carries on: the long
    look's loss plus, where the loss grew from the short look to the long one, that growth per doubling of the
    length times the doublings from the long look to the run. A loss that shrinks with length earns no credit."""
    growth = long.loss - short.loss
    if growth <= 0 or run_size <= long.budget.size or long.budget.size <= short.budget.size:
        return long.loss, 0.0
    steps = math.log(run_size / long.budget.size) / math.log(long.budget.size / short.budget.size)
    return long.loss + steps * growth, growth
