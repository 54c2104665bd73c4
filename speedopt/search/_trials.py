"""The trials stage: Optuna's own loop (``Study.optimize`` with ``timeout`` and a
:class:`~optuna.study.MaxTrialsCallback`) runs trials (:mod:`speedopt.search._objective`) until the study holds its
target or a stop rule says so (:mod:`speedopt.search._budget`, :mod:`~speedopt.search._skip`,
:mod:`~speedopt.search._prune`, :mod:`~speedopt.search._ceiling_stop`), then waits out other workers' trials that may still be
retried. Every process of the study runs it, workers too."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt.defaults import GRACE_S, HEARTBEAT_S
from speedopt.isolation import wait_until
from speedopt.knobs import Knobs
from speedopt.measure import Ceilings
from speedopt.search import _ceilings as ceilings_mod
from speedopt.search._budget import full, guarded, max_trials, spent
from speedopt.search._ceiling_stop import stop_at_ceiling
from speedopt.search._claim import Claim
from speedopt.search._objective import objective
from speedopt.search._recovery import awaited, recover_stale
from speedopt.search._stage import SearchContext, Stage
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

            stop = stop_at_ceiling(plan, ctx.view, ceilings_of)

            def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
                write_note(study, trial)  # the trial's one-screen summary in the dashboard
                stop(study, trial)

            _fill(ctx, one_trial, after_trial)


def _fill(
    ctx: SearchContext, one_trial: Callable[[optuna.Trial], float],
    after_trial: Callable[[optuna.Study, FrozenTrial], None] = lambda study, trial: None,
) -> None:
    """Run trials until the study holds its target, waiting out other workers' trials that may still be retried;
    ``after_trial`` runs after each trial is stored (an Optuna callback)."""
    study, storage, plan, view = ctx.study, ctx.storage, ctx.plan, ctx.view
    target = plan.protocol.trials
    deadline = None if plan.timeout_s is None else time.monotonic() + plan.timeout_s
    if not full(study, target) and schema.read_stopped(study):
        schema.write_stopped(study, None)  # a resumed search (more trials asked) samples again
    said: list[int] = []

    def filled() -> bool:
        """Run trials while the study is short; True when nothing is left for this process to run or wait for."""
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return True
        if not full(study, target):
            study.optimize(one_trial, timeout=left, callbacks=[max_trials(target), after_trial], gc_after_trial=False)
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
