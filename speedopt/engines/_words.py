"""What a user types to their own trainer, per :data:`~speedopt.engines.Dialect`: the words the recommended
command, the report's advice and ``speedopt doctor`` use.

The one place outside an engine's own module where the dialects differ: reporting reads the fields of
:func:`words` instead of testing which trainer a study ran, so a third trainer with a dialect of its own adds
one :class:`Words` here (and its command's spelling in :mod:`speedopt.command`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from speedopt.engines._base import Dialect


@dataclass(frozen=True)
class Words:
    """The words of one dialect. Templates take ``{saves}`` (the time saved) or ``{name}``/``{package}`` (a logger)."""

    dialect: Dialect
    entry: str  # how the training command starts
    python_form: bool  # a ``YOLO(...).train(...)`` form exists, with callbacks (validate every k epochs)
    noval: str  # validate only after the final epoch, and what it saves
    nosave: str  # save only the final checkpoint, and what it saves
    logger_source: Literal["settings", "installed"]  # which loggers the run loads: a settings file's, or every installed one
    logger_off: str  # how to turn a logger integration off
    checkout: str | None  # where the command runs when the study names no checkout (None: anywhere)
    checkout_or: str | None  # the same, in a sentence that goes on


YOLO = Words(
    dialect="yolo",
    entry="yolo detect train",
    python_form=True,
    noval="`val=False`: the trainer validates only after the final epoch: saves about {saves}.",
    nosave=(
        "- For exploration runs, `save=False` (the final epoch is still saved): saves about {saves}; no resume "
        "from a crash. Keep `save_period=-1` (the default): a positive one writes one more file every that many epochs."
    ),
    logger_source="settings",
    logger_off="`yolo settings {name}=False`",
    checkout=None,
    checkout_or=None,
)

TRAIN_PY = Words(
    dialect="train.py",
    entry="python train.py",
    python_form=False,
    noval=(
        "`--noval`: train.py validates only after the final epoch: saves about {saves}. "
        "Early stopping and best.pt then go by the final epoch only."
    ),
    nosave="- For exploration runs, `--nosave` (only the final checkpoint): saves about {saves}; no resume from a crash.",
    logger_source="installed",
    logger_off="`pip uninstall {package}`",
    checkout="a clone of ultralytics/yolov5 (or python -m yolov5.train)",
    checkout_or="a clone of ultralytics/yolov5, or python -m yolov5.train with the same flags",
)

_WORDS: dict[Dialect, Words] = {"yolo": YOLO, "train.py": TRAIN_PY}


def words_of(dialect: Dialect) -> Words:
    """The words of ``dialect``."""
    return _WORDS[dialect]
