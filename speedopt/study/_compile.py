"""torch.compile decided once, on the recommendation: the record a study stores.

A trial never compiles because the sampler drew it: a cold compile took 104 s of one GPU trial, and its memory fit
compiled twice more. When the space lists compile modes, every trial runs eager and, after the finals, the
recommendation is measured eager and compiled in interleaved rounds (:class:`~speedopt.study.record_types.Repeat`,
``of``: 0 eager, ``i`` the ``i``-th mode). A mode's one-time cost is its first compiled measurement's warm-up beyond
its steady steps (a cold compile, as a user's first run meets it), charged against the run: ``epochs`` x
``train_images`` at the eager and compiled rates. Compile is recommended only where the paired ratio's low end
clears 1 + ``min_gain`` (every round measured it faster than eager beside it) and the time that low end saves over
the run exceeds the one-time cost; otherwise the decision is "keep eager", with the figures that say why.
:mod:`speedopt.search._compile` measures it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any

from speedopt.knobs import COMPILE_OFF, Knobs
from speedopt.speedup import Speedup, paired
from speedopt.study._finals import Repeat

PREFIX = "torch.compile: "  # the decision line's start, as the search prints it and the report quotes it


@dataclass(frozen=True)
class Payback:
    """What one compile mode buys over the run, from its measured rounds and one-time cost."""

    mode: str
    speedup: Speedup | None  # compiled over eager, paired rounds (None: no round measured both)
    cost_s: float | None  # the one-time cost (None: no compiled measurement ran ok)
    saved_s: float | None  # over the run at the interval's low end, before the cost (None: not faster in every round)
    epochs: int  # the run's epochs the saving is counted over

    @property
    def payback_epochs(self) -> float | None:
        """The epochs the one-time cost takes to win back at the interval's low end (None: it never does)."""
        if self.cost_s is None or not self.saved_s or self.saved_s <= 0 or self.epochs <= 0:
            return None
        return self.cost_s / (self.saved_s / self.epochs)


