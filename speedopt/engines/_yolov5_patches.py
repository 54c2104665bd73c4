"""The classic engine's patches, all applied inside the job process only, to train.py's own namespace in
:func:`patch_module` (nothing of the user's checkout is written):

- ``check_amp`` -> AMP exactly on CUDA, without the self-check download (and records what it chose);
- ``check_git_status``, ``check_requirements`` -> nothing (a git fetch; a pip install of what looks missing);
- ``Loggers`` -> :class:`NoLoggers` (wandb, comet, clearml and neptune log in over the network);
- ``attempt_download_from_hub`` (the yolov5 package) -> nothing (asks the Hugging Face hub for --weights);
- ``create_dataloader`` -> wrapped, to read back the train loader and dataset it built;
- ``LoadImagesAndLabels.cache_labels`` (the label scan) -> timed (a trial's ``label_scan_s``);
- ``validate.run`` -> timed, in validation-timing jobs; instant with zero scores in speed trials, whose
  window may cross an epoch end (see :func:`no_validation`): the rest of train.py's epoch-end work
  (scheduler, EMA attributes, the loader's next pass) then lands in the next step, counted as waiting
  for data (see :class:`~speedopt.measure._clock.StepClock`);

- ``numpy.trapz`` -> ``numpy.trapezoid`` where NumPy 2.4 removed it (the classic metrics call it).

And the clean-up after train.py: :func:`close_loaders` shuts down the workers of every loader it built.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

from speedopt.engines._common import SameBatch, timed, to_device


class NoLoggers:
    """Stands in for train.py's ``Loggers`` in a trial.

    The real one starts every installed integration (wandb and comet log in over the network, clearml,
    neptune) and writes TensorBoard/CSV files; a speed trial needs none of it. It has no public methods,
    so train.py registers no logger callbacks; ``remote_dataset`` is the one attribute train.py reads.
    """

    remote_dataset = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


def patch_module(module: Any, seen: dict[str, Any]) -> None:
    """Every patch of this engine (see the module docstring), applied to train.py's own namespace.

    ``seen`` gets what the patched functions observe: ``amp`` (what check_amp chose), ``loader`` and
    ``dataset`` (the train loader train.py built), ``loaders`` (every loader, for :func:`close_loaders`).
    """
    import numpy as np

    if not hasattr(np, "trapz"):
        np.trapz = np.trapezoid  # type: ignore[attr-defined]
    module.check_git_status = lambda *args, **kwargs: None
    module.check_requirements = lambda *args, **kwargs: None
    module.Loggers = NoLoggers
    if hasattr(module, "attempt_download_from_hub"):
        module.attempt_download_from_hub = lambda *args, **kwargs: None

    def amp_rule(model: Any) -> bool:
        # check_amp() minus its self-check: AMP on exactly on CUDA, as train.py decides when the check passes.
        seen["amp"] = next(model.parameters()).device.type == "cuda"
        return bool(seen["amp"])

    module.check_amp = amp_rule
    create_dataloader = module.create_dataloader
    dataloaders = sys.modules[create_dataloader.__module__]
    dataset_class = dataloaders.LoadImagesAndLabels
    if "_speedopt_scan" not in dataset_class.__dict__:  # once per process: the original stays on the class
        dataset_class._speedopt_scan = dataset_class.cache_labels
    seen["dataloaders"], seen["scans"] = dataloaders, []
    dataset_class.cache_labels = timed(dataset_class._speedopt_scan, seen["scans"])

    def recorded(*args: Any, **kwargs: Any) -> Any:
        loader, dataset = create_dataloader(*args, **kwargs)
        seen.setdefault("loaders", []).append(loader)
        if kwargs.get("augment") and "loader" not in seen:  # the train loader (validation's has no augment)
            seen["loader"], seen["dataset"] = loader, dataset
            if seen.get("mode") == "compute":  # the compute ceiling: train.py's loop gets one batch, kept on the device
                return SameBatch(loader, lambda batch: to_device(batch, _torch_device(seen["device"]))), dataset
        elif not kwargs.get("augment"):
            seen.setdefault("val_dataset", dataset)
        return loader, dataset

    module.create_dataloader = recorded


def no_validation(real: Callable[..., Any]) -> Callable[..., Any]:
    """A validation pass that returns at once with zero scores, in the shape ``real`` returns.

    A trial's window may cross an epoch end (a small train set, a long window). ``--noval`` cannot
    keep validation out of it: the yolov5 package's train.py then fails at the first non-final epoch
    end (its ``map50s`` is only set by validation). So trials validate every epoch, instantly; the
    projection times the real validation pass separately. The package's val.run returns
    (results, maps, map50s, times), upstream's (results, maps, times).
    """
    import numpy as np

    with_map50s = "map50s" in inspect.getsource(real)

    def instant(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        nc = int(getattr(kwargs.get("model"), "nc", 1))
        results = (0.0,) * 7
        return (results, np.zeros(nc), np.zeros(nc), (0.0, 0.0, 0.0)) if with_map50s else (results, np.zeros(nc), (0.0, 0.0, 0.0))

    return instant


def close_loaders(seen: dict[str, Any]) -> None:
    """Shut down the workers of every loader train.py built (its loaders start them at creation).

    A worker that is shut down exits cleanly and removes its temp files (multiprocessing's ``pymp-*``
    folder, made for passing tensors); one killed with the job's process group would leave them.
    """
    for loader in seen.get("loaders", ()):
        shutdown = getattr(getattr(loader, "iterator", None), "_shutdown_workers", None)
        if shutdown is not None:
            with contextlib.suppress(Exception):
                shutdown()


def _torch_device(device: str) -> Any:
    """train.py's device for ``--device``: the CPU, or the first GPU listed (a ceiling runs on one)."""
    import torch

    return torch.device("cpu") if device == "cpu" else torch.device("cuda", int(device.split(",")[0]))
