"""Measuring: one trial, probe or validation pass, isolated in its own process.

:func:`make_request` checks a trial (its :class:`TrialOptions` and knobs) and decides how it runs here;
:func:`run_trial` measures it through :func:`run_job`, the one job runner (host lock, child process,
timeout, status), which hands on the child's :class:`TrialProgress`. The child side is
:mod:`speedopt.measure._child`; the step clock and telemetry run inside it. :func:`build_label_caches`
builds the trainer's label caches once per study, so trials take their labels from them.
"""

from speedopt.measure._ceilings import MOSAIC_OFF, Ceiling, Ceilings, key_of, measure_ceilings, measure_mosaic_off
from speedopt.measure._checks import adjust_to_device, positive, ram_available, ram_cache_need
from speedopt.measure._jobs import JobOutcome, ProbeJob, ValidateJob, ValidationTime
from speedopt.measure._labels import LabelCaches, build_label_caches
from speedopt.measure._options import TrialOptions
from speedopt.measure._progress import TrialProgress
from speedopt.measure._request import TrialRequest, make_request
from speedopt.measure._result import TrialResult
from speedopt.measure._run import no_new_npy, run_trial
from speedopt.measure._runner import run_job
from speedopt.measure._warm import warm_worker

__all__ = [
    "Ceiling",
    "Ceilings",
    "key_of",
    "measure_ceilings",
    "MOSAIC_OFF",
    "measure_mosaic_off",
    "JobOutcome",
    "LabelCaches",
    "ProbeJob",
    "TrialOptions",
    "TrialProgress",
    "TrialRequest",
    "TrialResult",
    "ValidateJob",
    "ValidationTime",
    "adjust_to_device",
    "build_label_caches",
    "positive",
    "make_request",
    "ram_available",
    "ram_cache_need",
    "run_job",
    "no_new_npy",
    "run_trial",
    "warm_worker",
]
