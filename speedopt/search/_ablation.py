"""The ablation: which change bought what, on the path from the baseline to the recommendation.

When the finals recommend a config other than the baseline, the knobs that differ between the two (as
asked; a knob the trainer ran the same way in both is no real change and is left out) are applied one
at a time, the change that gains most first: from the baseline each remaining single change is
measured once and the fastest taken, then again from there (n changes cost n(n+1)/2-1 measurements;
with more than :data:`MAX_ORDERED` the knob order is kept). A config that cannot run (no prepared copy
at that imgsz, infeasible, failed) is not a step: the next candidate is; when none can, the remaining
changes make one step. The whole path (baseline, step 1, ..., recommendation) is then measured in the
finals' number of interleaved rounds, so drift hits every config alike, reusing what is measured already
(:func:`reused`: the ends from the finals' rounds, each middle step's first round from its ordering
measurement), so only the middle steps' later rounds are new (the record,
:class:`~speedopt.study.Ablation`, says what each step bought). One changed knob needs no new
measurement: the finals measured that path already. The study keeps it after each measurement
(:func:`~speedopt.study.schema.write_ablation`), so an interrupted ablation resumes and a report can be rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.search._claim import Claim
from speedopt.search._objective import request_for
from speedopt.search._stage import SearchContext, Stage
from speedopt.search._step import Finished, Started, Step
from speedopt.study import Ablation, Finals, TrialRecord, records, schema
from speedopt.study.record_types import Change, Probe, Repeat

if TYPE_CHECKING:
    import optuna

#: The most changed knobs ordered by gain (4 would take 9 ordering measurements, 5 take 14); beyond, knob order.
MAX_ORDERED = 3


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
    measured = tuple(replace(m, of=ends[m.of]) for m in finals.measured if m.of in ends)
    note = "one knob changed: its step is the finals' baseline and recommendation, measured in the same rounds"
    return replace(ablation, path=((ablation.changes[0].knob,),), measured=measured, notes=(note,), from_finals=True)


Measure = Callable[[Knobs], TrialResult]
Check = Callable[[Knobs], str | None]  # why a config cannot run (None: it can)


def _label(ablation: Ablation, applied: Sequence[str], knob: str) -> str:
    after = f" after {', '.join(ablation.change(k).text() for k in applied)}" if applied else " from the baseline"
    return f"ordering: {ablation.change(knob).text()}{after}"


def _fastest(
    ablation: Ablation, applied: list[str], remaining: list[str], measure: Measure, check: Check,
    save: Callable[[Ablation], None], started: Started, finished: Finished, known: Mapping[Knobs, TrialRecord],
) -> tuple[Ablation, str | None]:
    """Each remaining single change measured once after ``applied`` (stored ones reused, and a search trial's
    measurement of the same config, ``known``): the fastest that ran."""
    for knob in remaining:
        if ablation.probe(applied, knob) is not None:
            continue
        knobs = ablation.knobs([*applied, knob])
        why = check(knobs)
        earlier = known.get(knobs)
        if why is not None:
            probe = Probe(tuple(applied), knob, None, None, why)
        elif earlier is not None:  # a search trial measured this config: its figure orders the path
            probe = Probe(tuple(applied), knob, earlier.result.status, earlier.images_per_s, f"trial {earlier.number}'s measurement")
        else:
            step = Step("ablation", f"ablation {_label(ablation, applied, knob)}", knobs)
            started(step)
            result = measure(knobs)
            finished(step, result)
            probe = Probe(tuple(applied), knob, result.status, result.images_per_s if result.ok else None, result.message)
        ablation = replace(ablation, probes=(*ablation.probes, probe))
        save(ablation)
    ran = [p for p in (ablation.probe(applied, k) for k in remaining) if p is not None and p.images_per_s is not None]
    return ablation, (max(ran, key=lambda p: p.images_per_s or 0.0).knob if ran else None)


def _order(
    ablation: Ablation, measure: Measure, check: Check, save: Callable[[Ablation], None], started: Started, finished: Finished,
    known: Mapping[Knobs, TrialRecord],
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
            ablation, pick = _fastest(ablation, applied, remaining, measure, check, save, started, finished, known)
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


def reused(ablation: Ablation, finals: Finals) -> Ablation:
    """The path's measurements already made, in the rounds' slots: the ends' from the finals' same rounds, and
    each middle step's config from its ordering measurement (its round 1). Only the rest is measured."""
    if not ablation.path or ablation.from_finals:
        return ablation
    last = len(ablation.path)
    slots = {(m.round, m.of) for m in ablation.measured}
    found = [replace(m, of=0 if m.of == ablation.baseline else last) for m in finals.measured
             if m.of in (ablation.baseline, ablation.recommended) and m.round < ablation.repeats]
    applied: list[str] = []
    for i, step in enumerate(ablation.path[:-1], start=1):
        probe = ablation.probe(applied, step[0]) if len(step) == 1 else None
        if probe is not None and probe.status is not None:
            found.append(Repeat(0, i, probe.status, probe.images_per_s))
        applied.extend(step)
    new = tuple(m for m in found if (m.round, m.of) not in slots)
    if not new:
        return ablation
    note = ("reused: the ends' rounds from the finals and each middle step's first round from its ordering measurement "
            f"(or the search trial that measured it; {len(new)} measurements not repeated; a step's ratio to an end spans "
            "the minutes between them)")
    return replace(ablation, measured=(*ablation.measured, *new), notes=(*ablation.notes, note))


