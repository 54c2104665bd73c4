"""The optimise loop's stages: an Optuna study of short, real training trials over the speed knobs.

:func:`run` opens the study (:mod:`speedopt.search._open`: created, resumed or joined, the baseline
enqueued as trial 0), ranks the space by its ceilings once, and lets Optuna's own loop
(``Study.optimize`` with ``timeout`` and a :class:`~optuna.study.MaxTrialsCallback`) run trials
(:mod:`speedopt.search._objective`) until the study holds its target or a stop rule says so
(:mod:`speedopt.search._stop`). The study's creator then runs the finals, the ablation and the ends'
ceilings. What it does is told to a :class:`~speedopt.search.View`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt import engines
from speedopt.defaults import GRACE_S, HEARTBEAT_S
from speedopt.isolation import wait_until
from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, Ceilings, TrialResult, key_of, warm_worker
from speedopt.offline import cache_dir
from speedopt.quality import Judge, ProbeTarget
from speedopt.search import _ablation as ablation_mod
from speedopt.search import _ceilings as ceilings_mod
from speedopt.search import _compile as compile_mod
from speedopt.search import _finals as finals_mod
from speedopt.search import _rank as rank_mod
from speedopt.search._claim import Claim, claimed
from speedopt.search._ends import ends
from speedopt.search._interrupt import Interrupts
from speedopt.search._objective import Inputs, label_caches, measure, objective, request_for, study_dataset
from speedopt.search._open import open_study
from speedopt.search._plan import SearchPlan
from speedopt.search._recovery import awaited, recover_stale, retry_callback, retry_interrupted
from speedopt.search._runner import Runner
from speedopt.search._view import QuietView, View
from speedopt.status import Status
from speedopt.study import Clock, Need, SearchOutcome, open_storage, outcome, records, schema, storage_errors
from speedopt.study.notes import write_finals_notes, write_note
from speedopt.study.record_types import Ranking

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial


def run(plan: SearchPlan, view: View | None = None, runner: Runner | None = None) -> SearchOutcome:
    """Create (or resume, or join) the study and run trials until it holds its target (complete trials and those
    pruned part-way: :func:`~speedopt.search._stop.spent`).

    Several processes may share one study: a trial that would exceed the target because another
    worker took the last slot is pruned before it measures, and each process stops starting trials
    once spent and running trials reach the target (:func:`~speedopt.search._stop.max_trials`) or ``plan.timeout_s``
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
    env = engines.get(p.engine, yolov5_dir=p.yolov5_dir).environment(cache_dir())
    note = "starting a warm worker: torch and the trainer imported once, every trial forked from it"
    return warm_worker(p.engine, p.yolov5_dir, env, on_start=lambda: view.note(note), enabled=plan.warm)


