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
from speedopt.engines._common import ddp_rank
from speedopt.errors import UsageError

_ENGINES = {
    "ultralytics": ("speedopt.engines.ultralytics", "UltralyticsEngine"),
    "yolov5": ("speedopt.engines.yolov5", "Yolov5Engine"),
    "standin": ("speedopt.engines.standin", "StandinEngine"),  # a tiny net: speedopt's own checks (DDP on CPU)
}

NAMES = tuple(_ENGINES)


def get(name: str, yolov5_dir: str | None = None) -> Engine:
    """Instantiate the engine called ``name``; ``yolov5_dir`` is the classic engine's checkout (optional)."""
    try:
        module, cls = _ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}; available: {', '.join(NAMES)}") from None
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
    "ddp_rank",
    "get",
]
