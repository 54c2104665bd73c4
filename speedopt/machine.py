"""What this machine offers a training run: CPU cores, RAM, CUDA devices.

torch is imported lazily (only when a CUDA question is asked) so `speedopt --help` answers at once.
"""

from __future__ import annotations

import os

from speedopt.errors import UsageError


def cpu_cores() -> int:
    """Cores this process may use (affinity-aware), which bounds useful dataloader workers."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cuda_device_count() -> int:
    """Number of CUDA devices torch can see here (0 on a machine without a working driver)."""
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except RuntimeError:
        return 0


def default_device() -> str:
    """The trainer's default: the first GPU when there is one, else the CPU."""
    return "0" if cuda_device_count() else "cpu"


def parse_device(text: str | None) -> str:
    """Validate a --device value (``cpu``, ``0``, ``0,1``) against the devices that exist here."""
    if text is None:
        return default_device()
    value = text.strip().lower().removeprefix("cuda:")
    if value == "cpu":
        return "cpu"
    try:
        indices = [int(v) for v in value.split(",") if v.strip() != ""]
    except ValueError:
        raise UsageError(f"--device must be cpu, a GPU index like 0, or a list like 0,1; got {text!r}") from None
    if not indices or any(i < 0 for i in indices):
        raise UsageError(f"--device must be cpu, a GPU index like 0, or a list like 0,1; got {text!r}")
    count = cuda_device_count()
    missing = [i for i in indices if i >= count]
    if missing:
        have = f"{count} CUDA device(s) (0-{count - 1})" if count else "no CUDA device"
        raise UsageError(f"--device {text}: CUDA device {missing[0]} does not exist; this machine has {have}; use --device cpu")
    if len(indices) > 1:
        raise UsageError(f"--device {text}: multi-GPU (DDP) trials are not supported yet; measure one GPU, e.g. --device {indices[0]}")
    return ",".join(map(str, indices))