def _search(
    plan: SearchPlan, study: optuna.Study, storage: BaseStorage, view: View, interrupts: Interrupts, clock: Clock, runner: Runner
) -> None:
    """The trials, then (for the study's creator) the finals, the ablation and the ends' ceilings; each stage
    timed for the study's bill."""
    from speedopt.search._stop import full, guarded, spent, stop_at_ceiling

    p = plan.protocol
    with clock.stage("labels"):
        yamls = [p.data, *(c.yaml for c in p.copies)]
        inputs = Inputs(study_dataset(plan), label_caches(plan, study, view, yamls, runner), runner=runner)
    target = ProbeTarget(
        p.data, p.dataset.id, p.engine, p.yolov5_dir, p.device, tuple((c.imgsz, c.yaml) for c in p.copies),
        p.copies[0].format if p.copies else "", p.dataset.train_images, p.epochs,
    )
    judge = Judge(
        p.quality, target, p.baseline, storage,
        plan.study_name, on_wait=view.note, progress=view.trial_progress, note=view.price, run=runner.job,
        confirmations=sum(r.confirm_risk is not None for r in records(study)),  # each spent half the risk left
    )
    one_trial = interrupts.guard(guarded(objective(plan, view, judge, inputs, clock), p.trials))
    if plan.create:
        with clock.stage("ranking"):
            _rank(plan, study, view, inputs)
    with interrupts.quiet():

        def ceilings_of(knobs: Knobs) -> Ceilings | None:
            with clock.stage("ceilings"):
                return ceilings_mod.ceilings_of(plan, study, knobs, view, inputs)

        stop = stop_at_ceiling(plan, view, ceilings_of)

        def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
            write_note(study, trial)  # the trial's one-screen summary in the dashboard
            stop(study, trial)

        with clock.stage("trials"):
            _fill(study, storage, one_trial, plan, view, after_trial)
    if plan.create and (spent(study) >= p.trials or schema.read_stopped(study)):
        with clock.stage("finals"):
            _finals(plan, study, view, inputs)
        if p.compile_modes:
            with claimed(storage, study.study_name, "compile", _longest_s(plan), view.note) as claim, clock.stage("compile"):
                _compile(plan, study, view, inputs, claim)
        # Decisions taken once, as the finals' are: the first run to get here owns them; another waits, then reads them.
        with claimed(storage, study.study_name, "ablation", _longest_s(plan), view.note) as claim, clock.stage("ablation"):
            _ablation(plan, study, view, inputs, claim)
        if plan.ends:
            with clock.stage("ends"):
                ends(plan, study, view, inputs)
    elif plan.create and full(study, p.trials):
        view.note("finals wait for trials still running on other workers: rerun this command when they are done")


def _rank(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs) -> None:
    """Once per study, before its first trial completes: bound every config by its ceilings and enqueue the
    highest first (:mod:`speedopt.search._rank`); the study keeps what it did (:func:`~speedopt.study.schema.write_ranking`)."""
    from optuna.trial import TrialState

    from speedopt.search._stop import complete

    p = plan.protocol
    if schema.read_ranking(study) is not None or complete(study) or any(
        t.state == TrialState.PRUNED for t in study.get_trials(deepcopy=False)
    ):
        return
    grid = rank_mod.configs(p.space)
    jobs = len(rank_mod.representatives(grid)) if grid is not None else 0  # at most: the branch and bound runs fewer
    skip = (
        "the space is too large to enumerate its ceilings" if grid is None
        else "ceilings are measured on one GPU; this search varies gpus" if "gpus" in p.space.sampled()
        else f"the {p.engine} engine measures no ceilings" if not engines.get(p.engine, yolov5_dir=p.yolov5_dir).supports_ceilings
        else rank_mod.skip_mode(p.ceiling_rank, len(grid), p.trials)
    )
    if skip is not None or grid is None:
        schema.write_ranking(study, Ranking(len(grid or ()), jobs, False, skip or ""))
        view.note(f"ceiling ranking: {skip}")
        return
    view.note(
        f"ceiling ranking: at most {jobs} ceiling jobs bound the space's {len(grid)} configs; measuring those that can "
        "change which bound is highest, before the trials"
    )
    started = time.monotonic()
    known = _bounded(plan, study, view, inputs, grid)
    queued = [Knobs(**{**p.baseline.to_dict(), **(t.system_attrs.get("fixed_params") or t.params)}) for t in study.get_trials(deepcopy=False)]
    ranking = rank_mod.rank(grid, known, rank_mod.first_count(p.trials), skip=[p.baseline, *queued])
    ranking = dataclasses.replace(ranking, wall_s=time.monotonic() - started)
    sampled = p.space.sampled()
    for knobs, top in ranking.enqueued:
        study.enqueue_trial({k: v for k, v in knobs.to_dict().items() if k in sampled}, user_attrs={schema.ROLE: "ceiling-rank", schema.BOUND: top})
    schema.write_ranking(study, ranking)
    view.note(f"ceiling ranking: {ranking.message} ({ranking.wall_s:.0f} s of ceiling jobs)")


