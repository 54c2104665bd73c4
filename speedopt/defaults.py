"""Every default of speedopt, defined once: the CLI, the Python API and the study records read them here.

The trainer's own defaults (model, imgsz, batch, workers) live on :class:`speedopt.knobs.Knobs`.
"""

from __future__ import annotations

#: Measured batches per trial (the minimum: the window grows until the 90% confidence interval of the
#: mean step time is within +/-5%, up to MAX_STEPS_FACTOR x STEPS), and warm-up batches before them.
STEPS = 20
MAX_STEPS_FACTOR = 3
WARMUP = 5
#: After the search: the top FINALISTS feasible configs and the baseline re-measured in REPEATS interleaved rounds.
FINALISTS = 3
REPEATS = 3
#: A gain is claimed only when every finals round shows at least this much (differences on a noisy
#: machine move between sessions by a few percent: see speedopt.speedup).
MIN_GAIN = 0.05
STOP_AT_CEILING = 0.95  # a search stops once its best config reaches this share of min(data, compute ceilings)
PRUNE_MARGIN = 0.5  # a trial running below (1 - this) x the best feasible images/s after a few measured steps is pruned

#: Seconds before one speed trial is killed (setup, warm-up and measured steps together).
TRIAL_TIMEOUT_S = 900.0
#: Seconds before one quality probe (train for the budget, then validate) is killed.
PROBE_TIMEOUT_S = 3600.0
#: Seconds before one timed validation pass (for the report's projection) is killed.
VALIDATION_TIMEOUT_S = 1800.0
#: Epochs of the user's full run: the trainer's default; sets the LR schedule and the projection.
EPOCHS = 100
#: Complete trials a search aims for, baseline included.
TRIALS = 20
SEED = 0
#: The mAP-loss constraint: allowed loss, probe budget (epochs on a fraction of the train set).
MAX_MAP_LOSS = "0.01"
PROBE_EPOCHS = 10
PROBE_FRACTION = 0.25
#: Seeds per probed signature (the baseline's and each candidate's, paired), and the seconds the baseline's
#: probes may spend growing a budget that cannot tell signatures apart (speedopt.quality._budget).
PROBE_SEEDS = 2
PROBE_GROW_S = 600.0
#: Seeds a candidate's look may grow to while its loss's interval straddles the allowed loss (doubling from PROBE_SEEDS).
PROBE_MAX_SEEDS = 8
#: The most one probe may train, as a share of the user's run (--epochs x train images): a probe is not a training run.
PROBE_SHARE = 0.05
#: Fresh seeds a confirmation probes at each of its two lengths. Eight: a loss that one seed in four suffers goes
#: unseen on all eight 10% of the time (on four, 32%).
CONFIRM_SEEDS = 8
#: The stated risk: the chance a recommended accuracy change loses more than --max-map-loss (docs/accuracy.md).
ACCURACY_RISK = 0.10
#: Seconds between a running trial's heartbeats in an RDB storage, and without one before the trial is failed
#: (and retried): a worker's grace before it leaves a study short of its target, a claim's before it is taken over.
HEARTBEAT_S = 5
GRACE_S = 20
#: Where studies live when no --storage is given (relative to the working directory).
STORAGE_URL = "sqlite:///studies/speedopt.db"
#: Where reports are written when no --out is given.
REPORTS_DIR = "reports"
#: Headroom cache=ram needs, as Ultralytics' check_cache_ram: the estimate must fit twice into free RAM.
RAM_CACHE_MARGIN = 1.0


def max_steps(steps: int, given: int | None) -> int:
    """The adaptive window's maximum: as given, else MAX_STEPS_FACTOR x the minimum steps."""
    return given if given is not None else MAX_STEPS_FACTOR * steps
