"""The engine interface: how speedopt drives one trainer for one trial.

An engine builds the real trainer with the trial's knobs and wires the trainer's own batch hooks
to a step clock (:class:`~speedopt.measure._clock.StepClock`), which stops training (by raising
:class:`~speedopt.status.TrialFinished`) once warm-up and measured steps are done. Everything else
(process isolation, timeout, telemetry, the result) is the job runner's, shared by all engines.
A new trainer is one new file: a subclass with :meth:`Engine.version` and :meth:`Engine.train`;
the optional hooks do nothing by default, and what an engine can do beyond training is declared by
its class flags (``supports_probe``, ``supports_validation_timing``, ``supports_label_cache``), never detected.

Label caches: a trial trains on a leading subset of the train images, whose label-cache hash never
matches the cache of the full split, so the trainer would rescan the subset's labels in every trial
(minutes on millions of images). An engine with ``supports_label_cache`` builds the trainer's own
cache of the full splits once per study (:meth:`Engine.build_label_cache`: the very file the user's
real run reuses) and, in a trial, takes the subset's labels from that file when it is still the one
built (same trainer cache version, same stored hash, every subset image in it): no scan, and the
full cache is never rewritten. A trial that must scan writes a subset's cache in its private folder.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from speedopt.knobs import KNOBS, Knobs


class Clock(Protocol):
    """What an engine calls around each batch (see :class:`speedopt.measure._clock.StepClock`)."""

    warmup: int  # the trial's warm-up batches, not measured: the trainer's own warm-up must end within them

    def cycle(self, batches: int) -> None:
        """Batches per optimizer step in the measured window: the window then holds whole cycles."""

    def batch_start(self) -> None: ...

    def batch_end(self, images: int) -> None: ...


@dataclass(frozen=True)
class SplitLabels:
    """One split's label cache, as the trainer's own dataset code built or found it (all on the full split)."""

    split: str  # "train" or "val"
    cache: str  # the trainer's cache file (absolute): the one the user's own run reads
    images: int  # images the cache holds labels for
    seconds: float  # building the split's dataset: the label scan (or the load of a valid cache)
    reused: bool  # a valid cache was there already: nothing was scanned
    hash: str  # the hash the trainer stored in the file: a trial trusts the file only while it still holds it
    version: str  # the trainer's cache format version
    listed: int = 0  # images the trainer listed for the split (0: not recorded)
    corrupt: int = 0  # of those, what its label check dropped as a corrupt image or label
    problem: str = ""  # the first drop as the trainer's log says it

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SplitLabels:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class LabelCacheBuild:
    """The label caches of one data.yaml's train and val splits, built (or found valid) once."""

    data_yaml: str
    splits: tuple[SplitLabels, ...]

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.splits)

    @property
    def images(self) -> int:
        return sum(s.images for s in self.splits)

    def to_dict(self) -> dict[str, Any]:
        return {"data_yaml": self.data_yaml, "splits": [s.to_dict() for s in self.splits]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabelCacheBuild:
        return cls(str(data["data_yaml"]), tuple(SplitLabels.from_dict(s) for s in data.get("splits") or ()))


@dataclass(frozen=True)
class TrainRun:
    """What an engine trains: the knobs as they will run, on which data and device, where to write."""

    data_yaml: str
    knobs: Knobs
    device: str
    images: int  # train images this trial uses (a leading subset when below images_total)
    images_total: int
    epochs: int  # nominal epochs of the full run: sets the LR schedule and optimizer as the real run would
    workdir: Path  # the trial's private folder; the engine writes run folders only here
    seed: int = 0
    train_subset: tuple[str, ...] = ()  # the subset's image paths when images < images_total (listed once, by the parent)
    label_caches: tuple[SplitLabels, ...] = ()  # full-split caches built for this data.yaml (see the module docstring)
    mode: str = "train"  # one of MODES: a training trial, or one of the two ceilings (see Engine.train)
    weights: str | None = None  # a probe's checkpoint to start from (the classic engine trains probes as runs)
    optimizer: str = "auto"  # the user's run's optimizer argument: auto (resolved for the full run), or one it names


@dataclass(frozen=True)
class EngineReport:
    """What the engine observed about the run as it actually happened inside the trainer."""

    knobs: Knobs  # read back from the trainer after its set-up: what it really runs
    images_used: int
    notes: tuple[str, ...] = field(default=())
    train_build_s: float | None = None  # building the train dataset: label scan and cache fill
    val_build_s: float | None = None
    val_images: int | None = None
    label_scan_s: float | None = None  # set-up time spent scanning labels (0.0: every split's labels came from a cache)
    image_bytes_mean: float | None = None  # the train images the trainer listed: mean file size
    image_long_side: int | None = None  # and mean long side in pixels (decoded size), from their headers
    compile_loss_gap: float | None = None  # compiled vs eager loss on the first batch, relative (compile trials only)
    forward_gflops: float | None = None  # the model's forward GFLOPs per image at imgsz, as the trainer counts them
    flops_how: str = ""  # how they were counted (engines._flops), or why they were not
    optimizer: str = ""  # the optimizer the trial trained, as the trainer resolved it for the user's run ("": not read)
    optimizer_args: tuple[str, ...] = ()  # the trainer arguments that train it in a run of any length (verify's)
    optimizer_step_s: float | None = None  # one optimizer step (and EMA update), median seconds, device synchronised
    accumulate: int | None = None  # batches per optimizer step in the measured window: the run's steady cadence
    optimizer_step_at: tuple[float, ...] = ()  # when each optimizer step ended (time.perf_counter, the clock's time)


@dataclass(frozen=True)
class ProbeRun:
    """A quality probe: train these knobs for a fixed budget from scratch (or ``weights``), validate."""

    data_yaml: str
    knobs: Knobs
    device: str
    epochs: int
    fraction: float  # of the training set
    seed: int
    workdir: Path
    weights: str | None = None  # a local checkpoint to start from
    #: The user's run this probe is a miniature of: its closing no-mosaic epochs take the run's share of the probe, as
    #: the learning rate already anneals over it (0: the trainer's schedule for a run of ``epochs``).
    run_epochs: int = 0
    run_images: int = 0  # the user's run's train images: with run_epochs, the run whose optimizer the probe trains


@dataclass(frozen=True)
class ProbeScores:
    """Validation accuracy of a probe on the val split."""

    map50: float
    map50_95: float
    images: int  # training images the probe used
    optimizer: str = ""  # the optimizer it trained, as its trainer resolved it ("": not read)


#: What a TrainRun measures: ``train`` the trainer's real steps; ``data`` its training dataloader alone (the
#: data ceiling: batches as fast as the loader yields them, no model step); ``compute`` its steps on its
#: first batches taken once and kept on the device (the compute ceiling: forward, backward, optimizer, no loader);
#: ``data-no-mosaic`` the data ceiling's loader as the trainer runs it in its last epochs, mosaic off
#: (engines whose :meth:`Engine.mosaic_off_epochs` are not 0).
MODES = ("train", "data", "compute", "data-no-mosaic")


#: The command a person trains a trainer with, the dialect speedopt prints and advises in: ``yolo`` (the Ultralytics
#: CLI ``yolo detect train key=value ...`` and its ``YOLO(...).train(...)`` call) or ``train.py`` (the classic
#: ``python train.py --flag ...``, run in a checkout of ultralytics/yolov5 or as ``python -m yolov5.train``).
Dialect = Literal["yolo", "train.py"]


def threads_of(omp_env: str | None, default: int) -> int:
    """The threads torch takes from ``OMP_NUM_THREADS`` (``omp_env``; unset or not a positive count: ``default``)."""
    try:
        count = int(omp_env or "")
    except ValueError:
        return default
    return count if count > 0 else default


class Engine(abc.ABC):
    """A trainer adapter. Subclasses implement :meth:`version` and :meth:`train`; the rest are optional hooks."""

    name: ClassVar[str]
    install_hint: ClassVar[str] = ""  # how to install the trainer, for the "not installed" message
    supports_probe: ClassVar[bool] = False  # implements probe(): can judge accuracy (the mAP constraint)
    supports_validation_timing: ClassVar[bool] = False  # implements time_validation(): the projection's val pass
    supports_label_cache: ClassVar[bool] = False  # implements build_label_cache(), and trials reuse what it built
    prefetch_batches: ClassVar[int] = 2  # batches each dataloader worker holds ready (torch's prefetch_factor)
    ddp_devices: ClassVar[tuple[str, ...]] = ()  # where train() runs as a DDP rank under torch.distributed.run: "cuda", "cpu"
    trains_yolov5: ClassVar[bool] = True  # False for a stand-in: its study prints no training command
    supports_ceilings: ClassVar[bool] = False  # train() honours TrainRun.mode "data" and "compute" (the ceilings)
    #: the knobs not every trainer has (:attr:`speedopt.knobs.Knob.option`: compile, channels_last) that train() honours
    honours: ClassVar[frozenset[str]] = frozenset()
    #: The :data:`Dialect` of the user's own training command: the recommended command, the report's advice
    #: (``val=False`` or ``--noval``), where the command runs and which logger integrations the real run loads
    #: follow it. Declared here so that nothing outside engines/ tests an engine's name; the base answers
    #: ``yolo`` (the stand-in prints no command, ``trains_yolov5`` False, and is checked as the default trainer).
    dialect: ClassVar[Dialect] = "yolo"
    #: The trainer resizes an original image exactly as ``speedopt prepare`` resizes a copy (same rounding and
    #: interpolation, in training and validation), so a lossless prepared copy (``data=resized``) holds the very
    #: pixels it would compute: accuracy-neutral, searched with quality off too. False: even a lossless copy is
    #: an accuracy knob for this trainer (the classic train.py rounds a side up and validates with INTER_AREA).
    lossless_copy_exact: ClassVar[bool] = False

    @abc.abstractmethod
    def version(self) -> str | None:
        """Version of the installed trainer, without importing it when possible (None if missing)."""

    def fixed_knobs(self, device: str) -> dict[str, tuple[Any, str]]:
        """Knobs this trainer has no switch for on ``device``: knob -> (the value it always runs, why).

        The trial runs that value whatever was asked and notes why; a search does not vary the knob. The base
        fixes at their defaults the knobs not every trainer has that the engine does not list in :attr:`honours`
        (``compile``, ``channels_last``), and the CUDA-only ones on the CPU; engines that override it start from it.
        """
        fixed: dict[str, tuple[Any, str]] = {}
        for knob in KNOBS.values():
            if knob.option and knob.name not in self.honours:
                fixed[knob.name] = (knob.default, f"the {self.name} trainer has no {knob.option} option")
            elif knob.cuda_only and device == "cpu":
                fixed[knob.name] = (knob.default, f"{knob.name} is a CUDA-only option: the trainer ignores it on the CPU")
        return fixed

    def accepted(self, device: str) -> dict[str, tuple[tuple[Any, ...], str]]:
        """Knobs whose values the installed trainer limits on ``device``: knob -> (the values it takes, why),
        read from the trainer, never assumed (its ``compile`` modes; ``amp=bf16`` only on a GPU with bfloat16).
        A space that lists another value is refused; a default space leaves it out, with a note."""
        return {}

    def silent_rules(self) -> dict[str, str]:
        """The knobs this trainer may run otherwise than asked without failing, each with its rule; a trial reads
        them back and ends with the status :data:`speedopt.engines.SILENT_STATUS` gives (the report's honoured
        table lists them). Default: none declared (an engine may still reject inline)."""
        return {}

    @property
    def checkout(self) -> Path | None:
        """The folder of trainer code this engine runs, where the user named one (the classic engine's
        ``--yolov5-dir``, checked when the engine was made). Default: None, the installed package."""
        return None

    def optimizer_args(self, train_images: int, batch: int, epochs: int, classes: int) -> tuple[str, ...]:
        """The trainer arguments that make a run of any length train the optimizer the trainer picks for a run of
        ``epochs`` on ``train_images`` at ``batch`` (asked of the installed trainer). Default: none (its own default
        does not depend on the run's length)."""
        return ()

    def warmup_epochs(self, epochs: int, per_epoch: int) -> float:
        """The epochs (of ``per_epoch`` batches) a run of ``epochs`` spends in the trainer's warm-up, where it steps the
        optimizer more often than after: ``verify`` compares the epochs after it. Default: none."""
        return 0.0

    def warmup_steps(self, train_images: int, batch: int, epochs: int) -> tuple[int, float] | None:
        """The optimizer steps of the run's warm-up, and what its steady cadence would step in as many batches (the
        projection counts the difference at the trial's measured step time). Default: None, not known."""
        return None

    def mosaic_off_epochs(self, epochs: int) -> int:
        """How many of a run's ``epochs`` the trainer trains with mosaic off (Ultralytics: its last ``close_mosaic``);
        an engine returning more than 0 honours the ``data-no-mosaic`` mode, for the projection. Default: none."""
        return 0

    def environment(self, cache_dir: Path) -> dict[str, str]:
        """Environment variables for the trial process (offline switches, private config dirs)."""
        return {}

    def torch_threads(self, omp_env: str | None, torch_default: int) -> int:
        """The intra-op threads torch runs the printed command with here, given the user's ``OMP_NUM_THREADS``
        (``omp_env``) and torch's default without it (``torch_default``); a job sets them before it trains,
        so a trial measures the real run's threads whatever its process imported first (see
        :mod:`speedopt.measure._threads`). Default: what torch takes when it loads first."""
        return threads_of(omp_env, torch_default)

    def command_problems(self) -> tuple[str, ...]:
        """Why the printed command may fail in this environment although the trials ran (speedopt patches
        the trainer inside its trials; the user's own run gets no patch). Checked without importing the trainer."""
        return ()

    def prepare(self, cache_dir: Path) -> None:
        """Run inside the job process before the job: offline set-up (local fonts, settings)."""

    def preload(self) -> None:
        """Import the trainer's modules, in a warm worker (:mod:`speedopt.measure._warm`) that forks each job
        from them: imports only, no CUDA, no trainer, no patch (each job does those in its own child).
        Engines that override it call it too."""
        import torch._inductor.config  # noqa: F401 - torch, and what torch.use_deterministic_algorithms() imports (~2 s) in every trainer's init_seeds

    def probe(self, run: ProbeRun, progress: Callable[[int, int], None]) -> ProbeScores:
        """Train ``run.epochs`` epochs and return val mAP (the quality probe); engines with
        ``supports_probe`` implement it. ``progress(epoch, epochs)`` after each epoch. Searches on an
        engine without it run with quality off (accuracy knobs fixed at the baseline)."""
        raise NotImplementedError(f"the {self.name} engine has no quality probe; use --quality off")

    def time_validation(self, run: ProbeRun) -> tuple[float, int, float | None]:
        """Seconds of one validation pass on the val split as the trainer runs it each epoch, the images
        validated, and the seconds of the epoch-end checkpoint save that follows it (None: not timed);
        engines with ``supports_validation_timing`` implement it (the projection)."""
        raise NotImplementedError(f"the {self.name} engine cannot time a validation pass")

    def build_label_cache(self, data_yaml: str, workdir: Path) -> LabelCacheBuild:
        """Build (or find valid) the trainer's own label cache of the full train and val splits, where the
        user's real run looks for it; engines with ``supports_label_cache`` implement it. ``workdir``: the
        job's private folder (a trainer data.yaml may be written there, never into the dataset)."""
        raise NotImplementedError(f"the {self.name} engine cannot build a label cache")

    @abc.abstractmethod
    def train(self, run: TrainRun, clock: Clock) -> EngineReport:
        """Train with the run's knobs until ``clock`` raises TrialFinished; report what actually ran.

        Must call ``clock.batch_start()`` when a batch has arrived and ``clock.batch_end(n)`` after its
        step, with the device synchronised. Raise TrialRejected when the trainer would not run the
        knobs as asked (a silently reduced batch, a dropped cache).

        With ``supports_ceilings``, ``run.mode`` picks what is clocked, on the trainer as set up for
        training: ``data`` its train loader drained with no model step (:func:`~speedopt.engines._common.drain`),
        ``compute`` its own steps on one batch kept on the device (:class:`~speedopt.engines._common.SameBatch`).
        """