@dataclass(frozen=True)
class CompileDecision:
    """The recommendation measured eager and compiled, the modes' one-time costs, and what the run would gain."""

    trial: int  # the recommended trial (its config ran eager)
    config: Knobs
    modes: tuple[str, ...]
    repeats: int
    epochs: int
    train_images: int
    min_gain: float = 0.0
    measured: tuple[Repeat, ...] = ()
    costs: tuple[tuple[str, float], ...] = ()  # (mode, one-time cost in s) from its first ok compiled measurement
    failures: tuple[tuple[str, str], ...] = ()  # (mode, why it could not run): not measured again

    def knobs(self, of: int) -> Knobs:
        """The config measured as ``of``: 0 eager, ``i`` compiled with the ``i``-th mode."""
        return replace(self.config, compile=COMPILE_OFF if of == 0 else self.modes[of - 1])

    def active(self) -> tuple[int, ...]:
        """What each round measures: eager and every mode that has not failed (nothing once none is left)."""
        failed = {mode for mode, _ in self.failures}
        modes = tuple(i for i, mode in enumerate(self.modes, start=1) if mode not in failed)
        return (0, *modes) if modes else ()

    def has(self, round_: int, of: int) -> bool:
        return any(m.round == round_ and m.of == of for m in self.measured)

    @property
    def complete(self) -> bool:
        return all(self.has(r, of) for r in range(self.repeats) for of in self.active())

    def series(self, of: int) -> list[float | None]:
        by_round = {m.round: m.images_per_s for m in self.measured if m.of == of}
        return [by_round.get(r) for r in range(self.repeats)]

    def median(self, of: int) -> tuple[float | None, int]:
        """The median images/s of ``of`` over its ok rounds, and how many rounds that is."""
        ok = [v for v in self.series(of) if v is not None]
        return (statistics.median(ok) if ok else None), len(ok)

    def cost(self, mode: str) -> float | None:
        return next((s for m, s in self.costs if m == mode), None)

    def payback(self, mode: str) -> Payback:
        """Mode ``mode``'s paired speedup over eager, its one-time cost and what it saves over the run."""
        of = self.modes.index(mode) + 1
        speedup = paired(self.series(of), self.series(0))
        eager, _ = self.median(0)
        saved = None
        if speedup is not None and eager and speedup.low > 1.0:  # eager epochs' training time x (1 - 1 / low)
            saved = self.epochs * self.train_images / eager * (1.0 - 1.0 / speedup.low)
        return Payback(mode, speedup, self.cost(mode), saved, self.epochs)

    def pays(self, mode: str) -> bool:
        """Every round measured ``mode`` at least ``min_gain`` faster than eager, and the run wins back its cost."""
        p = self.payback(mode)
        return (
            p.speedup is not None and p.speedup.clears(self.min_gain) and p.cost_s is not None
            and p.saved_s is not None and p.saved_s > p.cost_s
        )

    @property
    def choice(self) -> str | None:
        """The mode to train with (the one that saves most net of its cost), or None: keep eager."""
        paying = [m for m in self.modes if self.pays(m)]
        if not self.complete or not paying:
            return None

        def net(mode: str) -> float:
            p = self.payback(mode)
            return (p.saved_s or 0.0) - (p.cost_s or 0.0)

        return max(paying, key=net)

    def line(self) -> str:
        """The decision in one line (:data:`PREFIX` first), with the interval, the cost and the payback."""
        choice = self.choice
        if choice is not None:
            p = self.payback(choice)
            assert p.speedup is not None and p.cost_s is not None and p.saved_s is not None
            back = p.payback_epochs
            return (
                f"{PREFIX}compile={choice}, {p.speedup.text()} over eager; its one-time cost {p.cost_s:.1f} s (measured "
                f"once, cold) pays back within {back:.1f} of {self.epochs} epochs (saves an estimated "
                f"{(p.saved_s - p.cost_s) / 60:.1f} min over the run at the interval's low end)"
            )
        return f"{PREFIX}keep eager: " + "; ".join(self._why_not(m) for m in self.modes)

    def _why_not(self, mode: str) -> str:
        failed = dict(self.failures)
        if mode in failed:
            return f"compile={mode} could not run here ({failed[mode]})"
        p = self.payback(mode)
        if p.speedup is None:
            return f"compile={mode} was not measured beside eager"
        ratio = f"compile={mode} {p.speedup.text()} over eager"
        if not p.speedup.clears(self.min_gain):
            bar = f" by at least {100 * self.min_gain:.0f}%" if self.min_gain else ""
            return f"{ratio}: not faster{bar} in every round"
        if p.cost_s is None:
            return f"{ratio}, but its one-time cost was not measured"
        cost = p.cost_s
        return (
            f"{ratio}, but its one-time cost {cost:.1f} s is more than it saves over {self.epochs} epochs "
            f"(an estimated {p.saved_s or 0.0:.1f} s at the interval's low end)"
        )

    def to_attr(self) -> dict[str, Any]:
        return {
            "trial": self.trial, "config": self.config.to_dict(), "modes": list(self.modes), "repeats": self.repeats,
            "epochs": self.epochs, "train_images": self.train_images, "min_gain": self.min_gain,
            "measured": [m.to_attr("of") for m in self.measured],
            "costs": [list(c) for c in self.costs], "failures": [list(f) for f in self.failures],
        }

    @classmethod
    def from_attr(cls, data: Any) -> CompileDecision | None:
        if not isinstance(data, dict) or "modes" not in data:
            return None
        return cls(
            int(data["trial"]), Knobs.from_dict(data["config"]), tuple(str(m) for m in data["modes"]), int(data["repeats"]),
            int(data["epochs"]), int(data["train_images"]), float(data.get("min_gain", 0.0)),
            tuple(Repeat.from_attr(m, "of") for m in data.get("measured", [])),
            tuple((str(m), float(s)) for m, s in data.get("costs", [])),
            tuple((str(m), str(w)) for m, w in data.get("failures", [])),
        )
