"""The trial pipeline: one Optuna trial from the sampled knobs to its stored measurement and verdict.

A trial asks the sampler for its knobs (the baseline's trial runs the baseline), checks the request,
skips a config measured before or one whose ceilings cannot reach the best, predicts its memory, measures
it (its running images/s feeding the pruner), judges its accuracy and stores it all in the trial's attrs.
Every trial ends in a closed status (ok, oom, timeout, infeasible, error): a non-ok trial is recorded with
its status and message, scores 0 images/s and violates the ``measured`` constraint, so the sampler learns
to avoid it and it is never the best.

Once per study, before its first trial, the trainer's label caches of the data it trains on are built
(:func:`label_caches`, kept in the study's user attrs), so no trial scans labels; the dataset is listed
once per run (the plan's listing) and handed to every trial's request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from speedopt.data import Dataset, load
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import LabelCaches, TrialProgress, TrialRequest, TrialResult, make_request
from speedopt.quality import Judge, not_measured
from speedopt.search import _memory as memory_mod
from speedopt.search._claim import worker_id
from speedopt.search._plan import SearchPlan
from speedopt.search._runner import Runner
from speedopt.search._view import View
from speedopt.status import Status
from speedopt.study import Clock, Space, schema

if TYPE_CHECKING:
    import optuna


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


@dataclass(frozen=True)
class Inputs:
    """What every trial of one run shares: the dataset listed once, the study's label caches, and what runs its jobs."""

    dataset: Dataset
    labels: LabelCaches = field(default_factory=LabelCaches)
    copies: dict[str, Dataset] = field(default_factory=dict)  # prepared copies' listings, read on first use
    runner: Runner = field(default_factory=Runner)

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


def label_caches(plan: SearchPlan, study: optuna.Study, view: View, yamls: Sequence[str], runner: Runner | None = None) -> LabelCaches:
    """The trainer's label caches of ``yamls`` (every data.yaml the study may train on), built once per
    study before its first trial and kept in its user attrs (:func:`~speedopt.study.schema.write_labels`).

    A study that holds the attr (resumed, or joined after its creator built them) builds nothing, nor
    does an engine without the hook; a failed build is a note and its trials scan their labels. ``runner`` builds
    them (:meth:`Runner.label_caches`).
    """
    stored = schema.read_labels(study)
    if stored is not None:
        return stored
    p = plan.protocol
    if not p.engine_spec.engine.supports_label_cache:
        return LabelCaches()
    images = p.dataset.train_images + p.dataset.val_images
    what = f"{images} images (train and val)" + (f" in each of {len(yamls)} data.yamls (the dataset and its prepared copies)" if len(yamls) > 1 else "")
    view.note(f"building the trainer's label cache once for {what}, before the first trial")
    caches = (runner or Runner()).label_caches(
        yamls, p.engine_spec, images, plan.study_name, progress=view.trial_progress, on_wait=view.note
    )
    schema.write_labels(study, caches)
    view.note(caches.summary())
    return caches


def request_for(plan: SearchPlan, knobs: Knobs, inputs: Inputs) -> TrialRequest | TrialResult:
    """The checked request for ``knobs``, or an error result (e.g. the dataset vanished mid-search)."""
    p = plan.protocol
    try:
        yaml = p.data_yaml(knobs)  # data=resized: the prepared copy at the knobs' imgsz
        return make_request(inputs.listing(yaml), knobs, plan.trial, seed=plan.seed, label_caches=inputs.labels.for_data(yaml))
    except UsageError as exc:  # record, don't crash
        return TrialResult(Status.ERROR, str(exc), knobs, knobs, p.device, p.engine)


def measure(
    plan: SearchPlan, request: TrialRequest | TrialResult, view: View, inputs: Inputs, trial: optuna.Trial | None = None,
    live: optuna.Trial | None = None,
) -> TrialResult:
    """Measure ``request``; with ``trial``, its running images/s goes to Optuna's pruner as it comes, and a
    pruned trial's child is killed at once (``optuna.TrialPruned`` out of here, every process of it gone); the job
    runs with ``inputs.runner``;
    with ``live``, that trial's user attr ``phase`` follows the job's phase (the dashboard shows it while it runs)."""
    if isinstance(request, TrialResult):
        return request
    progress: Callable[[TrialProgress], None] = view.trial_progress
    if trial is not None:
        from speedopt.search._prune import reporting

        progress = reporting(trial, plan, view.trial_progress)
    if live is not None:
        progress = _phases(live, progress)
    return inputs.runner.trial(
        request, progress=progress, on_wait=view.note, owner=plan.study_name, dataset=inputs.listing(request.data_yaml),
    )


def _phases(trial: optuna.Trial, then: Callable[[TrialProgress], None]) -> Callable[[TrialProgress], None]:
    """A progress callback that keeps the trial's user attr ``phase`` (one storage write per change of phase)."""
    last = {"phase": ""}

    def progress(update: TrialProgress) -> None:
        phase = update.phase
        if phase and phase != last["phase"]:
            last["phase"] = phase
            trial.set_user_attr(schema.PHASE, phase)
        then(update)

    return progress


def objective(plan: SearchPlan, view: View, judge: Judge, inputs: Inputs, clock: Clock | None = None) -> Callable[[optuna.Trial], float]:
    """The study's objective: one trial measured, judged and stored (its images/s, or 0 when not ok); its
    memory fits and quality probes timed apart on ``clock`` (the study's bill)."""
    clock = clock or Clock()
    from speedopt.search._budget import baseline_speed, best_feasible
    from speedopt.search._skip import Skips

    skips = Skips(plan)

    def run_one(trial: optuna.Trial) -> float:
        import optuna

        trial.set_user_attr(schema.WORKER, worker_id())
        baseline = trial.user_attrs.get(schema.ROLE) == "baseline"
        suggested = suggest(trial, plan.protocol.space)  # the baseline's enqueued values too: the sampler learns from it
        knobs = plan.protocol.baseline if baseline else suggested

        request = request_for(plan, knobs, inputs)
        skips.check(trial, knobs, request, baseline)
        view.trial_started(trial.number, knobs)
        prediction = None
        if isinstance(request, TrialRequest):
            with clock.stage("memory fits"):
                request, prediction = memory_mod.predicted(
                    trial.study, plan.protocol, request, inputs.listing(request.data_yaml), view.note, inputs.runner.trial
                )
        try:
            result = memory_mod.record(measure(plan, request, view, inputs, None if baseline else trial, live=trial), prediction)
        except optuna.TrialPruned as exc:
            trial.set_user_attr(schema.PRUNED_CONFIG, knobs.to_dict())
            view.trial_pruned(trial.number, str(exc))
            raise
        stored = result.to_dict()
        stored["log_tail"] = stored["log_tail"][-2000:]
        schema.write_measurement(trial, stored)
        if result.ok:
            trial.set_user_attr(schema.PHASE, "accuracy")  # quality probes, if its signature needs any
            with clock.stage("probes"):
                verdict = judge.verdict(
                    result.config, result.images_per_s or 0.0, best_feasible(trial.study), baseline_speed(trial.study)
                )
        else:
            verdict = not_measured(knobs, result.status)
        schema.write_verdict(trial, verdict.attrs())
        schema.write_constraints(trial, 0.0 if result.ok else 1.0, verdict.constraint())
        trial.set_user_attr(schema.PHASE, "done")
        view.trial_finished(trial.number, result, baseline=baseline, verdict=verdict)
        return float(result.images_per_s or 0.0) if result.ok else 0.0

    return run_one
