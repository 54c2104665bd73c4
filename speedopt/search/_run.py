"""The optimise loop's stages: an Optuna study of short, real training trials over the speed knobs.

:func:`run` opens the study (:mod:`speedopt.search._open`: created, resumed or joined, the baseline
enqueued as trial 0), builds the context every stage reads (:class:`~speedopt.search._stage.SearchContext`: the
label caches built once, the judge) and runs :data:`STAGES` in order: the ranking by ceilings, the trials
(:mod:`speedopt.search._trials`), then, for the study's creator once the study holds its target, the finals, the
compile decision, the ablation and the ends. What it does is told to a :class:`~speedopt.search.View`.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from speedopt.measure import warm_worker
from speedopt.offline import cache_dir
from speedopt.quality import Judge, ProbeTarget
from speedopt.search._ablation import AblationStage
from speedopt.search._budget import full, spent
from speedopt.search._claim import Claim, claimed
from speedopt.search._compile import CompileStage
from speedopt.search._ends import EndsStage
from speedopt.search._finals import FinalsStage
from speedopt.search._interrupt import Interrupts
from speedopt.search._objective import Inputs, label_caches, study_dataset
from speedopt.search._open import open_study
from speedopt.search._plan import SearchPlan
from speedopt.search._ranking import RankingStage
from speedopt.search._recovery import retry_callback, retry_interrupted
from speedopt.search._runner import Runner
from speedopt.search._stage import SearchContext, Stage
from speedopt.search._trials import TrialsStage
from speedopt.search._view import QuietView, View
from speedopt.study import Clock, Need, SearchOutcome, open_storage, outcome, records, schema, storage_errors

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage


def run(plan: SearchPlan, view: View | None = None, runner: Runner | None = None) -> SearchOutcome:
    """Create (or resume, or join) the study and run trials until it holds its target (complete trials and those
    pruned part-way: :func:`~speedopt.search._budget.spent`).

    Several processes may share one study: a trial that would exceed the target because another
    worker took the last slot is pruned before it measures, and each process stops starting trials
    once spent and running trials reach the target (:class:`~speedopt.search._budget.Target`) or ``plan.timeout_s``
    passes. It then waits for the other workers' running trials: one whose worker died is failed once
    its heartbeat is stale and retried here, so no process leaves the study short while a trial can
    still be recovered. Ctrl-C fails the running trial and re-enqueues it for the next run.

    ``runner`` runs every job of the search (:class:`~speedopt.search.Runner`: the trainer's processes by default);
    a replay gives one that answers from a measured table.
    """
    view, runner = view or QuietView(), runner or Runner()
    with storage_errors(plan.storage_url):
        storage = open_storage(plan.storage_url, Need.CREATE if plan.create else Need.WRITE, on_stale=retry_callback())
        study, notes = open_study(plan, storage)
        interrupts = Interrupts()
        clock = Clock()
        clock.bind(study)
        clock.add("prepare", plan.prepare_s, work=True)  # the copies this run made; the rest is billed once it measures
        view.start(plan, outcome(study), notes)
        try:
            started = time.monotonic()
            with _warm(plan, view):
                clock.add("start", time.monotonic() - started)  # the warm worker's start: torch and the trainer imported
                _search(plan, study, storage, view, interrupts, clock, runner)
        except KeyboardInterrupt:
            retry_interrupted(study, storage, interrupts.trials)
            raise
        finally:
            view.stop()
        return outcome(study)


def _warm(plan: SearchPlan, view: View) -> contextlib.AbstractContextManager[object]:
    """The warm worker every job of this run forks from: started here, or the caller's (a block of
    :func:`~speedopt.measure.warm_worker` around several searches); none with ``plan.warm`` off (``--cold``)
    or when it cannot start."""
    p = plan.protocol
    env = p.engine_spec.engine.environment(cache_dir())
    note = "starting a warm worker: torch and the trainer imported once, every trial forked from it"
    return warm_worker(p.engine_spec, env=env, on_start=lambda: view.note(note), enabled=plan.warm)


#: The search, in order (issue 55): a new stage is its module and a line here.
STAGES: tuple[Stage, ...] = (RankingStage(), TrialsStage(), FinalsStage(), CompileStage(), AblationStage(), EndsStage())


def _search(
    plan: SearchPlan, study: optuna.Study, storage: BaseStorage, view: View, interrupts: Interrupts, clock: Clock, runner: Runner
) -> None:
    """The stages of :data:`STAGES` over one context, each timed for the study's bill; a stage that waits for the
    trials runs once the study holds its target (for the study's creator: a worker stops after the trials)."""
    ctx = _context(plan, study, storage, view, interrupts, clock, runner)
    p = plan.protocol
    trials_done: bool | None = None
    for stage in STAGES:
        if stage.creator_only and not plan.create:
            continue
        if stage.after_trials and trials_done is None:
            trials_done = bool(spent(study) >= p.trials or schema.read_stopped(study))
            if not trials_done and full(study, p.trials):
                view.note("finals wait for trials still running on other workers: rerun this command when they are done")
        if (stage.after_trials and not trials_done) or not stage.wanted(ctx):
            continue
        view.stage_started(stage.name)
        try:
            with _claimed(ctx, stage) as claim, clock.stage(stage.name):
                stage.run(ctx, claim)
        finally:
            view.stage_finished(stage.name)


def _claimed(ctx: SearchContext, stage: Stage) -> contextlib.AbstractContextManager[Claim | None]:
    """The stage's claim in the storage (waiting while another live process owns it), or none."""
    if stage.claim is None:
        return contextlib.nullcontext()
    return claimed(ctx.storage, ctx.study.study_name, stage.claim, ctx.longest_s, ctx.view.note)


def _context(
    plan: SearchPlan, study: optuna.Study, storage: BaseStorage, view: View, interrupts: Interrupts, clock: Clock, runner: Runner
) -> SearchContext:
    """What every stage reads: the trials' inputs (the label caches, built once: the bill's "labels") and the judge."""
    p = plan.protocol
    with clock.stage("labels"):
        yamls = [p.data, *(c.yaml for c in p.copies)]
        inputs = Inputs(study_dataset(plan), label_caches(plan, study, view, yamls, runner), runner=runner)
    target = ProbeTarget(
        p.data, p.dataset.id, p.engine_spec, p.device, tuple((c.imgsz, c.yaml) for c in p.copies),
        p.copies[0].format if p.copies else "", p.dataset.train_images, p.epochs,
    )
    judge = Judge(
        p.quality, target, p.baseline, storage,
        plan.study_name, on_wait=view.note, progress=view.trial_progress, note=view.price, run=runner.job,
        confirmations=sum(r.confirm_risk is not None for r in records(study)),  # each spent half the risk left
    )
    return SearchContext(plan, study, storage, view, clock, inputs, judge, interrupts)
