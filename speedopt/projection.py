"""Projected wall time of the full training run, from what trials measured (an estimate, with its inputs).

full run = one-time dataset build (label scan + cache fill, extrapolated from the trial's measured
build of its subset to the full train set, plus the val split's build) + epochs x (full train set /
measured images/s + one validation pass, timed once on the val split by a real validation run).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt import engines, hostlock, isolation
from speedopt.knobs import Knobs
from speedopt.measurement import TrialResult
from speedopt.offline import cache_dir


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


def project(result: TrialResult, epochs: int, val_s: float | None) -> Projection | None:
    """The full-run estimate for a config measured ok (None for a trial without throughput)."""
    if result.images_per_s is None or not result.images_total:
        return None
    total_images = result.images_total
    basis = [f"{result.images_per_s:.2f} images/s measured over {result.steps} steps on {result.device}"]
    build = 0.0
    if result.train_build_s is not None and result.images_used:
        scale = total_images / result.images_used
        build = result.train_build_s * scale + (result.val_build_s or 0.0)
        basis.append(
            f"dataset build {result.train_build_s:.2f} s measured for {result.images_used} train images "
            f"(cache={result.config.get('cache')}), scaled x{scale:.1f} to {total_images}, plus {result.val_build_s or 0:.2f} s for the val split"
        )
    epoch = total_images / result.images_per_s
    basis.append(f"epoch = {total_images} train images / {result.images_per_s:.2f} images/s = {epoch:.1f} s")
    if val_s is not None:
        basis.append(f"validation pass {val_s:.1f} s, timed once on the val split with the trainer's own validator")
    else:
        basis.append("validation not timed: left out of the total")
    total = build + epochs * (epoch + (val_s or 0.0))
    return Projection(epochs, total_images, result.images_per_s, build, epoch, val_s, total, tuple(basis))


def _val_key(attrs: dict[str, Any], knobs: Knobs) -> str:
    material = json.dumps([attrs["dataset"]["id"], attrs["device"], knobs.model, knobs.imgsz, knobs.batch, knobs.amp])
    return "val_time:" + hashlib.sha256(material.encode()).hexdigest()[:16]


def validation_time(study, knobs: Knobs, timeout_s: float = 1800.0) -> dict[str, Any]:
    """One validation pass for these knobs on this machine: from the study attrs, else timed now.

    Stored in the study's user attrs, so a report is cheap the second time.
    """
    attrs = study.user_attrs
    key = _val_key(attrs, knobs)
    if key in attrs:
        return attrs[key]
    engine = engines.get(attrs["engine"], yolov5_dir=attrs.get("yolov5_dir"))
    request = {
        "kind": "validate",
        "engine": attrs["engine"],
        "yolov5_dir": attrs.get("yolov5_dir"),
        "data_yaml": attrs["data"],
        "knobs": Knobs(**{**knobs.to_dict(), "cache": "none"}).to_dict(),
        "device": attrs["device"],
        "epochs": 1,
        "fraction": 1.0,
        "seed": 0,
        "weights": (attrs.get("quality") or {}).get("weights"),
        "cache_dir": str(cache_dir()),
    }
    with hostlock.measuring(study.study_name):
        done = isolation.run_isolated(
            "speedopt.job_process", json.dumps(request), engine.environment(Path(request["cache_dir"])), timeout_s
        )
    result = done.result or {"status": "timeout" if done.timed_out else "error", "message": done.log_tail[-300:]}
    if result.get("status") == "ok":
        study.set_user_attr(key, result)
    return result
