"""What both engines share: version lookup, the frozen-layer scan, timing a trainer's validation pass,
the "workers requested vs ran" note, and the device sync before a step's end is clocked."""

from __future__ import annotations

import functools
import importlib.metadata
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from speedopt.knobs import MODEL_SCALES

T = TypeVar("T")


def package_version(name: str) -> str | None:
    """Installed version of a distribution without importing it (None when not installed)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def model_argument(model: str) -> str:
    """The trainer's model value: ``yolov5s`` -> ``yolov5s.yaml`` (built locally, never downloaded)."""
    return f"{model}.yaml" if model in MODEL_SCALES else model


def frozen_prefix(named_parameters: Iterable[tuple[str, Any]], skip: Callable[[str], bool] = lambda name: False) -> int:
    """How many leading layers (``model.N.``) have no trainable parameter: the freeze the model runs.

    ``skip`` names parameters that never train whatever the freeze (Ultralytics' fixed DFL weights).
    """
    frozen = set()
    for name, param in named_parameters:
        match = re.match(r"model\.(\d+)\.", name)
        if match and not param.requires_grad and not skip(name):
            frozen.add(int(match.group(1)))
    layers = 0
    while layers in frozen:
        layers += 1
    return layers


def timed(fn: Callable[..., T], spent: list[float]) -> Callable[..., T]:
    """``fn`` wrapped to append the seconds of each call to ``spent`` (a trainer's validation pass)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    return wrapper


def workers_note(requested: int, ran: int, why: str) -> tuple[str, ...]:
    """A note when the dataloader ran another number of workers than asked (``why``: the trainer's rule)."""
    if requested == ran:
        return ()
    return (f"workers={requested} requested, the dataloader ran {ran} ({why})",)


def sync(device: Any) -> None:
    """Wait for queued CUDA work, so the clock times the step and not its launch (no-op off CUDA)."""
    if getattr(device, "type", None) == "cuda":
        import torch

        torch.cuda.synchronize(device)
