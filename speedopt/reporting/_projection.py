"""Projected wall time of the full training run, from what trials measured (an estimate, with its inputs).

full run = one-time dataset build + torch.compile's one-time cost (compile trials) + epochs x (full train set / measured images/s + one validation
pass, timed once on the val split by a real validation run + one checkpoint save, timed in the same
run right after the validation). The save is the trainer's own epoch-end save: last.pt, and best.pt
when the epoch improved; the timed save is of the first epoch, which always improves, so it writes
both and counting it every epoch is an upper bound. The one-time build is the label scan
plus the cache fill. Where the study built the trainer's label cache (its labels job, before the
trials), the scan is that build's measured seconds for the train and val splits, counted once, and
the trials' own builds (which then read the cache, scanning nothing) give the cache fill, scaled from
the trial's subset to the full train set. Without that build, the trial's whole build is scaled.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from speedopt.engines import LabelCacheBuild
from speedopt.knobs import Knobs
from speedopt.measure import LabelCaches, TrialResult
from speedopt.study import StudyProtocol, schema

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class MosaicOff:
    """The run's last ``epochs`` with mosaic off, and the loader's measured rates with mosaic on and off."""

    epochs: int
    data_on: float  # the data ceiling of the config (mosaic on), images/s
    data_off: float  # the same loader with mosaic off (its ``data-no-mosaic`` job), images/s

    def step_s(self, step_s: float, wait_fraction: float) -> float:
        """Per image with mosaic off: the trial's time per image, its data wait scaled by the loader's two rates."""
        wait = wait_fraction * step_s
        return step_s - wait + wait * self.data_on / self.data_off


@dataclass(frozen=True)
class Projection:
    """The estimate and every input it was computed from."""

    epochs: int
    images_total: int
    images_per_s: float
    build_s: float  # one time: label scan + cache fill, full train set, and the val split
    epoch_train_s: float
    val_s: float | None  # one validation pass (the trainer validates every epoch)
    total_s: float
    basis: tuple[str, ...]
    label_scan_s: float | None = None  # of build_s: the label scan measured once by the study's labels job
    notes: tuple[str, ...] = ()  # advice on the one-time costs (a multi-GPU run: build the label cache first)
    save_s: float | None = None  # one epoch-end checkpoint save (last.pt + best.pt: an upper bound per epoch)
    compile_s: float = 0.0  # torch.compile's one-time cost, measured in the config's trial, counted once
    mosaic_off_epochs: int = 0  # of ``epochs``, those the trainer runs with mosaic off (its last close_mosaic)
    epoch_train_off_s: float | None = None  # one of those epochs' training (None: counted at epoch_train_s)
    warmup_s: float = 0.0  # the optimizer steps the trainer's warm-up adds beyond its steady cadence, at the measured step time

    @property
    def epoch_s(self) -> float:
        """One epoch of the full run: training, the validation pass and the checkpoint save."""
        return self.epoch_train_s + (self.val_s or 0.0) + (self.save_s or 0.0)

    def parts(self) -> dict[str, float]:
        """The total, split into what it adds up (seconds): their sum is :attr:`total_s`."""
        return {
            "one-time build": self.build_s,
            "torch.compile": self.compile_s,
            "training": (self.epochs - self.mosaic_off_epochs) * self.epoch_train_s
            + self.mosaic_off_epochs * (self.epoch_train_s if self.epoch_train_off_s is None else self.epoch_train_off_s),
            "validation": self.epochs * (self.val_s or 0.0),
            "checkpoint saves": self.epochs * (self.save_s or 0.0),
            "optimizer warm-up": self.warmup_s,
        }

    def share(self, part: str) -> float | None:
        """The fraction of the total spent in ``part`` (a key of :meth:`parts`); None for a zero total."""
        return self.parts()[part] / self.total_s if self.total_s > 0 else None


def project(
    result: TrialResult,
    epochs: int,
    val_s: float | None,
    images_per_s: float | None = None,
    rounds: int = 0,
    labels: LabelCacheBuild | None = None,
    prepare_s: float = 0.0,
    save_s: float | None = None,
    mosaic: MosaicOff | None = None,
    mosaic_epochs: int = 0,
    rounds_of: str = "finals",
    warmup: tuple[int, float] | None = None,
) -> Projection | None:
    """The full-run estimate for a config measured ok (None for a trial without throughput).

    ``images_per_s`` (the median of ``rounds`` measurements: the finals', or ``rounds_of`` "compiled": the compile
    decision's) replaces the trial's one measurement.
    ``labels``: the study's label-cache build for the config's data.yaml (:func:`label_build_for`): the
    label scan, counted once. ``prepare_s``: the prepared copy a data=resized config trains on, made once
    (measured when it was made), added to the one-time build. ``save_s``: one epoch-end checkpoint save
    (last.pt and best.pt), timed with the validation pass, added to every epoch (an upper bound).
    ``mosaic_epochs``: the last epochs the trainer runs with mosaic off; ``mosaic``: the loader measured with mosaic
    on and off, which counts them at their own rate (without it, at the mosaic rate, and the basis says so).
    ``warmup``: the optimizer steps of the run's warm-up and what its steady cadence steps in as many batches
    (:meth:`speedopt.engines.Engine.warmup_steps`); the difference is counted at the trial's measured step time.
    """
    if result.images_per_s is None or not result.images_total:
        return None
    total_images = result.images_total
    speed = images_per_s or result.images_per_s
    if images_per_s is not None and rounds:
        basis = [f"{speed:.2f} images/s: median of {rounds} {rounds_of} rounds on {result.device}"]
    else:
        basis = [f"{speed:.2f} images/s measured once over {result.steps} steps on {result.device}"]
    build, scan, notes = _one_time(result, total_images, labels, basis)
    if prepare_s:
        build += prepare_s
        basis.append(f"the resized copy (speedopt prepare) took {prepare_s:.1f} s when it was made, paid once")
    epoch = total_images / speed
    basis.append(f"epoch = {total_images} train images / {speed:.2f} images/s = {epoch:.1f} s")
    if val_s is not None:
        basis.append(f"validation pass {val_s:.1f} s, timed once on the val split with the trainer's own validator")
    else:
        basis.append("validation not timed: left out of the total")
    if save_s is not None:
        basis.append(
            f"checkpoint save {save_s:.2f} s (last.pt and best.pt), timed once after the validation pass and counted "
            "every epoch: an upper bound, best.pt is written only when the epoch improves"
        )
    else:
        basis.append("checkpoint save not timed: left out of the total")
    compiled = result.compile_s or 0.0
    if result.config.compile != "off" and result.compile_s is not None:
        basis.append(
            f"torch.compile (compile={result.config.compile}) {compiled:.1f} s: the trial's warm-up steps beyond its steady "
            "step time, paid once per run (less where the inductor cache is warm), counted once"
        )
    off_epochs, epoch_off = min(mosaic_epochs, epochs), None
    if off_epochs and mosaic is not None:
        wait = result.data_wait_fraction or 0.0
        epoch_off = total_images * mosaic.step_s(1 / speed, wait)
        basis.append(
            f"the last {off_epochs} epochs train with mosaic off (the trainer's close_mosaic): {epoch_off:.1f} s each, an "
            f"estimate: the trial's data wait ({100 * wait:.0f}% of its time) scaled by the loader's measured rates with "
            f"mosaic on and off ({mosaic.data_on:.1f} and {mosaic.data_off:.1f} images/s)"
        )
    elif off_epochs:
        basis.append(f"the last {off_epochs} epochs (mosaic off) counted at the mosaic rate: the loader was not measured with mosaic off")
    warm_s = _warmup_s(result, warmup, basis)
    parts = Projection(
        epochs, total_images, speed, build, epoch, val_s, 0.0, tuple(basis), scan, notes, save_s, compiled, off_epochs, epoch_off,
        warm_s,
    )
    return dataclasses.replace(parts, total_s=sum(parts.parts().values()))  # the total is its parts' sum, one formula


def _warmup_s(result: TrialResult, warmup: tuple[int, float] | None, basis: list[str]) -> float:
    """The seconds the run's warm-up adds: its extra optimizer steps at the trial's measured step time (an estimate)."""
    if warmup is None or result.optimizer_step_s is None or not result.accumulate:
        return 0.0
    steps, steady = warmup
    extra = max(0.0, steps - steady)
    seconds = extra * result.optimizer_step_s
    basis.append(
        f"warm-up: the trainer's first epochs ramp accumulation up to {result.accumulate} batches a step, so the optimizer "
        f"steps {steps} times where the measured cadence steps {steady:.0f}; the {extra:.0f} more steps at "
        f"{result.optimizer_step_s:.3f} s each (measured in the trial, {result.optimizer or 'its optimizer'}): {seconds:.1f} s, an estimate"
    )
    return seconds


def _one_time(
    result: TrialResult, total_images: int, labels: LabelCacheBuild | None, basis: list[str]
) -> tuple[float, float | None, tuple[str, ...]]:
    """The one-time build (label scan + cache fill), the scan in it when measured once, and notes; appends
    how it was computed to ``basis``. A trial that scanned anyway (its ``label_scan_s``, train split first)
    has its scan taken out of its build before the fill is scaled, so the scan is never counted twice."""
    train, val = result.train_build_s, result.val_build_s or 0.0
    if labels is None:
        if train is None or not result.images_used:
            return 0.0, None, ()
        scale = total_images / result.images_used
        basis.append(
            f"dataset build {train:.2f} s measured for {result.images_used} train images "
            f"(cache={result.config.cache}), scaled x{scale:.1f} to {total_images}, plus {val:.2f} s for the val split"
        )
        if result.label_scan_s == 0.0:
            basis.append("label scan not included: the trial read a prebuilt label cache and no label-cache build was given")
        return train * scale + val, None, ()
    scan = labels.seconds
    basis.append(
        f"label scan {scan:.1f} s measured once for {labels.images} train and val images (the trainer's own label "
        "cache, built before the trials; paid once per dataset, not per epoch or per trial)"
    )
    fill = 0.0
    if train is not None and result.images_used:
        scale = total_images / result.images_used
        in_train = min(result.label_scan_s or 0.0, train)
        in_val = min((result.label_scan_s or 0.0) - in_train, val)
        fill = (train - in_train) * scale + (val - in_val)
        basis.append(
            f"dataset build without the label scan {train - in_train:.2f} s measured for {result.images_used} train images "
            f"(cache={result.config.cache}), scaled x{scale:.1f} to {total_images}, plus {val - in_val:.2f} s for the val split"
        )
    return scan + fill, scan, (LabelCaches.MULTI_GPU_NOTE,)


def label_build_for(study: optuna.Study, protocol: StudyProtocol, knobs: Knobs) -> LabelCacheBuild | None:
    """The study's label-cache build for the data.yaml ``knobs`` train on, if any."""
    caches = schema.read_labels(study)
    return None if caches is None else caches.build_for(protocol.data_yaml(knobs))


def prepare_s_for(protocol: StudyProtocol, knobs: Knobs) -> float:
    """Seconds the prepared copy ``knobs`` train on took to make (0.0 on the original images)."""
    if knobs.data != "resized":
        return 0.0
    return next((c.seconds for c in protocol.copies if c.imgsz == knobs.imgsz), 0.0)
