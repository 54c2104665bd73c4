"""Trainer engines: one file each, behind :class:`Engine`.

Engine modules are imported by name on demand (:func:`get`, :mod:`speedopt.engines._registry`), and import their
trainer only inside their methods, so importing speedopt never imports a trainer. A command resolves its engine
once, as an :class:`EngineSpec` (the engine's name and its checkout), and carries that.
"""

from __future__ import annotations

from speedopt.engines._base import (
    MODES,
    Clock,
    Dialect,
    Engine,
    EngineReport,
    LabelCacheBuild,
    ProbeRun,
    ProbeScores,
    SplitLabels,
    TrainRun,
)
from speedopt.engines._common import PG_TIMEOUT_ENV, ddp_rank
from speedopt.engines._registry import DEFAULT, NAMES, EngineName, engine_class, engine_name, get, words
from speedopt.engines._silent import WATCHED as SILENT_STATUS
from speedopt.engines._spec import EngineSpec, RecordsEngine
from speedopt.engines._words import Words

__all__ = [
    "MODES",
    "Clock",
    "DEFAULT",
    "Dialect",
    "Engine",
    "EngineName",
    "EngineReport",
    "EngineSpec",
    "RecordsEngine",
    "LabelCacheBuild",
    "NAMES",
    "ProbeRun",
    "ProbeScores",
    "SplitLabels",
    "TrainRun",
    "Words",
    "PG_TIMEOUT_ENV",
    "SILENT_STATUS",
    "ddp_rank",
    "engine_class",
    "engine_name",
    "get",
    "words",
]
