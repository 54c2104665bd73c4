"""The trials stage: ``Study.optimize`` runs one trial at a time (:mod:`speedopt.search._objective`; skips and prunes
inside it, :mod:`~speedopt.search._skip`, :mod:`~speedopt.search._prune`) and the loop asks the stop rules
(:mod:`speedopt.search._stop_rule`: the budget's :class:`~speedopt.search._budget.Target`, the
:class:`~speedopt.search._ceiling_stop.CeilingStop`) after each, until the study holds its target or a rule says why
it stops; then it waits out other workers' trials that may still be retried. Every process of the study runs it,
workers too."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from speedopt.defaults import GRACE_S, HEARTBEAT_S
from speedopt.isolation import wait_until
from speedopt.knobs import Knobs
from speedopt.measure import Ceilings
from speedopt.search import _ceilings as ceilings_mod
from speedopt.search._budget import Target, full, guarded, spent
from speedopt.search._ceiling_stop import CeilingStop
from speedopt.search._claim import Claim
from speedopt.search._objective import objective
from speedopt.search._recovery import awaited, recover_stale
from speedopt.search._stage import SearchContext, Stage
from speedopt.search._stop_rule import StopRule
from speedopt.study import schema
from speedopt.study.notes import write_note

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


class TrialsStage(Stage):
    name = "trials"
    creator_only = False
    after_trials = False

    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        plan, clock = ctx.plan, ctx.clock
        one_trial = ctx.interrupts.guard(guarded(objective(plan, ctx.view, ctx.judge, ctx.inputs, clock), plan.protocol.trials))
        with ctx.interrupts.quiet():

            def ceilings_of(knobs: Knobs) -> Ceilings | None:
                with clock.stage("ceilings"):
                    return ceilings_mod.ceilings_of(plan, ctx.study, knobs, ctx.view, ctx.inputs)

            _fill(ctx, one_trial, (Target(plan.protocol.trials), CeilingStop(plan, ctx.view, ceilings_of)))


def _until_a_rule_stops(
    study: optuna.Study, one_trial: Callable[[optuna.Trial], float], rules: Sequence[StopRule], deadline: float | None
) -> None:
    """Run trials one at a time until a rule says why the study stops, one stored the study's stop, or the deadline
    passes. Every rule is asked after each trial this process ran, here and not in an Optuna callback (which only
    hands the trial over), so a rule may run jobs (the ceiling stop measures ceilings)."""
    ran: list[FrozenTrial] = []

    def hand_over(_: optuna.Study, trial: FrozenTrial) -> None:
        ran.append(trial)

    while deadline is None or deadline > time.monotonic():
        ran.clear()
        left = None if deadline is None else deadline - time.monotonic()
        study.optimize(one_trial, n_trials=1, timeout=left, callbacks=[hand_over], gc_after_trial=False)
        if not ran:
            return
        write_note(study, ran[0])  # the trial's one-screen summary in the dashboard
        said = [(rule, rule.why(study, ran[0])) for rule in rules]
        for rule, why in said:
            if why and rule.kept:
                schema.write_stopped(study, why)
        if any(why for _, why in said) or schema.read_stopped(study):
            return


def _fill(ctx: SearchContext, one_trial: Callable[[optuna.Trial], float], rules: Sequence[StopRule]) -> None:
    """Run trials until the study holds its target (or a stop rule of ``rules`` says why not), waiting out other
    workers' trials that may still be retried."""
    study, storage, plan, view = ctx.study, ctx.storage, ctx.plan, ctx.view
    target = plan.protocol.trials
    deadline = None if plan.timeout_s is None else time.monotonic() + plan.timeout_s
    if not full(study, target) and schema.read_stopped(study):
        schema.write_stopped(study, None)  # a resumed search (more trials asked) samples again
    said: list[int] = []

    def filled() -> bool:
        """Run trials while the study is short; True when nothing is left for this process to run or wait for."""
        if deadline is not None and deadline <= time.monotonic():
            return True
        if not full(study, target):
            _until_a_rule_stops(study, one_trial, rules, deadline)
        if spent(study) >= target or schema.read_stopped(study):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return True
        running = awaited(study, storage, ctx.longest_s)
        if not running and full(study, target):
            return True  # trials no process here can judge (another host, no heartbeat): they are theirs to finish
        if running and running != said:
            view.note(
                f"waiting for trial(s) {', '.join(map(str, running))} on other workers: the study needs {target} run; "
                f"a trial whose worker died is retried here after its {GRACE_S} s heartbeat grace"
            )
            said[:] = running
        return False

    def beat(seconds: float) -> None:
        """Wait one heartbeat, then retry the trials whose worker stopped beating."""
        time.sleep(seconds)
        retried = recover_stale(study, storage)
        if retried:
            view.note(f"trial(s) {', '.join(map(str, retried))} stopped beating (worker gone): failed and retried here")

    wait_until(filled, float("inf"), every_s=HEARTBEAT_S, pause=beat)
