"""Projected wall time of the full training run, from what trials measured (an estimate, with its inputs).

full run = one-time dataset build (label scan + cache fill, extrapolated from the trial's measured
build of its subset to the full train set, plus the val split's build) + epochs x (full train set /
measured images/s + one validation pass, timed once on the val split by a real validation run).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from speedopt import defaults
from speedopt.data import load
from speedopt.knobs import Knobs
from speedopt.measure import JobOutcome, TrialResult, ValidateJob, ValidationTime, no_new_npy, run_job
from speedopt.offline import cache_dir
from speedopt.study import StudyProtocol

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class Projection:
    """The estimate and every input it was computed from."""

    epochs: int
    images_total: int
    images_per_s: float
    build_s: float  # one time: scan + cache fill, full train set, and the val split
    epoch_train_s: float
    val_s: float | None  # one validation pass (the trainer validates every epoch)
    total_s: float
    basis: tuple[str, ...]


def project(
    result: TrialResult, epochs: int, val_s: float | None, images_per_s: float | None = None, rounds: int = 0
) -> Projection | None:
    """The full-run estimate for a config measured ok (None for a trial without throughput).

    ``images_per_s`` (the median of ``rounds`` finals measurements) replaces the trial's one measurement.
    """
    if result.images_per_s is None or not result.images_total:
        return None
    total_images = result.images_total
    speed = images_per_s or result.images_per_s
    if images_per_s is not None and rounds:
        basis = [f"{speed:.2f} images/s: median of {rounds} finals rounds on {result.device}"]
    else:
        basis = [f"{speed:.2f} images/s measured once over {result.steps} steps on {result.device}"]
    build = 0.0
    if result.train_build_s is not None and result.images_used:
        scale = total_images / result.images_used
        build = result.train_build_s * scale + (result.val_build_s or 0.0)
        basis.append(
            f"dataset build {result.train_build_s:.2f} s measured for {result.images_used} train images "
            f"(cache={result.config.cache}), scaled x{scale:.1f} to {total_images}, plus {result.val_build_s or 0:.2f} s for the val split"
        )
    epoch = total_images / speed
    basis.append(f"epoch = {total_images} train images / {speed:.2f} images/s = {epoch:.1f} s")
    if val_s is not None:
        basis.append(f"validation pass {val_s:.1f} s, timed once on the val split with the trainer's own validator")
    else:
        basis.append("validation not timed: left out of the total")
    total = build + epochs * (epoch + (val_s or 0.0))
    return Projection(epochs, total_images, speed, build, epoch, val_s, total, tuple(basis))


def _val_key(protocol: StudyProtocol, knobs: Knobs) -> str:
    parts = [protocol.dataset.id, protocol.device, knobs.model, knobs.imgsz, knobs.batch, knobs.amp, knobs.cache]
    material = json.dumps(parts)
    return "val_time:" + hashlib.sha256(material.encode()).hexdigest()[:16]


def validation_time(
    study: optuna.Study, protocol: StudyProtocol, knobs: Knobs, timeout_s: float = defaults.VALIDATION_TIMEOUT_S
) -> JobOutcome | ValidationTime:
    """One validation pass for these knobs on this machine: from the study attrs, else timed now.

    Timed with the config's cache mode: the trainer caches the val split too, and a cached val set
    validates faster (1920x1080 PNGs: 3.5 s uncached for a pass the real run made in about half that).
    Stored in the study's user attrs, so a report is cheap the second time. Returns the time, or the
    job's outcome when it could not be timed (its status and message say why).
    """
    key = _val_key(protocol, knobs)
    stored = study.user_attrs.get(key)
    if stored is not None:
        return ValidationTime(stored["val_s"], stored["val_images"])
    job = ValidateJob(
        engine=protocol.engine,
        yolov5_dir=protocol.yolov5_dir,
        data_yaml=protocol.data,
        knobs=knobs,
        device=protocol.device,
        timeout_s=timeout_s,
        cache_dir=str(cache_dir()),
        weights=protocol.quality.weights,
    )
    ds = load(protocol.data)  # the timing run trains one batch first: its train images get .npy files too
    with no_new_npy([*ds.train_images, *ds.val_images] if knobs.cache == "disk" else []):

        outcome = run_job(job, study.study_name)

    timed = outcome.validation()
    if timed is None:
        return outcome
    study.set_user_attr(key, {"status": outcome.status.value, "val_s": timed.seconds, "val_images": timed.images})
    return timed
