"""The ablation as a study stores it: which change bought what, on the path from the baseline to the recommendation.

:class:`Ablation` holds the real changes (knobs asked differently that the trainer also ran differently),
the ordering measurements (:class:`Probe`), the path (the knobs each step changes) and the path's configs
measured in interleaved rounds (:class:`~speedopt.study.Repeat`, ``of``: the config's index on the path).
A step's speedup is the ratio of the medians of consecutive configs (their product is the full change,
exactly) and its interval the min-max of the paired per-round ratios (:meth:`Ablation.steps`). It is
stored in the study (:func:`~speedopt.study._schema.write_ablation`) after each measurement, so an
interrupted ablation resumes and a report can be rebuilt; :mod:`speedopt.search._ablation` orders and measures it.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from speedopt.knobs import Knobs, value_text
from speedopt.speedup import Speedup, paired
from speedopt.status import Status
from speedopt.study._finals import Repeat

NO_GAIN = "no measurable gain: you may keep your value"
NOT_RUN = "not run"  # the stored status of an ordering candidate refused before it ran


@dataclass(frozen=True)
class Change:
    """One knob's change from the baseline's value to the recommendation's, as asked."""

    knob: str
    before: Any
    after: Any

    def text(self) -> str:
        """``workers 8 -> 2``."""
        return f"{self.knob} {value_text(self.before)} -> {value_text(self.after)}"


@dataclass(frozen=True)
class Probe:
    """One ordering measurement: ``knob`` changed after the knobs in ``applied`` (None: it did not run ok)."""

    applied: tuple[str, ...]
    knob: str
    status: Status | None  # None: refused before it ran (the reason is its message)
    images_per_s: float | None
    message: str = ""

    @property
    def outcome(self) -> str:
        """How it ended, as shown and stored: ``ok``, ``oom``, ... or ``not run``."""
        return NOT_RUN if self.status is None else self.status.value

    def to_attr(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "status": self.outcome}

    @classmethod
    def from_attr(cls, data: dict[str, Any]) -> Probe:
        status = None if data["status"] == NOT_RUN else Status(data["status"])
        return cls(**{**data, "applied": tuple(data["applied"]), "status": status})


@dataclass(frozen=True)
class Step:
    """One step of the path as measured: what it changed, the images/s after it, and what it bought."""

    number: int  # 1-based; config ``number`` of the path is the one after it
    changes: tuple[Change, ...]
    images_per_s: float | None  # median of the rounds of the config after the step
    speedup: float | None  # median after / median before: the product over the steps is the full change
    interval: Speedup | None  # from the paired per-round ratios (after / before, same round)
    cumulative: float | None  # median after / the baseline's median
    gain: bool  # interval above 1.0 and the speedup at least the study's min-gain above it

    def text(self) -> str:
        """``model yolov5s -> yolov5n, imgsz 128 -> 96`` (several: a combined step)."""
        return ", ".join(c.text() for c in self.changes)

    @property
    def verdict(self) -> str:
        """``gain``, or that it bought nothing measurable (and was slower in every round, if so)."""
        if self.speedup is None or self.interval is None:
            return "not measured (no round measured both sides ok)"
        if self.gain:
            return "gain"
        slower = " (slower in every round)" if self.interval.rounds >= 2 and self.interval.high < 1.0 else ""
        return NO_GAIN + slower


