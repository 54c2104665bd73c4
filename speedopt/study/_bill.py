"""What a search cost, by stage, and when it pays for itself: the bill the summary and the report print.

A user runs a search to save time, so its own time is part of the answer. Each process that works on a
study adds the wall time it spent, stage by stage, to the study's user attr ``bill``
(:func:`~speedopt.study._schema.write_bill`): a resumed search, or several workers, add up. Nested work
counts once, in the innermost stage (a trial's quality probes are ``probes``, not ``trials``). Time spent waiting for
the host lock while another process measured on this host is no stage's work: it is kept apart (``waited_s``, stored
under :data:`WAITED`), shown on its own line, and left out of the total that the payback divides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Stage = Literal["prepare", "start", "labels", "ranking", "trials", "probes", "memory fits", "ceilings", "finals", "compile", "ablation", "ends"]
_WHAT = {
    "prepare": "the resized copies", "start": "the warm worker's start", "labels": "the trainer's label caches", "ranking": "ceiling jobs ranking the space",
    "trials": "the trials' measurements", "probes": "quality probes", "memory fits": "memory fits",
    "ceilings": "ceiling jobs of the stop rule", "finals": "the finals",
    "compile": "the torch.compile decision", "ablation": "the ablation",
    "ends": "the ends' ceilings and validation timing",
}
WAITED = "waited"  # the stored bill's key for the seconds spent waiting for the host lock


@dataclass(frozen=True)
class Bill:
    """Wall seconds per stage (only stages that took time), summed over every run and worker of the study, and
    apart from them the seconds spent waiting for the host lock."""

    seconds: dict[str, float] = field(default_factory=dict)
    waited_s: float = 0.0

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    def plus(self, other: dict[str, float], waited_s: float = 0.0) -> Bill:
        """This bill with ``other``'s seconds added stage by stage, and ``waited_s`` to the wait."""
        merged = dict(self.seconds)
        for stage, s in other.items():
            merged[stage] = merged.get(stage, 0.0) + s
        return Bill(merged, self.waited_s + max(0.0, waited_s))

    def lines(self) -> list[str]:
        """One line per stage that took a second or more, largest first, each with its share."""
        total = self.total_s or 1.0
        order = sorted((s for s in self.seconds if self.seconds[s] >= 1.0), key=lambda s: -self.seconds[s])
        lines = [f"{clock(self.seconds[s])} {s} ({_WHAT.get(s, s)}, {100 * self.seconds[s] / total:.0f}%)" for s in order]
        return lines + ([self.waited_text()] if self.waited_s >= 1.0 else [])

    def waited_text(self) -> str:
        """The wait for the host lock, said apart from the stages."""
        return (f"{clock(self.waited_s)} waiting for the host lock while another process measured on this host "
                "(apart: no stage's work, not in the total)")

    def to_attr(self) -> dict[str, float]:
        waited = {WAITED: round(self.waited_s, 3)} if self.waited_s > 0 else {}
        return {**{s: round(v, 3) for s, v in self.seconds.items()}, **waited}

    @classmethod
    def from_attr(cls, data: Any) -> Bill:
        if not isinstance(data, dict):
            return cls()
        numbers = {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0}
        waited = numbers.pop(WAITED, 0.0)
        return cls(numbers, waited)


def clock(seconds: float) -> str:
    """``6 min 10 s``, ``41 s``."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if h else f"{m} min {s} s" if m else f"{s} s"


@dataclass(frozen=True)
class Payback:
    """When a search pays for itself: its wall time over the saving per epoch of the user's run. One definition
    (issue 56), which the search's summary, the report and ``speedopt best --format json`` all print: the training
    seconds per epoch the recommendation saves, from the finals' medians and the train set's size (an estimate;
    :meth:`~speedopt.study.SearchOutcome.payback`)."""

    search_s: float
    saving_per_epoch_s: float | None  # None: no saving claimed
    epochs: int  # the user's run
    basis: str

    @property
    def after_epochs(self) -> int | None:
        """The epochs after which the saving has paid the search back (None: no saving)."""
        if self.saving_per_epoch_s is None or self.saving_per_epoch_s <= 0:
            return None
        return math.ceil(self.search_s / self.saving_per_epoch_s)

    def text(self) -> str:
        """``this search took 6 min 10 s; at the projected saving of 41 s per epoch (basis), it pays for itself after
        9 epochs of your 100`` (or that it does not, or that there is no saving to pay it back)."""
        took = f"this search took {clock(self.search_s)}"
        after, saving = self.after_epochs, self.saving_per_epoch_s
        if after is None or saving is None:
            return f"{took}; no saving was claimed, so nothing pays it back: that is the price of knowing your settings hold"
        shown = f"{saving:.1f} s" if saving < 10 else clock(saving)
        tail = f"it pays for itself after {after} epochs of your {self.epochs}" if after <= self.epochs else (
            f"it would take {after} epochs to pay for itself: more than your {self.epochs}")
        return f"{took}; at the projected saving of {shown} per epoch ({self.basis}), {tail}"

    def to_dict(self) -> dict[str, Any]:
        """The record ``speedopt best --format json`` prints under ``payback``."""
        saving = None if self.saving_per_epoch_s is None else round(self.saving_per_epoch_s, 3)
        return {"search_s": round(self.search_s, 1), "saving_per_epoch_s": saving, "after_epochs": self.after_epochs,
                "epochs": self.epochs, "basis": self.basis}

