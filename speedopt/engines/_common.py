"""What both engines share: version lookup, the frozen-layer scan, timing a trainer's validation pass,
the "workers requested vs ran" note, the device sync before a step's end is clocked, and taking a
subset's labels from a full split's label cache."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import itertools
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from speedopt.engines._base import SplitLabels

T = TypeVar("T")


def package_version(name: str) -> str | None:
    """Installed version of a distribution without importing it (None when not installed)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def preload_modules(*names: str) -> None:
    """Import ``names`` where installed, for a warm worker to fork its jobs from (:meth:`Engine.preload`).

    Imported in an empty working folder: matplotlib reads a ``matplotlibrc`` in the working directory at
    import, and a job started cold imports it in its own empty private folder.
    """
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="speedopt-preload-") as empty:
        os.chdir(empty)
        try:
            for name in names:
                with contextlib.suppress(ImportError):
                    importlib.import_module(name)
        finally:
            os.chdir(here)


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


def built_cache(known: Iterable[SplitLabels], cache: str | os.PathLike[str]) -> SplitLabels | None:
    """The full split's cache built for the study whose file is ``cache`` (compared as real paths), if any."""
    key = os.path.realpath(cache)
    return next((k for k in known if os.path.realpath(k.cache) == key), None)


def built_split(known: Iterable[SplitLabels], split: str) -> SplitLabels | None:
    """The full split's cache built for the study for ``split`` ("train", "val"), if any."""
    return next((k for k in known if k.split == split), None)


def scan_counts(stored: Mapping[str, Any]) -> dict[str, Any]:
    """What a trainer's label check listed and dropped, from its label cache: ``results`` (found, missing,
    empty, corrupt, total: both trainers store that tuple) and the first "ignoring corrupt" message, as
    :class:`SplitLabels` fields (empty when the cache holds no such record)."""
    results = stored.get("results")
    try:
        corrupt, listed = int(results[3]), int(results[4])  # type: ignore[index]
    except (TypeError, IndexError, ValueError):
        return {}
    told = (re.sub(r"\x1b\[[0-9;]*m", "", str(m)).strip() for m in stored.get("msgs") or ())
    problem = next((m for m in told if "corrupt" in m), "")
    return {"listed": listed, "corrupt": corrupt, "problem": problem[:300]}


def subset_entries(by_file: Mapping[str, T], images: Sequence[str], msgs: Sequence[str]) -> tuple[list[tuple[str, T]], int] | None:
    """The cache entries of ``images`` (a subset of the split the cache was built on), in order, and how many
    of them the trainer dropped as corrupt (no entry, and the scan's messages name the file).

    None when an image is neither: the cache is not of these files, so the trainer must scan them itself.
    """
    told = "\n".join(msgs)
    picked: list[tuple[str, T]] = []
    corrupt = 0
    for image in images:
        entry = by_file.get(image)
        if entry is not None:
            picked.append((image, entry))
        elif image in told:
            corrupt += 1
        else:
            return None
    return picked, corrupt


def trainer_paths(images: Sequence[str]) -> list[str]:
    """Image paths spelled as a trainer lists a resolved split folder: each parent folder resolved once
    (the trainers key their label caches by these strings; speedopt's listing may hold ``..`` or links)."""
    parents: dict[str, str] = {}
    out = []
    for image in images:
        path = Path(image)
        parent = str(path.parent)
        if parent not in parents:
            parents[parent] = os.path.realpath(parent)
        out.append(os.path.join(parents[parent], path.name))
    return out


def images_read(files: Sequence[str], sample: int = 30) -> tuple[float | None, int | None]:
    """Mean file size (bytes, every file) and mean long side (pixels, from the headers of up to ``sample``
    evenly spaced files) of the images a trainer listed: what a trial really read, not what was asked."""
    from PIL import Image

    if not files:
        return None, None
    sizes = [os.stat(f).st_size for f in files if os.path.exists(f)]
    sides = []
    for f in files[:: max(1, len(files) // sample)][:sample]:
        try:
            with Image.open(f) as im:
                sides.append(max(im.size))
        except (OSError, ValueError, SyntaxError):  # the trainer skips an unreadable image too
            continue
    mean_bytes = sum(sizes) / len(sizes) if sizes else None
    return mean_bytes, round(sum(sides) / len(sides)) if sides else None


PG_TIMEOUT_ENV = "SPEEDOPT_PG_TIMEOUT_S"  # a launch's collective timeout in seconds, for ranks whose trainer takes one


def ddp_rank() -> tuple[int, int]:
    """This process's ``(RANK, WORLD_SIZE)`` as ``torch.distributed.run`` sets them; ``(0, 1)`` outside a launch.

    Read from the environment the launcher gives each rank, the same variables both trainers read.
    """
    try:
        return int(os.environ.get("RANK", "0")), max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 0, 1


def drain(loader: Iterable[Any], clock: Any, count: Callable[[Any], int]) -> None:
    """The data ceiling: take the trainer's own train loader's batches as fast as it yields them (no model
    step; pass after pass, as epochs would) until ``clock`` ends it; ``count`` gives a batch's images."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            clock.batch_start()
            clock.batch_end(count(batch))
        if empty:
            raise RuntimeError("the train loader yielded no batch")


HELD = 4  # batches the compute ceiling cycles through (SameBatch)


class SameBatch:
    """The compute ceiling's loader: the trainer's first :data:`HELD` batches (fewer when an epoch has
    fewer), taken once and moved with ``move``, yielded in turn as many times per pass as the real loader
    would yield batches. Everything else (``len``, ``sampler``, ``dataset``, ``reset``, ``close``) is the
    real loader's. A dict batch is yielded as a shallow copy: trainers replace its entries (Ultralytics
    divides ``img`` by 255).

    Several batches, not one: a step's cost depends on what the batch holds (the loss assigns every
    target to anchors), and one batch is a sample of one. Issue 29 saw a one-batch ceiling read 13-16%
    below the trials beside it; whether the batch or the noise between jobs did it is not established
    (benchmarks/RESULTS.md), so a trial is also checked against its ceiling (measure.Ceilings.fault).
    """

    def __init__(self, loader: Any, move: Callable[[Any], Any]):
        self._loader, self._move = loader, move
        self._batches: list[Any] = []

    def __iter__(self) -> Any:
        if not self._batches:
            held = itertools.islice(self._loader, max(1, min(HELD, len(self._loader))))
            self._batches = [self._move(batch) for batch in held]
            if not self._batches:
                raise RuntimeError("the train loader yielded no batch")
        for i in range(len(self._loader)):
            batch = self._batches[i % len(self._batches)]
            yield dict(batch) if isinstance(batch, dict) else batch

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def to_device(batch: Any, device: Any) -> Any:
    """``batch`` (a dict, tuple or list of tensors and other things) with every tensor on ``device``."""
    import torch

    def move(value: Any) -> Any:
        return value.to(device) if isinstance(value, torch.Tensor) else value

    if isinstance(batch, dict):
        return {k: move(v) for k, v in batch.items()}
    return type(batch)(move(v) for v in batch) if isinstance(batch, (tuple, list)) else move(batch)
