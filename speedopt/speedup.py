"""Speedups that respect noise: paired ratios over interleaved rounds, and the decision rule.

A config and the baseline are measured in the same rounds (baseline, c1, c2, ..., baseline, c1, ...),
so drift and neighbours hit both alike. Each round gives one paired ratio config/baseline; the
speedup is their median and its interval the min-max of the ratios (with 2-5 rounds a bootstrap
interval would only restate the min-max). A gain is claimed only when the whole interval lies
above 1.0 and at least ``min_gain`` above it: the slowest round still beat the baseline measured
beside it by that much. The margin exists because differences on a noisy machine move between
sessions: the demo's cache=ram measured 1.03x (interval 1.03-1.06x) in one session and 0.95x
(0.95-0.96x) in the next.
"""


from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K")

#: How the interval is computed, for every place that prints one.
METHOD = "min-max of the paired per-round ratios"


@dataclass(frozen=True)
class Speedup:
    """A config's speedup over the baseline from paired rounds: median ratio and its min-max interval."""

    median: float
    low: float
    high: float
    rounds: int  # paired rounds (both measured ok)

    @property
    def certain(self) -> bool:
        """The interval lies above 1.0: every round measured the config faster than the baseline beside it."""
        return self.clears(0.0)

    def clears(self, min_gain: float) -> bool:
        """The interval lies above 1.0 and at least ``min_gain`` above it (0.05: every round 5% faster)."""
        return self.rounds >= 2 and self.low > 1.0 and self.low >= 1.0 + min_gain

    def text(self) -> str:
        """``1.42x (interval 1.31-1.55x, min-max of 3 paired rounds)``."""
        return f"{self.median:.2f}x (interval {self.low:.2f}-{self.high:.2f}x, min-max of {self.rounds} paired rounds)"


def paired(config: Sequence[float | None], baseline: Sequence[float | None]) -> Speedup | None:
    """The speedup from per-round images/s of a config and the baseline (None: a round failed or missing).

    Rounds where either side has no measurement are left out; None when fewer than one pair remains.
    """
    ratios = [c / b for c, b in zip(config, baseline) if c is not None and b is not None and b > 0]
    if not ratios:
        return None
    return Speedup(statistics.median(ratios), min(ratios), max(ratios), len(ratios))


@dataclass(frozen=True)
class Decision(Generic[K]):
    """Which candidate to recommend, and why: ``choice`` is None when no gain is measurable."""

    choice: K | None
    speedup: Speedup | None  # the chosen candidate's (None with no choice)
    reason: str


NO_GAIN = "no measurable gain on this machine: keep your settings"


def decide(candidates: Mapping[K, Speedup | None], min_gain: float = 0.0) -> Decision[K]:
    """The candidate with the best median speedup among those whose interval lies above 1.0 (and at
    least ``min_gain`` above it).

    When none does (or none was measured), the decision is the baseline (``choice`` None).
    """
    certain = {k: s for k, s in candidates.items() if s is not None and s.clears(min_gain)}
    if not certain:
        best = max((s for s in candidates.values() if s is not None), key=lambda s: s.median, default=None)
        why = f"; the best measured {best.text()}" if best else ""
        bar = f" (a gain is claimed when every round shows at least {100 * min_gain:.0f}%)" if min_gain > 0 else ""
        return Decision(None, None, NO_GAIN + why + bar)
    choice = max(certain, key=lambda k: certain[k].median)
    return Decision(choice, certain[choice], f"speedup {certain[choice].text()}")
