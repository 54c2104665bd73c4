"""The finals: after the search, the top feasible configs and the baseline re-measured in interleaved rounds.

One measurement per config says little on a noisy machine (the same config measured 14% apart in
one search), so the search's leaders are measured again beside the baseline, round by round
(baseline, c1, c2, ..., baseline, c1, ...): drift and neighbours hit every config alike. Every
measurement is stored in the study after each one (:class:`~speedopt.study.Finals`), so an interrupted
finals round resumes, and the recommendation follows :func:`speedopt.speedup.decide`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.search import _sequential as sequential
from speedopt.search._claim import Claim, claimed
from speedopt.search._stage import SearchContext, Stage
from speedopt.search._step import Finished, Started, Step
from speedopt.study import Finals, TrialRecord, finalists, records, schema
from speedopt.study.notes import write_finals_notes
from speedopt.study.record_types import Repeat

if TYPE_CHECKING:
    import optuna

Measure = Callable[[Knobs], TrialResult]


def run(
    study: optuna.Study,
    done: list[TrialRecord],
    count: int,
    repeats: int,
    measure: Measure,
    min_gain: float = 0.0,
    begin: Callable[[tuple[int, ...], int], None] = lambda chosen, repeats: None,
    started: Started = lambda step: None,
    finished: Finished = lambda step, result: None,
    note: Callable[[str], None] = lambda line: None,
    stale_s: float = 600.0,
) -> Finals | None:
    """Measure the finalists in up to ``repeats`` interleaved rounds, dropping a finalist (or ending the rounds)
    once the decision cannot change (:mod:`speedopt.search._sequential`); resumes stored finals of the same finalists.

    The finals' decisions are the study's, taken once: the first run to get here claims them in the storage
    (:func:`~speedopt.study.claimed`) and measures; another run of the study waits (``note`` says so) and then
    reads what they stored, measuring only what an owner that died left undone (``stale_s``: after so long
    without a measurement, an owner on another host counts as gone). None when there is nothing to compare
    (no baseline measured ok, or no other feasible config). ``begin`` hears the finalists before the first
    measurement still missing (not at all when none is).
    """
    chosen = finalists(done, count)
    if repeats < 2 or not chosen:
        return None
    with claimed(study._storage, study.study_name, "finals", stale_s, note) as claim:

        def owned(knobs: Knobs) -> TrialResult:
            claim.beat()
            return measure(knobs)

        return _rounds(study, {r.number: r for r in done}, chosen, repeats, owned, min_gain, begin, started, finished, note)


def _rounds(
    study: optuna.Study,
    by_number: dict[int, TrialRecord],
    chosen: tuple[int, ...],
    repeats: int,
    measure: Measure,
    min_gain: float,
    begin: Callable[[tuple[int, ...], int], None],
    started: Started,
    finished: Finished,
    note: Callable[[str], None],
) -> Finals:
    """The rounds still missing from the stored finals of ``chosen`` (new finals when they are other finalists)."""
    finals = schema.read_finals(study)
    if finals is None or finals.trials != chosen or finals.repeats != repeats:
        if finals is not None and finals.measured:  # other finalists now (the study grew): keep what was measured
            schema.set_aside_finals(study, finals)
        finals = Finals(chosen, repeats, min_gain=min_gain)
    elif finals.min_gain != min_gain:  # the bar changed, not the measurements: drops and an early end are looked at again
        finals = replace(finals, min_gain=min_gain, dropped=(), end=None, end_why="")
        schema.write_finals(study, finals)

    said = set(finals.notes())
    if not finals.complete:
        begin(chosen, repeats)
    for round_ in range(repeats):
        if round_ >= finals.rounds:
            break
        for number in finals.active(round_):
            if finals.has(round_, number):
                continue
            record = by_number[number]
            step = Step("finals", f"round {round_ + 1}/{repeats}: trial {record.number}", record.config, f"{record.number} r{round_ + 1}")
            started(step)
            result = measure(record.result.requested)
            finals = replace(finals, measured=(*finals.measured, Repeat.measured(round_, number, result)))
            schema.write_finals(study, finals)
            finished(step, result)
        looked = sequential.look(finals, round_)
        if looked != finals:
            finals = looked
            schema.write_finals(study, finals)
            for line in finals.notes():
                if line not in said:
                    note(line)
                    said.add(line)
    return finals


class FinalsStage(Stage):
    """Re-measure the leaders beside the baseline in interleaved rounds (claimed inside :func:`run`, which resumes
    stored rounds)."""

    name = "finals"

    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        p, view = ctx.plan.protocol, ctx.view
        finals = run(
            ctx.study, records(ctx.study), p.finalists, p.repeats, ctx.measure(), p.min_gain, begin=view.finals_started,
            started=view.step_started, finished=view.step_finished, note=view.note, stale_s=ctx.longest_s,
        )
        if finals is not None:
            write_finals_notes(ctx.study, finals)
