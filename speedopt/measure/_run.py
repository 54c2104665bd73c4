"""Measure one prepared trial: through the job runner, leaving the user's dataset as it was.

The trainer reads an existing ``.npy`` beside an image in *every* cache mode, so disk-cache files a
``cache=disk`` trial adds would speed up later trials unfairly: they are removed afterwards (files the
user already had are never touched). They are listed in a manifest outside the dataset before the
trainer can write them, so a trial killed before its clean-up has them removed by the next start's
sweep (:mod:`speedopt.isolation._leftovers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from speedopt.data import Dataset, load
from speedopt.isolation import measuring, npy_manifest, recorded_npy, sweep
from speedopt.knobs import Knobs
from speedopt.measure._jobs import JobOutcome
from speedopt.measure._progress import Progress
from speedopt.measure._request import TrialRequest
from speedopt.measure._result import TrialResult
from speedopt.measure._runner import run_job
from speedopt.status import Status


def run_trial(
    request: TrialRequest,
    progress: Progress | None = None,
    on_wait: Callable[[str], None] | None = None,
    owner: str = "speedopt trial",
    dataset: Dataset | None = None,
) -> TrialResult:
    """Measure the request in its own process under the host lock; always returns a result.

    ``dataset``: the request's data.yaml already loaded (a study's), so a ``cache=disk`` trial does not
    list the image folders again to know which ``.npy`` files it may add.
    """
    if request.infeasible:
        return unmeasured(request, Status.INFEASIBLE, request.infeasible)
    images = _images(request, dataset) if request.knobs.cache == "disk" else []
    # The host lock spans the snapshot and the clean-up too: no other trial of this user writes .npy files meanwhile.
    with measuring(owner, on_wait=on_wait), no_new_npy(images):
        outcome = run_job(request, owner, progress, on_wait)
    return _result(request, outcome)


@contextlib.contextmanager
def no_new_npy(images: Sequence[Path]) -> Iterator[None]:
    """Remove the disk-cache files (``.npy`` beside ``images``) that the body adds; the user's own stay.

    First the sweep removes what dead trials left; a file another trial's manifest lists is a trial's,
    not the user's. What the body may add is recorded (:func:`npy_manifest`) before it runs.
    """
    sweep()
    trials = recorded_npy()
    npys = [p.with_suffix(".npy") for p in images]
    before = {p for p in npys if p not in trials and p.exists()}
    ours = [p for p in npys if p not in before]
    with npy_manifest(ours):
        try:
            yield
        finally:
            for npy in ours:
                npy.unlink(missing_ok=True)


def unmeasured(request: TrialRequest, status: Status, message: str) -> TrialResult:
    """The result of a trial that never ran (rejected before measuring)."""
    return TrialResult(
        status=status,
        message=message,
        config=request.knobs,
        requested=request.requested,
        device=request.device,
        engine=request.engine,
        engine_version=request.engine_spec.engine.version(),
        notes=request.notes,
        steps=request.steps,
        warmup=request.warmup,
        max_steps=request.max_steps,
        images_total=request.images_trained or request.images_total,  # what a full epoch trains on
    )


def _result(request: TrialRequest, outcome: JobOutcome) -> TrialResult:
    figures: dict[str, Any] = dict(outcome.figures)
    config = Knobs.from_dict(figures.pop("config")) if "config" in figures else request.knobs
    notes = request.notes + tuple(figures.pop("notes", ()))
    figures["step_s"] = tuple(figures.get("step_s", ()))  # JSON gave a list; the record keeps tuples
    figures["warmup_s"] = tuple(figures.get("warmup_s", ()))
    figures["rank_images_per_s"] = tuple(figures.get("rank_images_per_s", ()))
    base = unmeasured(request, outcome.status, outcome.message)
    return dataclasses.replace(
        base,
        **figures,
        config=config,
        notes=notes,
        wall_s=outcome.wall_s,
        network_blocked=outcome.network_blocked,
        measure_started_at=outcome.started_at,
        measure_ended_at=outcome.ended_at,
        log_tail="" if outcome.ok else outcome.log_tail,
    )


def _images(request: TrialRequest, dataset: Dataset | None) -> list[Path]:
    """The images this trial uses (the trainer caches the val split too)."""
    ds = dataset if dataset is not None and str(dataset.yaml_path) == request.data_yaml else load(request.data_yaml)
    return [*ds.train_images[: request.images], *ds.val_images]

