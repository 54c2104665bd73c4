"""Trainer engines: one file each, behind :class:`Engine`.

Engine modules are imported by name on demand (:func:`get`), and import their trainer only inside
their methods, so importing speedopt never imports a trainer.
"""

from __future__ import annotations

import importlib

from speedopt.engines._base import (
    MODES,
    Clock,
    Engine,
    EngineReport,
    LabelCacheBuild,
    ProbeRun,
    ProbeScores,
    SplitLabels,
    TrainRun,
)
from speedopt.engines._common import PG_TIMEOUT_ENV, ddp_rank, model_argument
from speedopt.errors import UsageError

_ENGINES = {
    "ultralytics": ("speedopt.engines.ultralytics", "UltralyticsEngine"),
    "yolov5": ("speedopt.engines.yolov5", "Yolov5Engine"),
    "standin": ("speedopt.engines.standin", "StandinEngine"),  # a tiny net: speedopt's own checks (DDP on CPU)
}

NAMES = ("ultralytics", "yolov5")  # the trainers a user picks; the stand-in is speedopt's own test double


def get(name: str, yolov5_dir: str | None = None) -> Engine:
    """Instantiate the engine called ``name``; ``yolov5_dir`` is the classic engine's checkout (optional)."""
    try:
        module, cls = _ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}; available: {', '.join(NAMES)}") from None  # the stand-in unlisted
    engine_class: type[Engine] = getattr(importlib.import_module(module), cls)
    if name == "yolov5":
        return engine_class(yolov5_dir)  # type: ignore[call-arg]
    if yolov5_dir:
        raise UsageError(f"--yolov5-dir is for --engine yolov5 only (this is --engine {name})")
    return engine_class()


__all__ = [
    "MODES",
    "Clock",
    "Engine",
    "EngineReport",
    "LabelCacheBuild",
    "NAMES",
    "ProbeRun",
    "ProbeScores",
    "SplitLabels",
    "TrainRun",
    "PG_TIMEOUT_ENV",
    "ddp_rank",
    "get",
    "model_argument",
]
