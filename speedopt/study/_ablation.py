"""The ablation: which change bought what, on the path from the baseline to the recommendation.

When the finals recommend a config other than the baseline, the knobs that differ between the two (as
asked; a knob the trainer ran the same way in both is no real change and is left out) are applied one
at a time, the change that gains most first: from the baseline each remaining single change is
measured once and the fastest taken, then again from there (n changes cost n(n+1)/2-1 measurements;
with more than :data:`MAX_ORDERED` the knob order is kept). A config that cannot run (no prepared copy
at that imgsz, infeasible, failed) is not a step: the next candidate is; when none can, the remaining
changes make one step. The whole path (baseline, step 1, ..., recommendation) is then measured in the
finals' number of interleaved rounds, so drift hits every config alike: a step's speedup is the ratio
of the medians of consecutive configs (their product is the full change, exactly) and its interval the
min-max of the paired per-round ratios. One changed knob needs no new measurement: the finals measured
that path already. Everything is stored in the study (user attr ``ablation``) after each measurement,
so an interrupted ablation resumes and a report can be rebuilt.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from speedopt.knobs import Knobs, value_text
from speedopt.measure import TrialResult
from speedopt.speedup import Speedup, paired
from speedopt.study._finals import Finals
from speedopt.study._record import TrialRecord

if TYPE_CHECKING:
    import optuna

ATTR = "ablation"
#: The most changed knobs ordered by gain (5 would take 14 ordering measurements); beyond, knob order.
MAX_ORDERED = 4
NO_GAIN = "no measurable gain: you may keep your value"
NOT_RUN = "not run"  # an ordering candidate refused before it ran (the reason is its message)


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
    status: str
    images_per_s: float | None
    message: str = ""


@dataclass(frozen=True)
class Measurement:
    """The path's config ``config`` (0: the baseline, last: the recommendation) measured in one round."""

    round: int
    config: int
    status: str
    images_per_s: float | None
    ci_rel: float | None = None
    steps: int | None = None
    started_at: float | None = None

    @classmethod
    def of(cls, round_: int, config: int, result: TrialResult) -> Measurement:
        speed = result.images_per_s if result.ok else None
        return cls(round_, config, result.status.value, speed, result.ci_rel, result.steps, result.measure_started_at)


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
    measured: tuple[Measurement, ...] = ()
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
        return any(m.round == round_ and m.config == config for m in self.measured)

    def series(self, config: int) -> list[float | None]:
        """Images/s of path config ``config`` in each round (None: failed or not measured yet)."""
        by_round = {m.round: m.images_per_s for m in self.measured if m.config == config}
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

    def to_attr(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["start"], data["end"] = self.start.to_dict(), self.end.to_dict()
        return data

    @classmethod
    def from_attr(cls, data: Any) -> Ablation | None:
        if not isinstance(data, dict) or "path" not in data:
            return None
        return cls(
            data["baseline"], data["recommended"], Knobs.from_dict(data["start"]), Knobs.from_dict(data["end"]),
            tuple(Change(**c) for c in data["changes"]), tuple(Change(**c) for c in data["dropped"]),
            int(data["repeats"]), float(data.get("min_gain", 0.0)),
            tuple(Probe(**{**p, "applied": tuple(p["applied"])}) for p in data.get("probes", ())),
            tuple(tuple(step) for step in data["path"]), tuple(data.get("notes", ())),
            tuple(Measurement(**m) for m in data.get("measured", ())), bool(data.get("from_finals", False)),
        )


def stored(study: optuna.Study) -> Ablation | None:
    """The ablation stored in the study (None before any)."""
    return Ablation.from_attr(study.user_attrs.get(ATTR))


def planned(base: TrialRecord, rec: TrialRecord, repeats: int, min_gain: float = 0.0) -> Ablation:
    """The changes from ``base`` to ``rec`` as asked, less the knobs both ran with the same value."""
    asked, wanted = base.result.requested.to_dict(), rec.result.requested.to_dict()
    ran_base, ran_rec = base.config.to_dict(), rec.config.to_dict()
    changes: list[Change] = []
    dropped: list[Change] = []
    for knob, before in asked.items():
        if before != wanted[knob]:
            (dropped if ran_base[knob] == ran_rec[knob] else changes).append(Change(knob, before, wanted[knob]))
    return Ablation(
        base.number, rec.number, base.result.requested, rec.result.requested, tuple(changes), tuple(dropped),
        repeats, min_gain,
    )


def from_finals(ablation: Ablation, finals: Finals) -> Ablation:
    """One change: its one step is the finals' baseline and recommendation, measured in the same rounds."""
    ends = {ablation.baseline: 0, ablation.recommended: 1}
    measured = tuple(
        Measurement(m.round, ends[m.trial], m.status, m.images_per_s, m.ci_rel, m.steps, m.started_at)
        for m in finals.measured if m.trial in ends
    )
    note = "one knob changed: its step is the finals' baseline and recommendation, measured in the same rounds"
    return replace(ablation, path=((ablation.changes[0].knob,),), measured=measured, notes=(note,), from_finals=True)


Measure = Callable[[Knobs], TrialResult]
Check = Callable[[Knobs], str | None]  # why a config cannot run (None: it can)
Started = Callable[[str, Knobs], None]
Finished = Callable[[str, TrialResult], None]


def _label(ablation: Ablation, applied: Sequence[str], knob: str) -> str:
    after = f" after {', '.join(ablation.change(k).text() for k in applied)}" if applied else " from the baseline"
    return f"ordering: {ablation.change(knob).text()}{after}"


def _fastest(
    ablation: Ablation, applied: list[str], remaining: list[str], measure: Measure, check: Check,
    save: Callable[[Ablation], None], started: Started, finished: Finished,
) -> tuple[Ablation, str | None]:
    """Each remaining single change measured once after ``applied`` (stored ones reused): the fastest that ran."""
    for knob in remaining:
        if ablation.probe(applied, knob) is not None:
            continue
        knobs = ablation.knobs([*applied, knob])
        why = check(knobs)
        if why is not None:
            probe = Probe(tuple(applied), knob, NOT_RUN, None, why)
        else:
            label = _label(ablation, applied, knob)
            started(label, knobs)
            result = measure(knobs)
            finished(label, result)
            probe = Probe(tuple(applied), knob, result.status.value, result.images_per_s if result.ok else None, result.message)
        ablation = replace(ablation, probes=(*ablation.probes, probe))
        save(ablation)
    ran = [p for p in (ablation.probe(applied, k) for k in remaining) if p is not None and p.images_per_s is not None]
    return ablation, (max(ran, key=lambda p: p.images_per_s or 0.0).knob if ran else None)


def _order(
    ablation: Ablation, measure: Measure, check: Check, save: Callable[[Ablation], None], started: Started, finished: Finished,
) -> Ablation:
    """The path: the change that gains most first (greedy), or knob order past :data:`MAX_ORDERED`; stored."""
    applied: list[str] = []
    remaining = [c.knob for c in ablation.changes]
    path: list[tuple[str, ...]] = []
    notes = list(ablation.notes)
    greedy = len(remaining) <= MAX_ORDERED
    if not greedy:
        n = len(remaining)
        notes.append(f"{n} knobs changed, more than {MAX_ORDERED}: the path keeps knob order (ordering them by "
                     f"gain would take {n * (n + 1) // 2 - 1} measurements)")
    while len(remaining) > 1:
        if greedy:
            ablation, pick = _fastest(ablation, applied, remaining, measure, check, save, started, finished)
        else:
            pick = next((k for k in remaining if check(ablation.knobs([*applied, k])) is None), None)
        if pick is None:
            notes.append(f"no single change among {', '.join(ablation.change(k).text() for k in remaining)} could "
                         "run from there: they make one combined step")
            break
        path.append((pick,))
        applied.append(pick)
        remaining.remove(pick)
    ablation = replace(ablation, path=(*path, tuple(remaining)), notes=tuple(notes))
    save(ablation)
    return ablation


def _rounds(ablation: Ablation, measure: Measure, save: Callable[[Ablation], None], started: Started, finished: Finished) -> Ablation:
    """The whole path in interleaved rounds (baseline, step 1, ..., recommendation, baseline, ...); stored."""
    configs = ablation.configs()
    for round_ in range(ablation.repeats):
        for i, knobs in enumerate(configs):
            if ablation.has(round_, i):
                continue
            what = "baseline" if i == 0 else f"step {i}: " + ", ".join(ablation.change(k).text() for k in ablation.path[i - 1])
            label = f"round {round_ + 1}/{ablation.repeats}: {what}"
            started(label, knobs)
            result = measure(knobs)
            ablation = replace(ablation, measured=(*ablation.measured, Measurement.of(round_, i, result)))
            save(ablation)
            finished(label, result)
    return ablation


def _fresh(done: Sequence[TrialRecord], finals: Finals | None, min_gain: float) -> Ablation | None:
    """The ablation the finals' decision asks for (None: no decision yet, the baseline kept, nothing changed)."""
    if finals is None or not finals.complete:
        return None
    choice = finals.decision().choice
    by_number = {r.number: r for r in done}
    if choice is None or finals.baseline not in by_number or choice not in by_number:
        return None
    ablation = planned(by_number[finals.baseline], by_number[choice], finals.repeats, min_gain)
    if not ablation.changes:
        return None
    return from_finals(ablation, finals) if len(ablation.changes) == 1 else ablation


def _same(old: Ablation, new: Ablation) -> bool:
    """``old`` is the same path's ablation (a resume), whatever the bar for a gain."""
    keys = ("baseline", "recommended", "start", "end", "changes", "dropped", "repeats")
    return all(getattr(old, k) == getattr(new, k) for k in keys) and not new.from_finals


def run(
    study: optuna.Study,
    done: Sequence[TrialRecord],
    finals: Finals | None,
    measure: Measure,
    check: Check,
    min_gain: float = 0.0,
    begin: Callable[[tuple[str, ...], int], None] = lambda changes, repeats: None,
    started: Started = lambda label, knobs: None,
    finished: Finished = lambda label, result: None,
) -> Ablation | None:
    """Order and measure the path from the baseline to the finals' recommendation; resumes a stored one.

    None when there is nothing to explain (no complete finals, the baseline kept). ``begin`` hears the
    changes before the first measurement still missing (not at all when none is).
    """
    ablation = _fresh(done, finals, min_gain)
    if ablation is None:
        return None
    old = stored(study)
    if old is not None and _same(old, ablation):
        ablation = replace(old, min_gain=min_gain)
    if ablation != old:
        study.set_user_attr(ATTR, ablation.to_attr())
    if ablation.complete:
        return ablation

    def save(current: Ablation) -> None:
        study.set_user_attr(ATTR, current.to_attr())

    begin(tuple(c.text() for c in ablation.changes), ablation.repeats)
    if not ablation.path:
        ablation = _order(ablation, measure, check, save, started, finished)
    return _rounds(ablation, measure, save, started, finished)