def _rounds(ablation: Ablation, measure: Measure, save: Callable[[Ablation], None], started: Started, finished: Finished) -> Ablation:
    """The whole path in interleaved rounds (baseline, step 1, ..., recommendation, baseline, ...); stored."""
    configs = ablation.configs()
    for round_ in range(ablation.repeats):
        for i, knobs in enumerate(configs):
            if ablation.has(round_, i):
                continue
            what = "baseline" if i == 0 else f"step {i}: " + ", ".join(ablation.change(k).text() for k in ablation.path[i - 1])
            step = Step("ablation", f"ablation round {round_ + 1}/{ablation.repeats}: {what}", knobs)
            started(step)
            result = measure(knobs)
            ablation = replace(ablation, measured=(*ablation.measured, Repeat.measured(round_, i, result)))
            save(ablation)
            finished(step, result)
    return ablation


def _fresh(done: Sequence[TrialRecord], finals: Finals | None, min_gain: float) -> Ablation | None:
    """The ablation the finals' decision asks for (None: no decision yet, the baseline kept, nothing changed)."""
    if finals is None or not finals.complete:
        return None
    choice = finals.decision().choice
    by_number = {r.number: r for r in done}
    if choice is None or finals.baseline not in by_number or choice not in by_number:
        return None
    ablation = planned(by_number[finals.baseline], by_number[choice], finals.rounds, min_gain)
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
    started: Started = lambda step: None,
    finished: Finished = lambda step, result: None,
) -> Ablation | None:
    """Order and measure the path from the baseline to the finals' recommendation; resumes a stored one.

    None when there is nothing to explain (no complete finals, the baseline kept). ``begin`` hears the
    changes before the first measurement still missing (not at all when none is).
    """
    ablation = _fresh(done, finals, min_gain)
    if ablation is None:
        return None
    old = schema.read_ablation(study)
    if old is not None and _same(old, ablation):
        ablation = replace(old, min_gain=min_gain)
    if ablation != old:
        schema.write_ablation(study, ablation)
    if ablation.complete:
        return ablation

    def save(current: Ablation) -> None:
        schema.write_ablation(study, current)

    begin(tuple(c.text() for c in ablation.changes), ablation.repeats)
    if not ablation.path:
        known = {r.result.requested: r for r in done if r.result.ok and r.images_per_s}
        ablation = _order(ablation, measure, check, save, started, finished, known)
    assert finals is not None  # _fresh returned an ablation
    ablation = reused(ablation, finals)
    save(ablation)
    return _rounds(ablation, measure, save, started, finished)


class AblationStage(Stage):
    """Measure which change bought what on the path to the recommendation."""

    name = "ablation"
    claim = "ablation"

    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        p, study, view = ctx.plan.protocol, ctx.study, ctx.view
        if study.user_attrs.get(schema.ABLATE) != p.ablate:  # this run's choice, for the report
            study.set_user_attr(schema.ABLATE, p.ablate)
        if not p.ablate:
            return

        def unrunnable(knobs: Knobs) -> str | None:
            request = request_for(ctx.plan, knobs, ctx.inputs)
            return request.message if isinstance(request, TrialResult) else request.infeasible

        run(
            study, records(study), schema.read_finals(study), ctx.measure(claim), unrunnable, p.min_gain,
            begin=view.ablation_started, started=view.step_started, finished=view.step_finished,
        )
