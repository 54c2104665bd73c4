"""Trainer engines: one file each, behind :class:`speedopt.engines.base.Engine`.

Engines are imported by name on demand so that importing speedopt never imports a trainer.
"""

from __future__ import annotations

import importlib

from speedopt.engines.base import Engine, EngineReport, ProbeRun, ProbeScores, TrainRun
from speedopt.errors import UsageError

_ENGINES = {
    "ultralytics": ("speedopt.engines.ultralytics", "UltralyticsEngine"),
}

NAMES = tuple(_ENGINES)


def get(name: str) -> Engine:
    """Instantiate the engine called ``name``."""
    try:
        module, cls = _ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}; available: {', '.join(NAMES)}") from None
    return getattr(importlib.import_module(module), cls)()


__all__ = ["Engine", "EngineReport", "ProbeRun", "ProbeScores", "TrainRun", "NAMES", "get"]
