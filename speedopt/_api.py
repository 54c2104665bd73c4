"""The public Python API: what the CLI calls, for notebooks and pipelines that drive speedopt directly.

Each function returns typed records (frozen dataclasses) and raises
:class:`~speedopt.errors.UsageError` with one line for bad input; nothing prints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from speedopt import defaults, doctor, measure, reporting, study
from speedopt.engines import EngineName
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.reporting import Recommendation, Written
from speedopt.search import SearchConfig, View, make_copies, plan, plan_for_worker
from speedopt.search import run as run_search
from speedopt.study import SearchOutcome


def trial(
    data: str,
    knobs: Knobs | None = None,
    *,
    device: str | None = None,
    engine: EngineName = "ultralytics",
    yolov5_dir: str | None = None,
    steps: int = defaults.STEPS,
    warmup: int = defaults.WARMUP,
    max_steps: int | None = None,
    timeout_s: float = defaults.TRIAL_TIMEOUT_S,
    ram_limit_gb: float | None = None,
    progress: Callable[[measure.TrialProgress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> TrialResult:
    """Measure one short training run of the real trainer with ``knobs`` (default: the trainer's defaults).

    ``on_note`` hears each adjustment to the request before it runs (AMP off on a CPU, a subset of
    the images); ``progress`` gets the running trial's phase; ``on_wait`` hears that another process
    holds the host measurement lock (a search's trial: a trial never measures beside one). The
    result's ``status`` says how it ended. The measurement options are the fields of :class:`~speedopt.measure.TrialOptions`.
    """
    options = measure.TrialOptions(
        steps=steps, max_steps=max_steps, warmup=warmup, timeout_s=timeout_s, device=device, engine=engine,
        yolov5_dir=yolov5_dir, ram_limit_gb=ram_limit_gb,
    )
    request = measure.make_request(data, knobs or Knobs(), options)
    if on_note:
        for note in request.notes:
            on_note(note)
    if (request.knobs.gpus > 1 or request.images < request.images_total) and not request.infeasible:
        request = _labels_first(request, progress, on_wait, on_note)
    return measure.run_trial(request, progress=progress, on_wait=on_wait)


def ceilings(
    data: str,
    knobs: Knobs | None = None,
    *,
    device: str | None = None,
    engine: EngineName = "ultralytics",
    yolov5_dir: str | None = None,
    steps: int = defaults.STEPS,
    warmup: int = defaults.WARMUP,
    max_steps: int | None = None,
    timeout_s: float = defaults.TRIAL_TIMEOUT_S,
    ram_limit_gb: float | None = None,
    with_trial: bool = False,
    progress: Callable[[measure.TrialProgress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> tuple[measure.Ceilings, TrialResult | None]:
    """Measure the data and compute ceilings of ``knobs`` (see :mod:`speedopt.measure._ceilings`): two short
    jobs of the real trainer; with ``with_trial``, the full trial too, last, so its figure can be set
    against min(ceilings). ``progress`` hears each job's phases, its ``job`` set (data, compute, train)."""
    knobs = knobs or Knobs()
    options = measure.TrialOptions(
        steps=steps, max_steps=max_steps, warmup=warmup, timeout_s=timeout_s, device=device, engine=engine,
        yolov5_dir=yolov5_dir, ram_limit_gb=ram_limit_gb,
    )
    if not options.engine_spec.engine.supports_ceilings:
        raise UsageError(f"the {engine} engine cannot measure ceilings; use --engine ultralytics or yolov5")
    if knobs.gpus > 1:
        raise UsageError(f"ceilings are measured on one GPU (gpus={knobs.gpus} asked): give --gpus 1")
    notes: set[str] = set()

    def prepare(asked: Knobs) -> measure.TrialRequest | TrialResult:
        request = measure.make_request(data, asked, options)
        for note in request.notes:
            if on_note and note not in notes:
                on_note(note)
                notes.add(note)
        return request

    def run(request: measure.TrialRequest) -> TrialResult:
        tagged = None if progress is None else (lambda update: progress(dataclasses.replace(update, job=request.mode)))
        return measure.run_trial(request, progress=tagged, on_wait=on_wait)

    found = measure.measure_ceilings(knobs, prepare, run)
    trial_result = None
    if with_trial:
        request = prepare(knobs)
        assert isinstance(request, measure.TrialRequest)
        trial_result = run(request)
    return found, trial_result


def _labels_first(
    request: measure.TrialRequest,
    progress: Callable[[measure.TrialProgress], None] | None,
    on_wait: Callable[[str], None] | None,
    on_note: Callable[[str], None] | None,
) -> measure.TrialRequest:
    """The trainer's label cache of the full splits, built (or found valid) before the trial, as a search builds it
    before trial 0: a subset is then drawn from the images the trainer's label check keeps, and a DDP trial's ranks do
    not wait in a collective while rank 0 scans (they time out on a large set)."""
    if not request.engine_spec.engine.supports_label_cache:
        return request
    caches = measure.build_label_caches(
        [request.data_yaml], request.engine_spec, request.images_total, "speedopt trial", progress, on_wait
    )
    if on_note:
        on_note(caches.summary())
    return dataclasses.replace(request, label_caches=caches.for_data(request.data_yaml))



def search(
    config: SearchConfig | str,
    *,
    view: View | None = None,
    on_prepare: Callable[[int, int, int], None] | None = None,
    **options: Any,
) -> SearchOutcome:
    """Run (or resume) a search: ``search("data.yaml", trials=10)`` or ``search(SearchConfig(...))``.

    ``options`` are the fields of :class:`~speedopt.search.SearchConfig`; ``view`` hears the search's
    progress (default: silent). The only command that creates a storage where none exists. Ctrl-C
    (``KeyboardInterrupt``) fails the running trial and re-enqueues it: the same call resumes.
    With ``prepare`` (a copy format) the data knob's copies are made first; ``on_prepare(imgsz, done,
    total)`` hears their progress.
    """
    if isinstance(config, str):
        config = SearchConfig(data=config, **options)
    elif options:
        raise TypeError("give either a SearchConfig or keyword options, not both")
    doctor.refuse_fatal(config.device)  # a GPU that is not there, or one torch cannot use: before any storage
    planned = plan(config)
    if planned.to_prepare and planned.dataset is not None and planned.prepare_format:
        started = time.monotonic()
        make_copies(planned.dataset, planned.to_prepare, planned.prepare_format, on_prepare)
        took = time.monotonic() - started
        planned = dataclasses.replace(plan(config, planned.dataset), prepare_s=took)  # finds the copies now, records them
    return run_search(planned, view)


def worker(storage: str, name: str, *, view: View | None = None) -> SearchOutcome:
    """Join an existing study (``speedopt worker``) and run its trials until it holds its target.

    The storage and the study must exist (a worker never creates either); the worker leaves only when
    the study holds its target or no trial it could still recover is running elsewhere.
    """
    with study.storage_errors(storage):
        return run_search(plan_for_worker(storage, name), view)


def report(
    name: str | None = None,
    *,
    storage: str | None = None,
    epochs: int = defaults.EPOCHS,
    out_dir: str | Path = defaults.REPORTS_DIR,
    measure_validation: bool = True,
) -> Written:
    """Write ``<out_dir>/<study>.md`` with its figures and ``<study>.csv`` (``name``: the only study if None).

    ``measure_validation`` times one validation pass per projected config (a child job, cached in the study).
    """
    if epochs < 1:
        raise UsageError(f"--epochs must be at least 1, got {epochs}")
    with study.storage_errors(storage):
        found = study.find_study(storage, name)
        return reporting.build(found, epochs, Path(out_dir), measure_validation, artifacts=study.artifact_dir(storage))


def best(name: str | None = None, *, storage: str | None = None) -> Recommendation:
    """The recommended config of a study, with its commands; UsageError while there is none."""
    with study.storage_errors(storage):
        found = study.find_study(storage, name)
        rec = reporting.recommend(found)
    if rec is None:
        raise UsageError(f"study {found.study_name!r} has no feasible trial measured ok yet")
    return rec


def verify(
    name: str | None = None,
    *,
    storage: str | None = None,
    epochs: int = 1,
    fraction: float | None = None,
    timeout_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    on_wait: Callable[[str], None] | None = None,
    yolov5_dir: str | None = None,
) -> reporting.Verification:
    """Run the study's recommended command for real (``epochs`` epochs, optionally on a leading
    ``fraction`` of the train set) and compare its epoch time and images/s with the prediction.

    Stored in the study (user attr ``verify``); the result's ``status`` says how the run ended.
    ``progress`` hears each epoch as the trainer records it; ``on_wait`` that the host lock is busy. ``yolov5_dir``: your
    yolov5 checkout, for a classic study (an imported one names none).
    """
    reporting.check_verify_options(epochs, fraction, timeout_s)  # bad input fails before the storage is opened
    with study.storage_errors(storage):
        return reporting.verify(
            study.find_study(storage, name), epochs=epochs, fraction=fraction, timeout_s=timeout_s, note=progress,
            on_wait=on_wait, checkout=yolov5_dir,
        )
