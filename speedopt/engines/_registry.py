"""The engines by name: which module holds each, and how one is built (:func:`get`) or only read (:func:`engine_class`).

Engine modules are imported by name on demand, and import their trainer only inside their methods, so
reading this registry imports no trainer.
"""

from __future__ import annotations

import importlib
from typing import Literal, get_args

from speedopt.engines._base import Engine
from speedopt.engines._words import Words, words_of
from speedopt.errors import UsageError

Trainer = Literal["ultralytics", "yolov5"]  # the trainers a user picks
EngineName = Literal[Trainer, "standin"]  # and the stand-in: speedopt's own test double (tests/, benchmarks/)

_ENGINES: dict[EngineName, tuple[str, str]] = {
    "ultralytics": ("speedopt.engines.ultralytics", "UltralyticsEngine"),
    "yolov5": ("speedopt.engines.yolov5", "Yolov5Engine"),
    "standin": ("speedopt.engines.standin", "StandinEngine"),  # a tiny net: speedopt's own checks (DDP on CPU)
}

DEFAULT: Trainer = "ultralytics"  # the engine a command runs when it names none (--engine's default)
NAMES: tuple[Trainer, ...] = get_args(Trainer)  # offered to the user; the stand-in is accepted, never listed
_ALL: tuple[EngineName, ...] = get_args(EngineName)


def engine_name(text: str) -> EngineName:
    """``text`` as an engine's name; UsageError naming the trainers when no engine has it (the stand-in unlisted)."""
    for name in _ALL:
        if text == name:
            return name
    raise UsageError(f"unknown engine {text!r}; available: {', '.join(NAMES)}")


def engine_class(name: str) -> type[Engine]:
    """The class of the engine called ``name``, not built: what it declares (its :data:`Dialect`, its
    ``supports_*`` flags) read without checking a checkout; importing it imports no trainer."""
    module, cls = _ENGINES[engine_name(name)]
    found: type[Engine] = getattr(importlib.import_module(module), cls)
    return found


def get(name: str, yolov5_dir: str | None = None) -> Engine:
    """Instantiate the engine called ``name``; ``yolov5_dir`` is the classic engine's checkout (optional)."""
    built = engine_class(name)
    if name == "yolov5":
        return built(yolov5_dir)  # type: ignore[call-arg]
    if yolov5_dir:
        raise UsageError(f"--yolov5-dir is for --engine yolov5 only (this is --engine {name})")
    return built()


def words(name: str) -> Words:
    """What a user types to the trainer of the engine called ``name``: its dialect's :class:`Words`."""
    return words_of(engine_class(name).dialect)
