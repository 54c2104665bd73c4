"""The optimise loop: an Optuna study of short, real training trials over the speed knobs.

:func:`run` creates (or resumes, or joins) the study, enqueues the baseline as trial 0, and lets
Optuna's own loop (``Study.optimize`` with ``timeout`` and a :class:`~optuna.study.MaxTrialsCallback`)
run trials until the study holds its target. Every trial ends in a closed status (ok, oom, timeout,
infeasible, error): a non-ok trial is recorded with its status and message, scores 0 images/s and
violates the ``measured`` constraint, so the sampler learns to avoid it and it is never the best.

Once per study, before its first trial, the trainer's label caches of the data it trains on are built
(:func:`label_caches`, kept in the study's user attrs), so no trial scans labels; the dataset is listed
once per run (the plan's listing) and handed to every trial's request.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from speedopt import engines
from speedopt.data import Dataset, load
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import (
    LABELS_ATTR,
    Ceilings,
    LabelCaches,
    TrialRequest,
    TrialResult,
    build_label_caches,
    prepare,
    run_trial,
    warm_worker,
)
from speedopt.measure._ceilings import COMPUTE_KNOBS, DATA_KNOBS
from speedopt.offline import cache_dir
from speedopt.quality import Judge, ProbeTarget, Verdict, merge_cache, not_measured
from speedopt.status import Status
from speedopt.study import _ablation as ablation_mod
from speedopt.study import _ceilings as ceilings_mod
from speedopt.study import _finals as finals_mod
from speedopt.study import _memory as memory_mod
from speedopt.study import _note as note_mod
from speedopt.study import _rank as rank_mod
from speedopt.study._interrupt import Interrupts
from speedopt.study._outcome import SearchOutcome, outcome
from speedopt.study._plan import SearchPlan
from speedopt.study._protocol import OBJECTIVE
from speedopt.study._record import TrialRecord, baseline_trial, best_trial, measurement_attrs, records, verdict_attrs
from speedopt.study._recovery import awaited, recover_interrupted, recover_stale, retry_interrupted, worker_id
from speedopt.study._space import Space
from speedopt.study._storage import (
    GRACE_S,
    HEARTBEAT_S,
    Need,
    check_study_name,
    open_storage,
    redact,
    storage_errors,
    study_names,
)

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial


class View(abc.ABC):  # noqa: B024 - every hook is optional
    """What a search reports while it runs; every hook does nothing unless a view overrides it."""

    def start(self, plan: SearchPlan, so_far: SearchOutcome, notes: list[str]) -> None:
        """The study is open: its target, what it already holds, notes on the plan."""

    def trial_started(self, number: int, knobs: Knobs) -> None:
        """A trial begins measuring ``knobs``."""

    def trial_progress(self, update: dict[str, Any]) -> None:
        """A running trial or probe moved on (``phase``, and ``done`` of ``of`` where known)."""

    def trial_finished(self, number: int, result: TrialResult, baseline: bool, verdict: Verdict) -> None:
        """A trial ended, with its accuracy verdict."""

    def waiting(self, message: str) -> None:
        """Waiting for the host lock held by another process."""

    def finals_started(self, finals: tuple[int, ...], repeats: int) -> None:
        """The finals begin: these trials' configs (the baseline's first) in ``repeats`` interleaved rounds."""

    def repeat_started(self, round_: int, repeats: int, record: TrialRecord) -> None:
        """Round ``round_`` (0-based) measures the config of ``record`` again."""

    def repeat_finished(self, round_: int, record: TrialRecord, result: TrialResult) -> None:
        """A repeat measurement ended."""

    def ablation_started(self, changes: tuple[str, ...], repeats: int) -> None:
        """The ablation begins: these changes (``workers 8 -> 2``) ordered, then the path in ``repeats`` rounds."""

    def ablation_step_started(self, label: str, knobs: Knobs) -> None:
        """An ablation measurement begins (``label``: an ordering candidate, or a round's config on the path)."""

    def ablation_step_finished(self, label: str, result: TrialResult) -> None:
        """An ablation measurement ended."""

    def stop(self) -> None:
        """The search is over (normally or not)."""


class QuietView(View):
    """Reports nothing (the Python API's default)."""


def suggest(trial: optuna.Trial, space: Space) -> Knobs:
    """Ask the trial for each sampled knob; fixed knobs take their one value."""
    values = dict(space.fixed())
    for name, domain in space.sampled().items():
        if domain.choices is not None:
            values[name] = trial.suggest_categorical(name, list(domain.choices))
        else:
            assert domain.low is not None and domain.high is not None
            values[name] = trial.suggest_int(name, domain.low, domain.high, step=domain.step)
    return Knobs(**values)


def best_feasible(study: optuna.Study) -> float | None:
    """Images/s of the best trial so far (None if none yet)."""
    best = best_trial(records(study))
    return best.images_per_s if best else None


@dataclass(frozen=True)
class _Inputs:
    """What every trial of one run shares: the dataset listed once, and the study's label caches."""

    dataset: Dataset
    labels: LabelCaches = field(default_factory=LabelCaches)
    copies: dict[str, Dataset] = field(default_factory=dict)  # prepared copies' listings, read on first use

    def listing(self, yaml: str) -> Dataset:
        """The listing of the study's data or of one of its prepared copies, read once per run."""
        if str(self.dataset.yaml_path) == yaml:
            return self.dataset
        if yaml not in self.copies:
            self.copies[yaml] = load(yaml)
        return self.copies[yaml]


def study_dataset(plan: SearchPlan) -> Dataset:
    """The study's data, listed once per run: the plan's listing, else read now (a worker's plan has none)."""
    ds = plan.dataset
    if ds is not None and str(ds.yaml_path) == plan.protocol.data:
        return ds
    return load(plan.protocol.data)


def label_caches(plan: SearchPlan, study: optuna.Study, view: View, yamls: Sequence[str]) -> LabelCaches:
    """The trainer's label caches of ``yamls`` (every data.yaml the study may train on), built once per
    study before its first trial and kept in its user attrs (:data:`~speedopt.measure.LABELS_ATTR`).

    A study that holds the attr (resumed, or joined after its creator built them) builds nothing, nor
    does an engine without the hook; a failed build is a note and its trials scan their labels.
    """
    stored = study.user_attrs.get(LABELS_ATTR)
    if stored is not None:
        return LabelCaches.from_attr(stored)
    p = plan.protocol
    if not engines.get(p.engine, yolov5_dir=p.yolov5_dir).supports_label_cache:
        return LabelCaches()
    images = p.dataset.train_images + p.dataset.val_images
    what = f"{images} images (train and val)" + (f" in each of {len(yamls)} data.yamls (the dataset and its prepared copies)" if len(yamls) > 1 else "")
    view.waiting(f"building the trainer's label cache once for {what}, before the first trial")
    caches = build_label_caches(
        yamls, p.engine, p.yolov5_dir, images, plan.study_name, progress=view.trial_progress, on_wait=view.waiting
    )
    study.set_user_attr(LABELS_ATTR, caches.to_attr())
    view.waiting(caches.summary())
    return caches


def _prepare(plan: SearchPlan, knobs: Knobs, inputs: _Inputs) -> TrialRequest | TrialResult:
    """The checked request for ``knobs``, or an error result (e.g. the dataset vanished mid-search)."""
    p = plan.protocol
    try:
        yaml = p.data_yaml(knobs)  # data=resized: the prepared copy at the knobs' imgsz
        return prepare(
            inputs.listing(yaml), knobs, device=p.device, engine=p.engine,
            yolov5_dir=p.yolov5_dir, steps=p.steps, warmup=p.warmup, timeout_s=p.trial_timeout_s, seed=plan.seed,
            ram_limit_bytes=p.ram_limit_bytes, max_steps=p.max_steps, label_caches=inputs.labels.for_data(yaml),
        )
    except UsageError as exc:  # record, don't crash
        return TrialResult(Status.ERROR, str(exc), knobs, knobs, p.device, p.engine)


def _measure(
    plan: SearchPlan, request: TrialRequest | TrialResult, view: View, inputs: _Inputs, trial: optuna.Trial | None = None,
    live: optuna.Trial | None = None,
) -> TrialResult:
    """Measure ``request``; with ``trial``, its running images/s goes to Optuna's pruner as it comes, and a
    pruned trial's child is killed at once (``optuna.TrialPruned`` out of here, every process of it gone);
    with ``live``, that trial's user attr ``phase`` follows the job's phase (the dashboard shows it while it runs)."""
    if isinstance(request, TrialResult):
        return request
    progress = view.trial_progress if trial is None else _reporting(trial, plan, view.trial_progress)
    if live is not None:
        progress = _phases(live, progress)
    return run_trial(
        request, progress=progress, on_wait=view.waiting, owner=plan.study_name, dataset=inputs.listing(request.data_yaml),
    )


def _reporting(trial: optuna.Trial, plan: SearchPlan, show: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A progress callback that also reports each measured step's running images/s and prunes when Optuna says so."""
    import optuna

    from speedopt.study._pruner import pruned_text

    def progress(update: dict[str, Any]) -> None:
        show(update)
        rate, step = update.get("rate"), update.get("done")
        if update.get("phase") != "measure" or not rate or not isinstance(step, int):
            return
        trial.report(float(rate), step)
        if trial.should_prune():
            why = pruned_text(float(rate), step, trial.study, plan.protocol.prune_margin)
            trial.set_user_attr("pruned", why)
            raise optuna.TrialPruned(why)

    return progress


def _phases(trial: optuna.Trial, then: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A progress callback that keeps the trial's user attr ``phase`` (one storage write per change of phase)."""
    last = {"phase": ""}

    def progress(update: dict[str, Any]) -> None:
        phase = str(update.get("phase") or "")
        if phase and phase != last["phase"]:
            last["phase"] = phase
            trial.set_user_attr("phase", phase)
        then(update)

    return progress


def duplicate_of(study: optuna.Study, asked: Knobs, request: TrialRequest | TrialResult) -> int | None:
    """The earlier trial that measured the same config (as asked, or as it will run), if any; a trial the
    pruner stopped counts too (measured far enough to know it is slow: never again)."""
    from optuna.trial import TrialState

    runs = request.knobs if isinstance(request, TrialRequest) else None
    for r in records(study):
        if r.result.requested == asked or (runs is not None and r.config == runs):
            return r.number
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        if t.user_attrs.get(PRUNED_CONFIG) == asked.to_dict():
            return t.number
    return None


PRUNED_CONFIG = "pruned_config"  # the knobs (as asked) of a trial the pruner stopped


#: Proposals in a row that repeat measured configs before the search stops: the space is used up.
DUPLICATE_LIMIT = 25


def _not_run(trial: optuna.Trial, plan: SearchPlan, knobs: Knobs, request: TrialRequest | TrialResult) -> str | None:
    """Why a sampled config is not measured: measured before, or its ceilings cannot reach the best (None: measure it)."""
    earlier = duplicate_of(trial.study, knobs, request)
    if earlier is not None:
        trial.set_user_attr("duplicate_of", earlier)
        return f"config already measured in trial {earlier}"
    runs = request.knobs if isinstance(request, TrialRequest) else knobs
    why = rank_mod.hopeless(runs, ceilings_mod.known(trial.study), best_feasible(trial.study), plan.protocol.prune_margin)
    if why is not None:
        trial.set_user_attr("pruned", why)
        trial.set_user_attr(PRUNED_CONFIG, knobs.to_dict())
    return why


def _objective(plan: SearchPlan, view: View, judge: Judge, inputs: _Inputs) -> Callable[[optuna.Trial], float]:
    repeats = {"in_a_row": 0}

    def objective(trial: optuna.Trial) -> float:
        import optuna

        trial.set_user_attr("worker", worker_id())
        baseline = trial.user_attrs.get("role") == "baseline"
        suggested = suggest(trial, plan.protocol.space)  # the baseline's enqueued values too: the sampler learns from it
        knobs = plan.protocol.baseline if baseline else suggested

        request = _prepare(plan, knobs, inputs)
        why = None if baseline else _not_run(trial, plan, knobs, request)
        if why is not None:  # not measured as a new trial: the budget goes to configs that may win
            repeats["in_a_row"] += 1
            if repeats["in_a_row"] >= DUPLICATE_LIMIT:
                trial.study.set_user_attr(
                    "stopped", f"the sampler proposed only measured or hopeless configs {DUPLICATE_LIMIT} times in a row: the space is used up"
                )
                trial.study.stop()
            raise optuna.TrialPruned(why)
        repeats["in_a_row"] = 0
        view.trial_started(trial.number, knobs)
        prediction = None
        if isinstance(request, TrialRequest):
            request, prediction = memory_mod.predicted(
                trial.study, plan.protocol, request, inputs.listing(request.data_yaml), view.waiting
            )
        try:
            result = memory_mod.record(_measure(plan, request, view, inputs, None if baseline else trial, live=trial), prediction)
        except optuna.TrialPruned as exc:
            trial.set_user_attr(PRUNED_CONFIG, knobs.to_dict())
            view.waiting(f"trial {trial.number}: {exc}")
            raise
        stored = result.to_dict()
        stored["log_tail"] = stored["log_tail"][-2000:]
        for key, value in measurement_attrs(stored).items():
            trial.set_user_attr(key, value)
        if result.ok:
            trial.set_user_attr("phase", "accuracy")  # quality probes, if its signature needs any
            verdict = judge.verdict(result.config, result.images_per_s or 0.0, best_feasible(trial.study))
        else:
            verdict = not_measured(knobs, result.status)
        for key, value in verdict_attrs(verdict.attrs()).items():
            trial.set_user_attr(key, value)
        trial.set_constraint("measured", 0.0 if result.ok else 1.0)
        trial.set_constraint("map_loss", verdict.constraint())
        trial.set_user_attr("phase", "done")
        view.trial_finished(trial.number, result, baseline=baseline, verdict=verdict)
        return float(result.images_per_s or 0.0) if result.ok else 0.0

    return objective


def _ceilings_of(plan: SearchPlan, study: optuna.Study, knobs: Knobs, view: View, inputs: _Inputs) -> Ceilings | None:
    """The ceilings of ``knobs`` (as run), found in the study or measured now (None: the engine has none, or
    a multi-GPU config: ceilings are measured on one GPU)."""
    p = plan.protocol
    if knobs.gpus > 1 or not engines.get(p.engine, yolov5_dir=p.yolov5_dir).supports_ceilings:
        return None
    return ceilings_mod.measure(
        study, knobs, lambda asked: _prepare(plan, asked, inputs), lambda request: _measure(plan, request, view, inputs)
    )


def _stop_at_ceiling(plan: SearchPlan, view: View, inputs: _Inputs) -> Callable[[optuna.Study, FrozenTrial], None]:
    """An Optuna callback (after each trial is stored): when the trial just finished is the best feasible one,
    stop the study once it reaches 95% of min(its ceilings) (``--stop-at-ceiling``)."""

    def check(study: optuna.Study, trial: FrozenTrial) -> None:
        best = best_trial(records(study))
        sampled = set(plan.protocol.space.sampled())
        if not plan.protocol.stop_at_ceiling or best is None or best.number != trial.number:
            return
        ranked = rank_mod.stored_attr(study.user_attrs)
        why = rank_mod.space_reached(best.images_per_s or 0.0, ranked, plan.protocol.stop_at_ceiling)
        if why:  # every config of the space is bounded, and none could beat this one by more than the share
            study.set_user_attr("stopped", why)
            study.stop()
            return
        if (sampled & set(DATA_KNOBS) and sampled & set(COMPUTE_KNOBS)) or "gpus" in sampled:
            return  # either ceiling may rise with a knob the search varies (ceilings are one GPU's): never stop here
        view.waiting(f"trial {trial.number} is the best so far: its data and compute ceilings (found, or measured now: --stop-at-ceiling)")
        found = _ceilings_of(plan, study, best.config, view, inputs)
        why = None if found is None else ceilings_mod.reached(best.images_per_s or 0.0, found, plan.protocol.stop_at_ceiling, sampled)
        if found is not None:
            view.waiting("; ".join(found.lines(best.images_per_s)))
        if why:
            study.set_user_attr("stopped", why)
            study.stop()

    return check


def _guarded(objective: Callable[[optuna.Trial], float], target: int) -> Callable[[optuna.Trial], float]:
    """Prune a trial that would exceed the target: another worker took the last slot meanwhile."""
    import optuna
    from optuna.trial import TrialState

    def run_one(trial: optuna.Trial) -> float:
        others = [t for t in trial.study.get_trials(deepcopy=False) if t.number != trial.number]
        busy = sum(t.state in (TrialState.COMPLETE, TrialState.RUNNING) for t in others)
        if busy >= target:
            raise optuna.TrialPruned(f"the study already has {target} trials complete or running")
        return objective(trial)

    return run_one


def _sampler(plan: SearchPlan) -> optuna.samplers.BaseSampler:
    import optuna

    # constant_liar: trials still running on other workers count as pessimistic, so workers spread out
    return optuna.samplers.TPESampler(seed=plan.seed, constant_liar=True)


def _pruner(plan: SearchPlan) -> optuna.pruners.BasePruner:
    """Prune a trial clearly slower than the best, part-way through its window (:mod:`speedopt.study._pruner`)."""
    from speedopt.study._pruner import BestMargin

    return BestMargin(plan.protocol.prune_margin, max(3, plan.protocol.steps // 2))


def _create_or_load(plan: SearchPlan, storage: BaseStorage) -> tuple[optuna.Study, bool]:
    """The study, and whether this process created it (two searches started at once: one creates, one joins)."""
    import optuna

    if not plan.create or plan.study_name in study_names(storage):
        return optuna.load_study(study_name=plan.study_name, storage=storage, sampler=_sampler(plan), pruner=_pruner(plan)), False
    try:
        study = optuna.create_study(
            study_name=plan.study_name, storage=storage, sampler=_sampler(plan), pruner=_pruner(plan), direction="maximize"
        )
    except optuna.exceptions.DuplicatedStudyError:  # another process created it a moment ago
        return optuna.load_study(study_name=plan.study_name, storage=storage, sampler=_sampler(plan), pruner=_pruner(plan)), False
    return study, True


def _ready(study: optuna.Study) -> bool:
    """The study's creator finished setting it up: protocol attrs stored and the baseline enqueued."""
    return "space" in study.user_attrs and any(t.user_attrs.get("role") == "baseline" for t in study.get_trials(deepcopy=False))


#: How long a search waits for another process that is creating the same study to finish setting it up.
SETUP_WAIT_S = 10.0


def _wait_ready(study: optuna.Study) -> bool:
    deadline = time.monotonic() + SETUP_WAIT_S
    while not _ready(study):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _create(plan: SearchPlan, study: optuna.Study, storage: BaseStorage) -> list[str]:
    """First run of a study: attrs, baseline as trial 0, warm-start configs, reused probes."""
    notes = []
    study.set_metric_names([OBJECTIVE])
    for key, value in plan.protocol.to_attrs().items():
        study.set_user_attr(key, value)
    sampled = plan.protocol.space.sampled()
    baseline = {k: v for k, v in plan.protocol.baseline.to_dict().items() if k in sampled}
    study.enqueue_trial(baseline, user_attrs={"role": "baseline"})
    warm = plan.protocol.warm_start
    for config in warm.configs if warm else ():
        study.enqueue_trial(
            {k: v for k, v in config.knobs.to_dict().items() if k in sampled},
            user_attrs={"role": "warm-start", "source_trial": config.source_trial},
            skip_if_exists=True,
        )
    if plan.warm_cache:
        notes.append(f"{merge_cache(plan.warm_cache, storage)} probe result(s) copied from the warm-start source")
    return notes


def _hide_stored_password(study: optuna.Study) -> None:
    """A study made before warm-start sources were redacted keeps none of their password from now on."""
    warm = study.user_attrs.get("warm_start")
    if isinstance(warm, dict) and isinstance(warm.get("source"), str) and redact(warm["source"]) != warm["source"]:
        study.set_user_attr("warm_start", {**warm, "source": redact(warm["source"])})


def _open(plan: SearchPlan, storage: BaseStorage) -> tuple[optuna.Study, list[str]]:
    """Create, resume or join the study; the notes say what happened."""
    check_study_name(plan.study_name)
    study, created = _create_or_load(plan, storage)
    notes = list(plan.notes)
    if created:
        return study, notes + _create(plan, study, storage)
    ready = _wait_ready(study) if plan.create else True
    if plan.create:
        why = plan.protocol.conflict(study.user_attrs, plan.study_name)
        if why:
            raise UsageError(why)
        if not ready:  # its creator stopped half-way (interrupted between the study and its baseline)
            notes += _create(plan, study, storage)
        elif study.user_attrs.get("trials") != plan.protocol.trials:
            study.set_user_attr("trials", plan.protocol.trials)
    _hide_stored_password(study)
    recovered = recover_interrupted(study, storage)
    if recovered:
        notes.append(f"trial(s) {', '.join(map(str, recovered))} ended early (interrupted or killed): retried with the same knobs")
    return study, notes


def _complete(study: optuna.Study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _full(study: optuna.Study, target: int) -> bool:
    """The study holds its target: complete trials, or complete and running ones with nothing queued."""
    from optuna.trial import TrialState

    states = [t.state for t in study.get_trials(deepcopy=False)]
    complete, running = states.count(TrialState.COMPLETE), states.count(TrialState.RUNNING)
    return complete >= target or (complete + running >= target and TrialState.WAITING not in states)


def run(plan: SearchPlan, view: View | None = None) -> SearchOutcome:
    """Create (or resume, or join) the study and run trials until it holds its target of complete ones.

    Several processes may share one study: a trial that would exceed the target because another
    worker took the last slot is pruned before it measures, and each process stops starting trials
    once complete and running trials reach the target (Optuna's MaxTrialsCallback) or ``plan.timeout_s``
    passes. It then waits for the other workers' running trials: one whose worker died is failed once
    its heartbeat is stale and retried here, so no process leaves the study short while a trial can
    still be recovered. Ctrl-C fails the running trial and re-enqueues it for the next run.
    """
    view = view or QuietView()
    with storage_errors(plan.storage_url):
        storage = open_storage(plan.storage_url, Need.CREATE if plan.create else Need.WRITE)
        study, notes = _open(plan, storage)
        interrupts = Interrupts()
        view.start(plan, outcome(study), notes)
        try:
            with _warm(plan, view):
                _search(plan, study, storage, view, interrupts)
        except KeyboardInterrupt:
            retry_interrupted(study, storage, interrupts.trials)
            raise
        finally:
            view.stop()
        return outcome(study)


def _warm(plan: SearchPlan, view: View) -> contextlib.AbstractContextManager[object]:
    """The warm worker every job of this run forks from (``plan.warm``); nothing when off or when it cannot start."""
    p = plan.protocol
    if not plan.warm:
        return contextlib.nullcontext()
    env = engines.get(p.engine, yolov5_dir=p.yolov5_dir).environment(cache_dir())
    view.waiting("starting a warm worker: torch and the trainer imported once, every trial forked from it")
    return warm_worker(p.engine, p.yolov5_dir, env)


def _search(plan: SearchPlan, study: optuna.Study, storage: BaseStorage, view: View, interrupts: Interrupts) -> None:
    """The trials, then (for the study's creator) the finals, the ablation and the ends' ceilings."""
    p = plan.protocol
    inputs = _Inputs(study_dataset(plan), label_caches(plan, study, view, [p.data, *(c.yaml for c in p.copies)]))
    target = ProbeTarget(
        p.data, p.dataset.id, p.engine, p.yolov5_dir, p.device, tuple((c.imgsz, c.yaml) for c in p.copies),
        p.copies[0].format if p.copies else "",
    )
    judge = Judge(
        p.quality, target, p.baseline, storage,
        plan.study_name, on_wait=view.waiting, progress=view.trial_progress,
    )
    objective = interrupts.guard(_guarded(_objective(plan, view, judge, inputs), p.trials))
    if plan.create:
        _rank(plan, study, view, inputs)
    with interrupts.quiet():
        stop = _stop_at_ceiling(plan, view, inputs)

        def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
            note_mod.write(study, trial)  # the trial's one-screen summary in the dashboard
            stop(study, trial)

        _fill(study, storage, objective, plan, view, after_trial)
    if plan.create and (_complete(study) >= p.trials or study.user_attrs.get("stopped")):
        _finals(plan, study, view, inputs)
        _ablation(plan, study, view, inputs)
        _ends_ceilings(plan, study, view, inputs)
    elif plan.create and _full(study, p.trials):
        view.waiting("finals wait for trials still running on other workers: rerun this command when they are done")


def _rank(plan: SearchPlan, study: optuna.Study, view: View, inputs: _Inputs) -> None:
    """Once per study, before its first trial completes: bound every config by its ceilings and enqueue the
    highest first (:mod:`speedopt.study._rank`); the study keeps what it did (user attr ``ceiling_ranking``)."""
    from optuna.trial import TrialState

    p = plan.protocol
    if rank_mod.ATTR in study.user_attrs or _complete(study) or any(
        t.state == TrialState.PRUNED for t in study.get_trials(deepcopy=False)
    ):
        return
    grid = rank_mod.configs(p.space)
    jobs = len(rank_mod.representatives(grid)) if grid is not None else 0
    skip = (
        "the space is too large to enumerate its ceilings" if grid is None
        else "ceilings are measured on one GPU; this search varies gpus" if "gpus" in p.space.sampled()
        else f"the {p.engine} engine measures no ceilings" if not engines.get(p.engine, yolov5_dir=p.yolov5_dir).supports_ceilings
        else rank_mod.skip_mode(p.ceiling_rank, len(grid), jobs, p.trials)
    )
    if skip is not None or grid is None:
        study.set_user_attr(rank_mod.ATTR, rank_mod.Ranking(len(grid or ()), jobs, False, skip or "").to_dict())
        view.waiting(f"ceiling ranking: {skip}")
        return
    view.waiting(f"ceiling ranking: {jobs} ceiling jobs bound the space's {len(grid)} configs; measuring them before the trials")
    started = time.monotonic()
    for knobs in dict.fromkeys(rank_mod.representatives(grid).values()):
        _ceilings_of(plan, study, knobs, view, inputs)
    queued = [Knobs(**{**p.baseline.to_dict(), **(t.system_attrs.get("fixed_params") or t.params)}) for t in study.get_trials(deepcopy=False)]
    ranking = rank_mod.rank(grid, ceilings_mod.known(study), rank_mod.first_count(p.trials), skip=[p.baseline, *queued])
    ranking = dataclasses.replace(ranking, wall_s=time.monotonic() - started)
    sampled = p.space.sampled()
    for knobs, top in ranking.enqueued:
        study.enqueue_trial({k: v for k, v in knobs.to_dict().items() if k in sampled}, user_attrs={"role": "ceiling-rank", "bound": top})
    study.set_user_attr(rank_mod.ATTR, ranking.to_dict())
    view.waiting(f"ceiling ranking: {ranking.message} ({ranking.wall_s:.0f} s of ceiling jobs)")


def _longest_s(plan: SearchPlan) -> float:
    """The most one trial may run, probes included (three: the baseline's two seeds and its own), plus the grace."""
    p = plan.protocol
    return p.trial_timeout_s + (3 * p.quality.timeout_s if p.quality.probing else 0.0) + 2 * GRACE_S


def _fill(
    study: optuna.Study, storage: BaseStorage, objective: Callable[[optuna.Trial], float], plan: SearchPlan, view: View,
    after_trial: Callable[[optuna.Study, FrozenTrial], None] = lambda study, trial: None,
) -> None:
    """Run trials until the study holds its target, waiting out other workers' trials that may still be retried;
    ``after_trial`` runs after each trial is stored (an Optuna callback)."""
    import optuna
    from optuna.trial import TrialState

    target = plan.protocol.trials
    deadline = None if plan.timeout_s is None else time.monotonic() + plan.timeout_s
    if not _full(study, target) and study.user_attrs.get("stopped"):
        study.set_user_attr("stopped", None)  # a resumed search (more trials asked) samples again
    said: list[int] = []
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        if not _full(study, target):
            study.optimize(
                objective,
                timeout=left,
                callbacks=[optuna.study.MaxTrialsCallback(target, states=(TrialState.COMPLETE, TrialState.RUNNING)), after_trial],
                gc_after_trial=False,
            )
        if _complete(study) >= target or study.user_attrs.get("stopped"):
            return
        if deadline is not None and time.monotonic() >= deadline:
            return
        running = awaited(study, storage, _longest_s(plan))
        if not running and _full(study, target):
            return  # trials no process here can judge (another host, no heartbeat): they are theirs to finish
        if running and running != said:
            view.waiting(
                f"waiting for trial(s) {', '.join(map(str, running))} on other workers: the study needs {target} complete; "
                f"a trial whose worker died is retried here after its {GRACE_S} s heartbeat grace"
            )
            said = running
        time.sleep(HEARTBEAT_S)
        retried = recover_stale(study, storage)
        if retried:
            view.waiting(f"trial(s) {', '.join(map(str, retried))} stopped beating (worker gone): failed and retried here")


def _ends_ceilings(plan: SearchPlan, study: optuna.Study, view: View, inputs: _Inputs) -> None:
    """The ceilings of the baseline's and the recommended config, for the report (found, or measured now)."""
    done = records(study)
    base = baseline_trial(done)
    finals = finals_mod.stored(study)
    choice = finals.decision().choice if finals is not None and finals.complete else None
    pick = next((r for r in done if r.number == choice), None) if choice is not None else best_trial(done)
    ends = {r.number: r for r in (base, pick) if r is not None and r.result.ok}
    if not ends:
        return
    view.waiting("the data and compute ceilings of the baseline and the recommendation (found, or measured now)")
    for record in ends.values():
        _ceilings_of(plan, study, record.config, view, inputs)
    ceilings_mod.record_ends(study, base.number if base else None, pick.number if pick else None)


def _finals(plan: SearchPlan, study: optuna.Study, view: View, inputs: _Inputs) -> None:
    """Re-measure the leaders beside the baseline in interleaved rounds (see :mod:`speedopt.study._finals`)."""
    p = plan.protocol
    finals = finals_mod.run(
        study, records(study), p.finalists, p.repeats, lambda knobs: _measure(plan, _prepare(plan, knobs, inputs), view, inputs),
        p.min_gain, begin=view.finals_started, started=view.repeat_started, finished=view.repeat_finished,
    )
    if finals is not None:
        note_mod.write_finals(study, finals)


def _ablation(plan: SearchPlan, study: optuna.Study, view: View, inputs: _Inputs) -> None:
    """Measure which change bought what on the path to the recommendation (see :mod:`speedopt.study._ablation`)."""
    p = plan.protocol
    if study.user_attrs.get("ablate", True) != p.ablate:  # this run's choice, for the report
        study.set_user_attr("ablate", p.ablate)
    if not p.ablate:
        return

    def unrunnable(knobs: Knobs) -> str | None:
        request = _prepare(plan, knobs, inputs)
        return request.message if isinstance(request, TrialResult) else request.infeasible

    ablation_mod.run(
        study, records(study), finals_mod.stored(study), lambda knobs: _measure(plan, _prepare(plan, knobs, inputs), view, inputs),
        unrunnable, p.min_gain, begin=view.ablation_started, started=view.ablation_step_started, finished=view.ablation_step_finished,
    )