def _bounded(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs, grid: list[Knobs]) -> dict[str, Ceiling]:
    """The grid's ceilings, branch and bound (:func:`~speedopt.search._rank.next_job`): measured one by one, each
    stored at once. Known by the key as asked: a job the trainer ran with other knobs (no workers on a CPU) stands
    for the key it was asked for; one that measured nothing ends that key's branch."""
    known = dict(schema.read_ceilings(study))
    while (job := rank_mod.next_job(grid, known)) is not None:
        kind, knobs = job
        found = ceilings_mod.ceilings_of(plan, study, knobs, view, inputs, kinds=(kind,))
        got, key = getattr(found, kind) if found is not None else None, key_of(kind, knobs)
        known[f"{kind}|{key}"] = got if got is not None else Ceiling(kind, key, Status.ERROR, "not measured")
        if got is not None:
            known[f"{kind}|{got.key}"] = got  # as run, as the study keeps it
    return known


def _longest_s(plan: SearchPlan) -> float:
    """The most one trial may run, probes included (three: the baseline's two seeds and its own), plus the grace."""
    p = plan.protocol
    return p.trial_timeout_s + (3 * p.quality.timeout_s if p.quality.probing else 0.0) + 2 * GRACE_S


def _fill(
    study: optuna.Study, storage: BaseStorage, one_trial: Callable[[optuna.Trial], float], plan: SearchPlan, view: View,
    after_trial: Callable[[optuna.Study, FrozenTrial], None] = lambda study, trial: None,
) -> None:
    """Run trials until the study holds its target, waiting out other workers' trials that may still be retried;
    ``after_trial`` runs after each trial is stored (an Optuna callback)."""
    from speedopt.search._stop import full, max_trials, spent

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
        running = awaited(study, storage, _longest_s(plan))
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


def _measure(plan: SearchPlan, view: View, inputs: Inputs, claim: Claim | None = None) -> Callable[[Knobs], TrialResult]:
    """One measurement of the finals or the ablation (by the owner of ``claim``: each renews it first)."""

    def one(knobs: Knobs) -> TrialResult:
        if claim is not None:
            claim.beat()
        return measure(plan, request_for(plan, knobs, inputs), view, inputs)

    return one


def _finals(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs) -> None:
    """Re-measure the leaders beside the baseline in interleaved rounds (see :mod:`speedopt.search._finals`)."""
    p = plan.protocol
    finals = finals_mod.run(
        study, records(study), p.finalists, p.repeats, _measure(plan, view, inputs),
        p.min_gain, begin=view.finals_started, started=view.repeat_started, finished=view.repeat_finished, note=view.note,
        stale_s=_longest_s(plan),
    )
    if finals is not None:
        write_finals_notes(study, finals)


def _compile(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs, claim: Claim) -> None:
    """Decide torch.compile once, on the recommendation (see :mod:`speedopt.search._compile`)."""
    p = plan.protocol
    rec = outcome(study).recommended
    if rec is None:
        view.note("torch.compile: not decided: no config measured ok to decide it on")
        return
    fresh = compile_mod.planned(rec, p.compile_modes, p.repeats, p.epochs, p.dataset.train_images, p.min_gain)
    view.note(
        f"torch.compile: measuring trial {rec.number}'s config eager and with compile={', '.join(p.compile_modes)} in "
        f"{fresh.repeats} interleaved rounds"
    )
    decision = compile_mod.run(
        study, fresh, _measure(plan, view, inputs, claim), started=view.compile_step_started, finished=view.compile_step_finished,
    )
    view.decided(decision.line())


def _ablation(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs, claim: Claim) -> None:
    """Measure which change bought what on the path to the recommendation (see :mod:`speedopt.search._ablation`)."""
    p = plan.protocol
    if study.user_attrs.get(schema.ABLATE) != p.ablate:  # this run's choice, for the report
        study.set_user_attr(schema.ABLATE, p.ablate)
    if not p.ablate:
        return

    def unrunnable(knobs: Knobs) -> str | None:
        request = request_for(plan, knobs, inputs)
        return request.message if isinstance(request, TrialResult) else request.infeasible

    ablation_mod.run(
        study, records(study), schema.read_finals(study), _measure(plan, view, inputs, claim),
        unrunnable, p.min_gain, begin=view.ablation_started, started=view.ablation_step_started, finished=view.ablation_step_finished,
    )
