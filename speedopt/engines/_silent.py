"""What ran, not what was asked: the knobs a trainer changes behind the user's back, as closed verdicts.

Trainers change a run without failing it. Ultralytics halves the batch after an out-of-memory error in the
first epoch (up to three times, since 8.4.13), falls back to no cache when a RAM or disk cache fails its
space check, turns AMP off when its AMP check fails, trains eager when its compile pre-check finds no
inductor backend, ignores channels_last off CUDA, and sets deterministic algorithms only on torch 2.0 or
newer. Classic ``train.py`` caps the batch at the train set and floors imgsz. A trial that ran such a
change measured another config than the one asked: crediting the request with that speed would be a lie.
So each engine reads the knobs back from its trainer after set-up and after the first steps (its
``knobs_as_run``), and :func:`silent_changes` compares them with the request. Every change is one
:class:`SilentChange` with the trial status it makes (``oom`` for a batch the trainer shrank, ``infeasible``
for the rest), and :func:`reject` ends the trial with the first one.

Workers are not in the set: both trainers cap them by rule (the CPU cores, the batches per epoch; 0 on the
CPU for ``yolo``), and the engines fix or note them (:meth:`~speedopt.engines.Engine.fixed_knobs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from speedopt.knobs import Knobs, value_text
from speedopt.status import Status, TrialRejected

#: The knobs a trainer may change silently, and the status a trial that ran the change gets.
WATCHED: Mapping[str, Status] = {
    "batch": Status.OOM,
    **dict.fromkeys(("cache", "amp", "imgsz", "compile", "channels_last", "deterministic"), Status.INFEASIBLE),
}
#: Asked values that leave the choice to the trainer: whatever it runs is what was asked (recorded as run).
DEFERRED: Mapping[str, object] = {"channels_last": "default"}


@dataclass(frozen=True)
class SilentChange:
    """One knob the trainer ran otherwise than asked, why, and the status the trial ends with."""

    knob: str
    asked: Any
    ran: Any
    why: str
    status: Status

    def text(self) -> str:
        """``cache=ram asked, the trainer ran cache=none (its space check found too little free RAM ...)``."""
        return (f"{self.knob}={value_text(self.asked)} asked, the trainer ran {self.knob}={value_text(self.ran)} "
                f"({self.why}): the trial is not the config asked")


def silent_changes(asked: Knobs, ran: Knobs, why: Mapping[str, str], knobs: Iterable[str] = tuple(WATCHED)) -> list[SilentChange]:
    """The watched ``knobs`` that ``ran`` (read back from the trainer) holds otherwise than ``asked``, each with
    the trainer's rule from ``why`` (by knob; a generic line where the engine gives none)."""
    out = []
    for knob in knobs:
        before, after = getattr(asked, knob), getattr(ran, knob)
        if before != after and DEFERRED.get(knob, object()) != before:
            out.append(SilentChange(knob, before, after, why.get(knob, "the trainer's own rule"), WATCHED[knob]))
    return out


def reject(changes: Iterable[SilentChange]) -> None:
    """End the trial with the first change's status and its text (TrialRejected); nothing when there is none."""
    for change in changes:
        raise TrialRejected(change.status, change.text())
