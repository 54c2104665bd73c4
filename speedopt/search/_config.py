"""Everything a search can be asked, as one typed value (the CLI and the Python API build it)."""

from __future__ import annotations

from dataclasses import dataclass

from speedopt import defaults
from speedopt.data import PrepareFormat
from speedopt.engines import EngineName
from speedopt.measure import TrialOptions
from speedopt.quality import QualityMode
from speedopt.study.record_types import RankMode


@dataclass(frozen=True)
class SearchConfig:
    """The options of ``speedopt search``; each default is the CLI's (see :mod:`speedopt.defaults`). steps,
    max_steps, warmup, device, engine, yolov5_dir, trial_timeout_s and ram_limit_gb are every trial's
    :class:`~speedopt.measure.TrialOptions` (:attr:`trial`)."""

    data: str
    trials: int = defaults.TRIALS
    timeout_s: float | None = None  # stop starting new trials after this many seconds
    storage: str | None = None  # an Optuna storage URL or a journal file; None: defaults.STORAGE_URL
    study: str | None = None  # None: <dataset>-<gpu-or-cpu>-<hash of dataset and machine>
    space_file: str | None = None
    fix: tuple[str, ...] = ()  # KNOB=VALUE pins
    baseline: str | None = None  # the user's settings, "model=yolov5s imgsz=640 ..."; None: the trainer's
    steps: int = defaults.STEPS
    max_steps: int | None = None  # None: defaults.MAX_STEPS_FACTOR x steps
    warmup: int = defaults.WARMUP
    finalists: int = defaults.FINALISTS  # configs re-measured against the baseline after the search
    repeats: int = defaults.REPEATS  # interleaved rounds of that (0: no finals, no speedup claimed)
    min_gain: float = defaults.MIN_GAIN  # a claim needs every round at least this much faster (0.05: 5%)
    ablate: bool = True  # after the finals: which change bought what (the path to the recommendation measured)

    seed: int = defaults.SEED
    device: str | None = None
    engine: EngineName = "ultralytics"
    yolov5_dir: str | None = None
    trial_timeout_s: float = defaults.TRIAL_TIMEOUT_S
    ram_limit_gb: float | None = None
    quality: QualityMode = "probe"
    max_map_loss: str = defaults.MAX_MAP_LOSS
    probe_epochs: int = defaults.PROBE_EPOCHS
    probe_fraction: float = defaults.PROBE_FRACTION
    weights: str | None = None
    probe_timeout_s: float = defaults.PROBE_TIMEOUT_S
    probe_seeds: int = defaults.PROBE_SEEDS  # seeds per probed signature, paired with the baseline's
    probe_grow_s: float = defaults.PROBE_GROW_S  # seconds the baseline's probes may spend growing a budget that cannot tell
    probe_share: float = defaults.PROBE_SHARE  # the most one probe may train, as a share of the run (epochs x train images)
    accuracy_risk: float = defaults.ACCURACY_RISK  # the chance a recommended accuracy change loses more than allowed
    confirm_seeds: int = defaults.CONFIRM_SEEDS  # fresh seeds a screened candidate's confirmation probes at each length
    epochs: int = defaults.EPOCHS  # epochs of the user's full run: the projection, and what probes are priced against
    warm_start: str | None = None  # STORAGE[::STUDY] of another study
    prepare: PrepareFormat | None = None  # make the data knob's resized copies first (speedopt prepare)
    warm: bool = True  # fork every job from one warm worker (torch and the trainer imported once); False: each job cold
    ends: bool = True  # at the end, what the report reads: the baseline's and the recommendation's ceilings and validation time; False: not measured
    prune_margin: float = defaults.PRUNE_MARGIN  # prune a trial running below (1 - this) x the best; 0: never
    stop_at_ceiling: float = defaults.STOP_AT_CEILING  # stop when the best config reaches this share of min(its ceilings); 0: never
    ceiling_rank: RankMode = "auto"  # measure the space's ceilings first and its highest-bound configs first

    @property
    def trial(self) -> TrialOptions:
        """How each trial of the search is measured (``trial_timeout_s``: one trial's timeout)."""
        return TrialOptions(
            steps=self.steps, max_steps=self.max_steps, warmup=self.warmup, timeout_s=self.trial_timeout_s,
            device=self.device, engine=self.engine, yolov5_dir=self.yolov5_dir, ram_limit_gb=self.ram_limit_gb,
        )
