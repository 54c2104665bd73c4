"""Which logger integrations the user's own training run will load, read without importing the trainer.

A logger runs inside the epoch loop (and at each epoch's end); an online one (Weights & Biases, Comet,
ClearML, Neptune, MLflow to a remote server) sends over the network and can stall training on a slow
link. speedopt's trials run with none of them, so the projection does not include them.

Ultralytics: the integrations switched on in the user's settings file (``yolo settings``; read as JSON,
never through ``ultralytics``, whose import would create the file), each active only when its package is
importable. A key missing from the file takes the current Ultralytics default (clearml, comet, dvc,
mlflow, raytune on; tensorboard, wandb off): Ultralytics resets a settings file with a missing key to
its defaults. ``neptune`` counts only where an older settings file still has it switched on.
Classic ``train.py``: every logger whose package is installed (wandb, comet_ml, clearml); TensorBoard
always (local files).
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass

from speedopt import engines
from speedopt.data import settings_file
from speedopt.engines import Words

# settings key -> (the package that makes it active, Ultralytics' default when the key is missing)
_ULTRALYTICS: dict[str, tuple[str, bool]] = {
    "wandb": ("wandb", False),
    "comet": ("comet_ml", True),
    "clearml": ("clearml", True),
    "mlflow": ("mlflow", True),
    "neptune": ("neptune", False),  # no longer in current Ultralytics' settings
    "tensorboard": ("tensorboard", False),
    "dvc": ("dvclive", True),
    "raytune": ("ray", True),
}
_CLASSIC = {"wandb": "wandb", "comet": "comet_ml", "clearml": "clearml"}
_OFFLINE_ENV = {"wandb": ("WANDB_MODE", {"offline", "disabled", "dryrun"}), "comet": ("COMET_MODE", {"offline", "disabled"})}


@dataclass(frozen=True)
class LoggerIntegration:
    """One logger the user's real run loads: its name, its package, whether it sends over the network."""

    name: str  # wandb, comet, clearml, mlflow, neptune, tensorboard, dvc, raytune
    package: str
    online: bool
    source: str  # why it is on: the settings file (and its path), or "installed" (classic)

    def how_off(self, words: Words) -> str:
        """How the user turns it off (or offline) in the trainer's own ``words``."""
        offline = {"wandb": " or `WANDB_MODE=offline`", "comet": " or `COMET_MODE=offline`"}.get(self.name, "")
        return words.logger_off.format(name=self.name, package=self.package) + offline


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _online(name: str) -> bool:
    if name in _OFFLINE_ENV:
        env, offline = _OFFLINE_ENV[name]
        return os.environ.get(env, "").strip().lower() not in offline
    if name == "mlflow":
        return os.environ.get("MLFLOW_TRACKING_URI", "").lower().startswith(("http://", "https://"))
    return name in {"clearml", "neptune"}


def _settings() -> dict[str, object]:
    try:
        data = json.loads(settings_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _installed_loggers() -> list[LoggerIntegration]:
    """Classic ``train.py``: every logger whose package is installed, and TensorBoard always."""
    found = [LoggerIntegration(n, p, _online(n), "installed") for n, p in _CLASSIC.items() if _installed(p)]
    return [*found, LoggerIntegration("tensorboard", "tensorboard", False, "always on in train.py")]


def _settings_loggers() -> list[LoggerIntegration]:
    """Ultralytics: the integrations its settings file switches on (or its defaults), where their package is installed."""
    settings = _settings()
    out = []
    for name, (package, default) in _ULTRALYTICS.items():
        if settings.get(name, default) is True and _installed(package):
            source = f"on in {settings_file()}" if name in settings else "on by Ultralytics' default"
            out.append(LoggerIntegration(name, package, _online(name), source))
    return out


_SOURCES = {"installed": _installed_loggers, "settings": _settings_loggers}


def logger_integrations(engine: str) -> list[LoggerIntegration]:
    """The loggers the user's own run of ``engine`` (``ultralytics`` or ``yolov5``) loads on this machine: what
    its command's dialect loads (its :class:`~speedopt.engines.Words` say: a settings file, or what is installed)."""
    return _SOURCES[engines.words(engine).logger_source]()
