"""Predicting a trial's peak memory before it runs, in the search loop (see :mod:`speedopt.search._memory_model`).

The study keeps one fit per memory signature in its user attrs (:func:`~speedopt.study.schema.write_memory_fits`),
so later trials, resumed runs and other workers reuse it; a signature met for the first time costs two short trials
of the real trainer (not study trials, never compiled), and only where memory could bind (:func:`could_bind`): on a
GPU, where the search varies batch or a bound with no trial comes near the GPU's memory. Where no fit runs, or one
cannot be measured (a fitting trial ended oom or error), the trial runs unpredicted, and its own status says what
happened (oom).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt.data import Dataset
from speedopt.measure import TrialOptions, TrialRequest, TrialResult, make_request, ram_available, run_trial
from speedopt.search import _memory_model as memory
from speedopt.study import schema

if TYPE_CHECKING:
    import optuna

    from speedopt.study import StudyProtocol


RunTrial = Callable[..., TrialResult]  # run_trial's signature (request, progress, on_wait, owner, dataset)


def wanted(request: TrialRequest) -> bool:
    """Whether the trial's memory is predicted: every trial on a GPU; on the CPU, cache=ram trials."""
    return memory.kind_of(request.device) == "gpu" or request.knobs.cache == "ram"


#: On the CPU, what a trainer needs besides the RAM cache (torch, the model, the loader's batches): a generous bound.
TRAINER_RAM_MB = 4096.0


def could_bind(p: StudyProtocol, request: TrialRequest, listing: Dataset) -> bool:
    """Whether memory could stop this config, so a fit is worth its two short trials.

    On a GPU: when the search varies batch (the fit says which batches fit), or when the bound with no trial
    (:func:`~speedopt.search._memory_model.bound`) reaches :data:`~speedopt.search._memory_model.LIMIT` of the GPU's
    memory (an H200's 139 GB at a fixed batch: no fit; a model that is no built-in scale: a fit). On the CPU: when twice
    the RAM cache's estimate plus :data:`TRAINER_RAM_MB` reaches that share of the RAM there is (a demo's cache of a few
    MB on a machine with GBs free cannot bind: no fit)."""
    if memory.kind_of(request.device) == "gpu":
        if "batch" in p.space.sampled():
            return True
        bound, available = memory.bound(request.knobs), _available_mb(p, "gpu")
        return bound is None or available is None or bound.peak_mb >= memory.LIMIT * available
    need_mb = 2 * listing.ram_cache_bytes(request.knobs.imgsz) / 2**20 + TRAINER_RAM_MB  # the full split: the real run caches it all
    available = _available_mb(p, "ram")
    return available is None or need_mb >= memory.LIMIT * available


def stored_fits(study: optuna.Study) -> dict[str, memory.MemoryFit]:
    return {key: memory.MemoryFit.from_dict(value) for key, value in schema.read_memory_fits(study).items()}


def _available_mb(p: StudyProtocol, kind: str) -> float | None:
    if kind == "gpu":
        return float(p.machine.gpus[0].memory_mb) if p.machine.gpus else None
    return ram_available(p.ram_limit_bytes) / 2**20


def _fit(
    p: StudyProtocol, request: TrialRequest, listing: Dataset, owner: str, say: Callable[[str], None], run: RunTrial
) -> memory.MemoryFit | None:
    """Two short trials at the fit's batches; None when either did not measure a peak."""
    key, peaks = memory.memory_key(request.knobs, request.device), []
    batches = memory.fit_batches(request.device)
    say(f"memory: fitting {key} at batch {batches[0]} and {batches[1]} (two short trials)")
    options = TrialOptions(
        steps=memory.FIT_STEPS, max_steps=memory.FIT_STEPS, warmup=1, timeout_s=p.trial_timeout_s, device=p.device,
        **p.engine_spec.record(),
    )
    for batch in batches:
        knobs = memory.fit_knobs(request.knobs, request.device, batch)
        fit_request = make_request(listing, knobs, options, label_caches=request.label_caches)
        result = run(fit_request, owner=owner, dataset=listing)
        peak = result.peak_gpu_mem_mb if memory.kind_of(request.device) == "gpu" else result.peak_ram_mb
        if not result.ok or not peak:
            say(f"memory: no fit for {key}: the batch {batch} trial ended {result.status.value} ({result.message})")
            return None
        peaks.append(float(peak))
    return memory.MemoryFit(key, memory.kind_of(request.device), batches, (peaks[0], peaks[1]))


def predicted(
    study: optuna.Study, p: StudyProtocol, request: TrialRequest, listing: Dataset, say: Callable[[str], None],
    run: RunTrial = run_trial,
) -> tuple[TrialRequest | TrialResult, memory.Prediction | None]:
    """The request (or its infeasible result, when its predicted peak is over the limit) and its prediction, which
    goes with the trial's result (:func:`record`); no prediction where none is wanted or no fit could be measured.
    A fit's two short trials run with ``run`` (a search's :meth:`~speedopt.search.Runner.trial`)."""
    if not wanted(request) or request.infeasible:
        return request, None
    fits = stored_fits(study)
    key = memory.memory_key(request.knobs, request.device)
    if key not in fits and not could_bind(p, request, listing):
        return request, None
    if key not in fits:
        fit = _fit(p, request, listing, study.study_name, say, run)
        if fit is None:
            return request, None
        fits[key] = fit
        schema.write_memory_fits(study, {k: f.to_dict() for k, f in fits.items()})
    prediction = memory.predict(fits[key], request.knobs, listing, request.images)
    available = _available_mb(p, prediction.kind)
    why = memory.refusal(prediction, available) if available else None
    if why:
        infeasible = run_trial(dataclasses.replace(request, infeasible=why))  # runs nothing: says why
        return record(infeasible, prediction), prediction
    return request, prediction


def record(result: TrialResult, prediction: memory.Prediction | None) -> TrialResult:
    """The result with its prediction (kept on each measured trial: the report shows predicted vs measured)."""
    if prediction is None:
        return result
    return dataclasses.replace(
        result, predicted_peak_mb=prediction.peak_mb, predicted_kind=prediction.kind, predicted_basis=prediction.basis
    )