@dataclass(frozen=True)
class Ablation:
    """The path from the baseline's trial to the recommended one: its changes, order and measurements."""

    baseline: int  # trial numbers
    recommended: int
    start: Knobs  # the baseline as asked
    end: Knobs  # the recommendation as asked
    changes: tuple[Change, ...]  # real changes, in knob order
    dropped: tuple[Change, ...]  # differ as asked, ran the same in both (the trainer fixed the knob)
    repeats: int
    min_gain: float = 0.0
    probes: tuple[Probe, ...] = ()  # the ordering measurements
    path: tuple[tuple[str, ...], ...] = ()  # the knobs each step changes, in path order (empty: not ordered yet)
    notes: tuple[str, ...] = ()
    measured: tuple[Repeat, ...] = ()  # the path's configs in interleaved rounds (``of``: the index on the path)
    from_finals: bool = False  # one change: the finals' rounds are the path's

    def change(self, knob: str) -> Change:
        return next(c for c in self.changes if c.knob == knob)

    def knobs(self, applied: Sequence[str]) -> Knobs:
        """The config with the changes of ``applied`` made (all of them: the recommendation as asked)."""
        if set(applied) >= {c.knob for c in self.changes}:
            return self.end
        return replace(self.start, **{k: self.change(k).after for k in applied})

    def configs(self) -> list[Knobs]:
        """The path's configs: the baseline, then the config after each step (the last: the recommendation)."""
        applied: list[str] = []
        out = [self.start]
        for step in self.path:
            applied += step
            out.append(self.knobs(applied))
        return out

    def probe(self, applied: Sequence[str], knob: str) -> Probe | None:
        return next((p for p in self.probes if p.applied == tuple(applied) and p.knob == knob), None)

    @property
    def complete(self) -> bool:
        return bool(self.path) and len(self.measured) >= self.repeats * (len(self.path) + 1)

    def has(self, round_: int, config: int) -> bool:
        return any(m.round == round_ and m.of == config for m in self.measured)

    def series(self, config: int) -> list[float | None]:
        """Images/s of path config ``config`` in each round (None: failed or not measured yet)."""
        by_round = {m.round: m.images_per_s for m in self.measured if m.of == config}
        return [by_round.get(r) for r in range(self.repeats)]

    def ok_rounds(self, config: int) -> list[float]:
        return [v for v in self.series(config) if v is not None]

    def median(self, config: int) -> float | None:
        rounds = self.ok_rounds(config)
        return statistics.median(rounds) if rounds else None

    def total(self) -> float | None:
        """The full change: the recommendation's median over the baseline's (None: one side never ran ok)."""
        first, last = self.median(0), self.median(len(self.path))
        return last / first if first and last is not None else None

    def steps(self) -> list[Step]:
        """Each step's images/s, speedup, interval, cumulative speedup and verdict."""
        out = []
        base = self.median(0)
        for i, knobs in enumerate(self.path, start=1):
            before, after = self.median(i - 1), self.median(i)
            speedup = after / before if before and after is not None else None
            interval = paired(self.series(i), self.series(i - 1))
            gain = (
                speedup is not None and interval is not None and interval.rounds >= 2
                and interval.low > 1.0 and speedup >= 1.0 + self.min_gain
            )
            cumulative = after / base if base and after is not None else None
            out.append(Step(i, tuple(self.change(k) for k in knobs), after, speedup, interval, cumulative, gain))
        return out

    def idle(self) -> list[Step]:
        """The steps that bought nothing measurable (:data:`NO_GAIN`): changes the recommendation carries that the
        user may leave out, each its step's figures (none until the ablation is complete)."""
        return [s for s in self.steps() if s.verdict.startswith(NO_GAIN)] if self.complete else []

    def to_attr(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["start"], data["end"] = self.start.to_dict(), self.end.to_dict()
        data["probes"] = [p.to_attr() for p in self.probes]
        data["measured"] = [m.to_attr("config") for m in self.measured]
        return data

    @classmethod
    def from_attr(cls, data: Any) -> Ablation | None:
        if not isinstance(data, dict) or "path" not in data:
            return None
        return cls(
            data["baseline"], data["recommended"], Knobs.from_dict(data["start"]), Knobs.from_dict(data["end"]),
            tuple(Change(**c) for c in data["changes"]), tuple(Change(**c) for c in data["dropped"]),
            int(data["repeats"]), float(data["min_gain"]),
            tuple(Probe.from_attr(p) for p in data["probes"]),
            tuple(tuple(step) for step in data["path"]), tuple(data["notes"]),
            tuple(Repeat.from_attr(m, "config") for m in data["measured"]), bool(data["from_finals"]),
        )
