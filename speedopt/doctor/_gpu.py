"""The GPU side of a pre-flight: torch's CUDA build against the NVIDIA driver, the GPUs torch sees, the device.

The most common "slow training" on a GPU machine is no GPU training at all: a torch build that does
not match the driver makes ``torch.cuda.is_available()`` False and both trainers quietly run on the
CPU. NVML (pynvml) sees the driver and its GPUs without torch, so the two views are compared here.
"""

from __future__ import annotations

import os

from speedopt import machine
from speedopt.doctor._check import Check, Level
from speedopt.errors import UsageError


def _version(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in (text or "").split(".")[:2])
    except ValueError:
        return ()


def torch_build() -> Check:
    """torch and its CUDA build vs the NVIDIA driver: fail when the driver sees GPUs that torch cannot use."""
    import torch

    gpus, driver, cuda_driver = machine.nvml_gpus()
    built = torch.version.cuda
    usable = machine.cuda_device_count()
    build = f"torch {torch.__version__} (built for CUDA {built})" if built else f"torch {torch.__version__} (a CPU-only build)"
    if gpus and not usable:
        return Check(
            "torch", Level.FAIL,
            f"the NVIDIA driver {driver} (CUDA {cuda_driver}) sees {len(gpus)} GPU(s) but {build} cannot use them: "
            "both trainers would quietly train on the CPU",
            f"install a torch build for CUDA {cuda_driver} or older (https://pytorch.org/get-started/locally), or update the driver",
        )
    if not gpus:
        why = "no NVIDIA driver or GPU found (NVML)"
        return Check("torch", Level.WARN, f"{build}; {why}: training runs on the CPU",
                     "on a GPU machine, check the driver with nvidia-smi")
    if built and _version(built) > _version(cuda_driver):
        return Check("torch", Level.WARN, f"{build} is newer than the driver's CUDA {cuda_driver} (driver {driver})",
                     f"update the driver, or install a torch build for CUDA {cuda_driver}")
    return Check("torch", Level.OK, f"{build}, NVIDIA driver {driver} (CUDA {cuda_driver})")


def gpus_visible() -> Check:
    """The GPUs torch sees (name, memory) and what ``CUDA_VISIBLE_DEVICES`` hides."""
    gpus, _, _ = machine.nvml_gpus()
    usable = machine.cuda_device_count()
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    shown = f"CUDA_VISIBLE_DEVICES={mask!r}" if mask is not None else "CUDA_VISIBLE_DEVICES unset"
    if not gpus:
        return Check("gpus", Level.OK if not usable else Level.WARN, f"none ({shown})")
    listed = ", ".join(f"{i}: {g.name} ({g.memory_mb} MB)" for i, g in enumerate(gpus))
    if mask is not None and usable < len(gpus):
        return Check(
            "gpus", Level.WARN,
            f"{shown} leaves torch {usable} of the {len(gpus)} GPUs ({listed}); device 0 in speedopt and the trainer is "
            "the first GPU that variable lists, not physical GPU 0",
            "unset it, or give --device by the numbers torch sees (0..N-1)",
        )
    return Check("gpus", Level.OK, f"{usable} visible to torch: {listed} ({shown})")


def device(text: str | None) -> Check:
    """Where training would run: the device asked for (``--device``), or the trainer's default."""
    try:
        dev = machine.parse_device(text)
    except UsageError as exc:
        return Check("device", Level.FAIL, str(exc))
    if dev == "cpu":
        how = "--device cpu asked for" if text else "no CUDA device, so the trainers' default"
        return Check("device", Level.WARN if not text else Level.OK, f"training runs on the CPU ({how})",
                     "" if text else "expected on a machine without GPUs; on a GPU machine see the torch line")
    return Check("device", Level.OK, f"training runs on CUDA device(s) {dev}")


def fatal(text: str | None) -> Check | None:
    """The first finding that must stop a search before it measures anything (None: none).

    A GPU device that does not exist (``--device 0`` without CUDA), or, unless ``--device cpu`` was asked for,
    GPUs that torch cannot use: the search would measure the CPU and recommend a command that trains there.
    """
    found = device(text)
    if found.level is Level.FAIL:
        return found
    if text is not None and text.strip().lower() == "cpu":
        return None
    build = torch_build()
    if build.level is Level.FAIL:
        return Check(build.name, build.level, build.detail, build.fix + "; or pass --device cpu to measure the CPU anyway")
    return None
