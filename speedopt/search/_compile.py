"""torch.compile decided once, after the finals: the recommendation measured eager and compiled.

Every trial of a space that lists compile modes runs eager (:func:`~speedopt.search._space.decide_at_end`); here the
recommendation is measured eager and with each mode in interleaved rounds (eager, mode 1, ..., eager, ...), so drift
hits both alike, and the study keeps the record after each measurement
(:func:`~speedopt.study.schema.write_compile`): an interrupted decision resumes. A mode that cannot run (no compiler,
a loss that differs from eager) is not measured again. The decision and its one-line summary are the record's
(:class:`~speedopt.study.record_types.CompileDecision`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from speedopt.knobs import COMPILE_OFF, Knobs
from speedopt.measure import TrialResult
from speedopt.search._claim import Claim
from speedopt.search._stage import SearchContext, Stage
from speedopt.search._step import Finished, Started, Step
from speedopt.study import TrialRecord, outcome, schema
from speedopt.study.record_types import CompileDecision, Repeat

if TYPE_CHECKING:
    import optuna

Measure = Callable[[Knobs], TrialResult]

#: Rounds when the finals ran fewer (``--repeats`` 0 or 1): an interval needs two paired rounds.
MIN_ROUNDS = 2


def planned(rec: TrialRecord, modes: tuple[str, ...], repeats: int, epochs: int, train_images: int, min_gain: float) -> CompileDecision:
    """The decision to measure for the recommended trial ``rec`` (its config as asked, eager)."""
    config = replace(rec.result.requested, compile=COMPILE_OFF)
    return CompileDecision(rec.number, config, modes, max(MIN_ROUNDS, repeats), epochs, train_images, min_gain)


def _same(old: CompileDecision, new: CompileDecision) -> bool:
    keys = ("trial", "config", "modes", "repeats", "epochs", "train_images")
    return all(getattr(old, k) == getattr(new, k) for k in keys)


def run(
    study: optuna.Study,
    fresh: CompileDecision,
    measure: Measure,
    started: Started = lambda step: None,
    finished: Finished = lambda step, result: None,
) -> CompileDecision:
    """Measure what ``fresh`` still lacks (a stored decision of the same recommendation resumes) and store it."""
    old = schema.read_compile(study)
    decision = replace(old, min_gain=fresh.min_gain) if old is not None and _same(old, fresh) else fresh
    schema.write_compile(study, decision)
    for round_ in range(decision.repeats):
        for of in decision.active():
            if decision.has(round_, of):
                continue
            knobs = decision.knobs(of)
            label = f"torch.compile round {round_ + 1}/{decision.repeats}: " + (
                "eager" if of == 0 else f"compile={knobs.compile}"
            )
            step = Step("compile", label, knobs)
            started(step)
            result = measure(knobs)
            decision = _with(decision, round_, of, result)
            schema.write_compile(study, decision)
            finished(step, result)
    return decision


def _with(decision: CompileDecision, round_: int, of: int, result: TrialResult) -> CompileDecision:
    """``decision`` with one more measurement: a mode's first ok one gives its one-time cost; a mode that did not
    run ok is a failure, not measured again (eager that fails is one round lost)."""
    decision = replace(decision, measured=(*decision.measured, Repeat.measured(round_, of, result)))
    if of == 0:
        return decision
    mode = decision.modes[of - 1]
    if not result.ok:
        return replace(decision, failures=(*decision.failures, (mode, f"{result.status.value}: {result.message}")))
    if decision.cost(mode) is None and result.compile_s is not None:
        return replace(decision, costs=(*decision.costs, (mode, float(result.compile_s))))
    return decision


class CompileStage(Stage):
    """Decide torch.compile once, on the recommendation, where the space lists compile modes."""

    name = "compile"
    claim = "compile"

    def wanted(self, ctx: SearchContext) -> bool:
        return bool(ctx.plan.protocol.compile_modes)

    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        p, view = ctx.plan.protocol, ctx.view
        rec = outcome(ctx.study).recommended
        if rec is None:
            view.note("torch.compile: not decided: no config measured ok to decide it on")
            return
        fresh = planned(rec, p.compile_modes, p.repeats, p.epochs, p.dataset.train_images, p.min_gain)
        view.note(
            f"torch.compile: measuring trial {rec.number}'s config eager and with compile={', '.join(p.compile_modes)} in "
            f"{fresh.repeats} interleaved rounds"
        )
        decision = run(
            ctx.study, fresh, ctx.measure(claim), started=view.step_started, finished=view.step_finished,
        )
        view.decided(decision.line())
