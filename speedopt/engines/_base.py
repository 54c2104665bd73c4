"""The engine interface: how speedopt drives one trainer for one trial.

An engine builds the real trainer with the trial's knobs and wires the trainer's own batch hooks
to a step clock (:class:`~speedopt.measure.StepClock`), which stops training (by raising
:class:`~speedopt.status.TrialFinished`) once warm-up and measured steps are done. Everything else
(process isolation, timeout, telemetry, the result) is the job runner's, shared by all engines.
A new trainer is one new file: a subclass with :meth:`Engine.version` and :meth:`Engine.train`;
the optional hooks do nothing by default, and what an engine can do beyond training is declared by
its class flags (``supports_probe``, ``supports_validation_timing``), never detected.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from speedopt.knobs import Knobs


class Clock(Protocol):
    """What an engine calls around each batch (see :class:`speedopt.measure.StepClock`)."""

    def batch_start(self) -> None: ...

    def batch_end(self, images: int) -> None: ...


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


@dataclass(frozen=True)
class EngineReport:
    """What the engine observed about the run as it actually happened inside the trainer."""

    knobs: Knobs  # read back from the trainer after its set-up: what it really runs
    images_used: int
    notes: tuple[str, ...] = field(default=())
    train_build_s: float | None = None  # building the train dataset: label scan and cache fill
    val_build_s: float | None = None
    val_images: int | None = None


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


@dataclass(frozen=True)
class ProbeScores:
    """Validation accuracy of a probe on the val split."""

    map50: float
    map50_95: float
    images: int  # training images the probe used


class Engine(abc.ABC):
    """A trainer adapter. Subclasses implement :meth:`version` and :meth:`train`; the rest are optional hooks."""

    name: ClassVar[str]
    install_hint: ClassVar[str] = ""  # how to install the trainer, for the "not installed" message
    supports_probe: ClassVar[bool] = False  # implements probe(): can judge accuracy (the mAP constraint)
    supports_validation_timing: ClassVar[bool] = False  # implements time_validation(): the projection's val pass
    prefetch_batches: ClassVar[int] = 2  # batches each dataloader worker holds ready (torch's prefetch_factor)

    @abc.abstractmethod
    def version(self) -> str | None:
        """Version of the installed trainer, without importing it when possible (None if missing)."""

    def fixed_knobs(self, device: str) -> dict[str, tuple[Any, str]]:
        """Knobs this trainer has no switch for on ``device``: knob -> (the value it always runs, why).

        The trial runs that value whatever was asked and notes why; a search does not vary the knob.
        """
        return {}

    def environment(self, cache_dir: Path) -> dict[str, str]:
        """Environment variables for the trial process (offline switches, private config dirs)."""
        return {}

    def command_problems(self) -> tuple[str, ...]:
        """Why the printed command may fail in this environment although the trials ran (speedopt patches
        the trainer inside its trials; the user's own run gets no patch). Checked without importing the trainer."""
        return ()


    def prepare(self, cache_dir: Path) -> None:
        """Run inside the job process before the job: offline set-up (local fonts, settings)."""

    def probe(self, run: ProbeRun, progress: Callable[[int, int], None]) -> ProbeScores:
        """Train ``run.epochs`` epochs and return val mAP (the quality probe); engines with
        ``supports_probe`` implement it. ``progress(epoch, epochs)`` after each epoch. Searches on an
        engine without it run with quality off (accuracy knobs fixed at the baseline)."""
        raise NotImplementedError(f"the {self.name} engine has no quality probe; use --quality off")

    def time_validation(self, run: ProbeRun) -> tuple[float, int]:
        """Seconds of one validation pass on the val split as the trainer runs it each epoch, and the
        images validated; engines with ``supports_validation_timing`` implement it (the projection)."""
        raise NotImplementedError(f"the {self.name} engine cannot time a validation pass")

    @abc.abstractmethod
    def train(self, run: TrainRun, clock: Clock) -> EngineReport:
        """Train with the run's knobs until ``clock`` raises TrialFinished; report what actually ran.

        Must call ``clock.batch_start()`` when a batch has arrived and ``clock.batch_end(n)`` after its
        step, with the device synchronised. Raise TrialRejected when the trainer would not run the
        knobs as asked (a silently reduced batch, a dropped cache).
        """
