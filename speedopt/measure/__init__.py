"""Measuring: one trial, probe or validation pass, isolated in its own process.

:func:`prepare` checks a trial and decides how it runs here; :func:`run_trial` measures it through
:func:`run_job`, the one job runner (host lock, child process, timeout, status). The child side is
:mod:`speedopt.measure._child`; the step clock and telemetry run inside it. :func:`build_label_caches`
builds the trainer's label caches once per study, so trials take their labels from them.
"""

from speedopt.measure._ceilings import ATTR as CEILINGS_ATTR
from speedopt.measure._ceilings import Ceiling, Ceilings, ceiling_knobs, key_of, measure_ceilings, stored_ceilings
from speedopt.measure._checks import (
    adjust_to_device,
    check_gpus,
    check_protocol,
    checkout_path,
    disk_cache_refusal,
    installed_engine,
    positive,
    ram_available,
    ram_cache_need,
    ram_cache_refusal,
    ram_limit_bytes,
)
from speedopt.measure._clock import StepClock, StepStats
from speedopt.measure._hostlock import check_lock, lock_path, measuring
from speedopt.measure._jobs import Job, JobOutcome, LabelsJob, ProbeJob, ValidateJob, ValidationTime
from speedopt.measure._labels import ATTR as LABELS_ATTR
from speedopt.measure._labels import MULTI_GPU_NOTE, LabelCaches, build_label_caches, labels_timeout_s
from speedopt.measure._leftovers import private_folder, remove_private_folder, state_dir, sweep
from speedopt.measure._request import TrialRequest, prepare
from speedopt.measure._result import TrialResult
from speedopt.measure._run import no_new_npy, run_trial, unmeasured
from speedopt.measure._runner import Progress, phase_text, run_job
from speedopt.measure._telemetry import Sampler
from speedopt.measure._warm import WarmWorker, cold, warm_worker

__all__ = [
    "CEILINGS_ATTR",
    "Ceiling",
    "Ceilings",
    "ceiling_knobs",
    "key_of",
    "measure_ceilings",
    "stored_ceilings",
    "Job",
    "JobOutcome",
    "LABELS_ATTR",
    "LabelCaches",
    "LabelsJob",
    "MULTI_GPU_NOTE",
    "ProbeJob",
    "Progress",
    "Sampler",
    "StepClock",
    "StepStats",
    "TrialRequest",
    "TrialResult",
    "ValidateJob",
    "ValidationTime",
    "adjust_to_device",
    "check_gpus",
    "build_label_caches",
    "check_lock",
    "check_protocol",
    "checkout_path",
    "disk_cache_refusal",
    "installed_engine",
    "labels_timeout_s",
    "lock_path",
    "phase_text",
    "measuring",
    "positive",
    "prepare",
    "private_folder",
    "ram_available",
    "ram_cache_need",
    "ram_cache_refusal",
    "ram_limit_bytes",
    "remove_private_folder",
    "run_job",
    "no_new_npy",
    "run_trial",
    "state_dir",
    "sweep",
    "unmeasured",
    "WarmWorker",
    "cold",
    "warm_worker",
]
