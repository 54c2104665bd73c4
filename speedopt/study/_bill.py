"""What a search cost, by stage, and when it pays for itself: the bill the summary and the report print.

A user runs a search to save time, so its own time is part of the answer. Each process that works on a
study adds the wall time it spent, stage by stage, to the study's user attr ``bill``
(:func:`~speedopt.study._schema.write_bill`): a resumed search, or several workers, add up. Nested work
counts once, in the innermost stage (a trial's quality probes are ``probes``, not ``trials``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Stage = Literal["prepare", "start", "labels", "ranking", "trials", "probes", "memory fits", "ceilings", "finals", "ablation", "ends"]
_WHAT = {
    "prepare": "the resized copies", "start": "the warm worker's start", "labels": "the trainer's label caches", "ranking": "ceiling jobs ranking the space",
    "trials": "the trials' measurements", "probes": "quality probes", "memory fits": "memory fits",
    "ceilings": "ceiling jobs of the stop rule", "finals": "the finals", "ablation": "the ablation",
    "ends": "the ends' ceilings and validation timing",
}


@dataclass(frozen=True)
class Bill:
    """Wall seconds per stage (only stages that took time), summed over every run and worker of the study."""

    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    def plus(self, other: dict[str, float]) -> Bill:
        """This bill with ``other``'s seconds added stage by stage."""
        merged = dict(self.seconds)
        for stage, s in other.items():
            merged[stage] = merged.get(stage, 0.0) + s
        return Bill(merged)

    def lines(self) -> list[str]:
        """One line per stage that took a second or more, largest first, each with its share."""
        total = self.total_s or 1.0
        order = sorted((s for s in self.seconds if self.seconds[s] >= 1.0), key=lambda s: -self.seconds[s])
        return [f"{clock(self.seconds[s])} {s} ({_WHAT.get(s, s)}, {100 * self.seconds[s] / total:.0f}%)" for s in order]

    def to_attr(self) -> dict[str, float]:
        return {s: round(v, 3) for s, v in self.seconds.items()}

    @classmethod
    def from_attr(cls, data: Any) -> Bill:
        if not isinstance(data, dict):
            return cls()
        return cls({str(k): float(v) for k, v in data.items() if isinstance(v, (int, float)) and v >= 0})


def clock(seconds: float) -> str:
    """``6 min 10 s``, ``41 s``."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if h else f"{m} min {s} s" if m else f"{s} s"


def payback(bill: Bill, saving_per_epoch_s: float | None, epochs: int, basis: str) -> str:
    """``this search took 6 min 10 s; at the projected saving of 41 s per epoch (basis), it pays for itself after
    9 epochs of your 100`` (or that it does not, or that there is no saving to pay it back)."""
    took = f"this search took {clock(bill.total_s)}"
    if saving_per_epoch_s is None or saving_per_epoch_s <= 0:
        return f"{took}; no saving was claimed, so nothing pays it back: that is the price of knowing your settings hold"
    after = math.ceil(bill.total_s / saving_per_epoch_s)
    saving = f"{saving_per_epoch_s:.1f} s" if saving_per_epoch_s < 10 else clock(saving_per_epoch_s)
    tail = f"it pays for itself after {after} epochs of your {epochs}" if after <= epochs else (
        f"it would take {after} epochs to pay for itself: more than your {epochs}")
    return f"{took}; at the projected saving of {saving} per epoch ({basis}), {tail}"
