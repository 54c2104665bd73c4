"""Advice on the per-epoch work outside the training step: validation, checkpoint saves, loggers.

Each piece is said in the trainer's own terms and with what it saves on the projected run. Ultralytics'
epoch loop (``BaseTrainer._do_train``, 8.4) validates when ``self.args.val or final_epoch`` (or an early
stop is possible), right after the ``on_train_epoch_end`` callbacks: a callback there that sets
``trainer.args.val`` decides that epoch's validation, so it can validate every k epochs.
"""

from __future__ import annotations

import math

from speedopt.engines import Words
from speedopt.reporting._loggers import LoggerIntegration
from speedopt.reporting._projection import Projection

SHARE = 0.10  # advise when validation (or saving) is more than this share of an epoch

CALLBACK = '''from ultralytics import YOLO

K = {k}  # validate every K epochs (the trainer still validates after the final epoch)


def validate_every_k(trainer):
    # runs right before the epoch-end validation, which the trainer does only when args.val is True
    trainer.args.val = (trainer.epoch + 1) % K == 0


model = YOLO(...)  # as in the recommended command
model.add_callback("on_train_epoch_end", validate_every_k)
model.train(...)  # the recommended arguments'''


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def interval(p: Projection, share: float = SHARE) -> int:
    """The smallest validation interval k (>= 2, at most the epochs) that brings validation to ``share`` of an epoch."""
    val, rest = p.val_s or 0.0, p.epoch_train_s + (p.save_s or 0.0)
    k = math.ceil(val * (1 - share) / (share * rest)) if rest > 0 else p.epochs
    return max(2, min(k, max(p.epochs, 2)))


def overhead_advice(p: Projection | None, words: Words, loggers: list[LoggerIntegration]) -> list[str]:
    """The report's section on per-epoch overheads: what each costs, and advice on what is above :data:`SHARE`
    of an epoch (empty without a projection and without an online logger), in the trainer's own ``words``."""
    lines: list[str] = [] if p is None else [_measured(p, loggers), ""]
    if p is not None and p.val_s is not None and p.val_s / p.epoch_s > SHARE:
        lines += _validation(p, words)
    if p is not None and p.save_s is not None and p.save_s / p.epoch_s > SHARE:
        lines += _saves(p, words)
    online = [log for log in loggers if log.online]
    if online:
        lines += _loggers(online, words)
    if not lines:
        return []
    return ["### Per-epoch overheads outside the training step", "", *lines]


def _measured(p: Projection, loggers: list[LoggerIntegration]) -> str:
    """One line: each per-epoch cost with its share of the epoch, and the logger integrations that are on."""

    def part(name: str, seconds: float | None) -> str:
        return f"{name} not timed" if seconds is None else f"{name} {seconds:.2f} s ({100 * seconds / p.epoch_s:.1f}%)"

    on = ", ".join(f"{log.name} ({'online' if log.online else 'local'}; {log.source})" for log in loggers) or "none"
    return (
        f"Per epoch of the projected run ({p.epoch_s:.1f} s): {part('training', p.epoch_train_s)}, "
        f"{part('validation', p.val_s)}, {part('checkpoint saves', p.save_s)}; advice follows where a part is over "
        f"{100 * SHARE:.0f}% of an epoch. Logger integrations on for this trainer here: {on}."
    )


def _validation(p: Projection, words: Words) -> list[str]:
    val = p.val_s or 0.0
    share = val / p.epoch_s
    lines = [
        f"Validation is {100 * share:.0f}% of each epoch ({val:.1f} s of {p.epoch_s:.1f} s) and "
        f"{_minutes(p.epochs * val)} of the projected {p.epochs}-epoch run.",
        "- " + words.noval.format(saves=_minutes(p.epochs * val * (1 - 1 / p.epochs))),
    ]
    if not words.python_form:  # no callbacks: validating every k epochs is not the user's to set
        return lines + [""]
    k = interval(p)
    lines += [
        f"- Or validate every {k} epochs (Python form; saves about {_minutes(p.epochs * val * (1 - 1 / k))} = "
        f"{p.epochs} epochs x {val:.1f} s x (1 - 1/{k})):",
        "",
        "```python",
        CALLBACK.format(k=k),
        "```",
        "",
        "On epochs without validation the trainer keeps the last metrics: early stopping (patience) and best.pt "
        "go by the last validated epoch (best.pt may be rewritten with weights not yet validated).",
        "",
    ]
    return lines


def _saves(p: Projection, words: Words) -> list[str]:
    save = p.save_s or 0.0
    lines = [
        f"Checkpoint saves are {100 * save / p.epoch_s:.0f}% of each epoch ({save:.2f} s, last.pt and best.pt: "
        f"an upper bound) and {_minutes(p.epochs * save)} of the projected run."
    ]
    return lines + [words.nosave.format(saves=_minutes(p.epochs * save * (1 - 1 / p.epochs))), ""]


def _loggers(online: list[LoggerIntegration], words: Words) -> list[str]:
    lines = [
        "Online loggers on this machine: they send over the network during training and can stall it on a slow "
        "network (speedopt's trials ran without them, so the projection does not include them):",
    ]
    lines += [f"- {log.name} ({log.source}): turn it off with {log.how_off(words)}." for log in online]
    return lines + [""]
