"""Input checks shared by one trial (:func:`make_request`) and a whole search (:func:`speedopt.search.plan`);
the trial's own options check themselves (:meth:`~speedopt.measure.TrialOptions.check`).

Each raises :class:`~speedopt.errors.UsageError` with one line naming the bad value and the fix, so
bad input never reaches a child process or a storage.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import psutil

from speedopt import defaults, machine
from speedopt.data import Dataset
from speedopt.engines import Engine
from speedopt.errors import UsageError
from speedopt.knobs import Knobs, value_text


def positive(value: float, flag: str, unit: str) -> float:
    """``value`` when it is a finite number above 0; else UsageError naming ``flag``.

    The one check of every duration and size option (trial, search, probe): ``nan`` compares false
    with everything, so a plain ``<= 0`` test lets it through, and a timeout of nan or inf never fires.
    """
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be a positive, finite number of {unit}, got {value:g}")
    return value


def adjust_to_device(knobs: Knobs, engine: Engine, device: str) -> tuple[Knobs, dict[str, str], str]:
    """The knobs as they can run on ``device`` with this trainer, a note per knob it changed, and the device
    they run on (:func:`check_gpus`: a ``gpus=G`` run's first G GPUs; UsageError when it cannot run).

    Knobs the trainer has no switch for take the value it always runs; AMP needs CUDA.
    """
    notes = {}
    for knob, (value, why) in engine.fixed_knobs(device).items():
        if getattr(knobs, knob) != value:  # asked at the value it runs: nothing to say
            knobs = dataclasses.replace(knobs, **{knob: value})
            notes[knob] = f"{knob}={value_text(value)}: {why}"
    if knobs.amp and device == "cpu":
        notes["amp"] = f"amp=off: AMP{' (bf16)' if knobs.amp == 'bf16' else ''} needs CUDA and this runs on the CPU"
        knobs = dataclasses.replace(knobs, amp=False)
    return knobs, notes, check_gpus(knobs, engine, device)


def ram_available(limit_bytes: int | None) -> int:
    """RAM a RAM cache may assume: what is free now, capped by ``--ram-limit``."""
    free = int(psutil.virtual_memory().available)
    return min(free, limit_bytes) if limit_bytes else free


def ram_cache_need(ds: Dataset, imgsz: int) -> int:
    """Bytes cache=ram needs for the whole train split at imgsz, with the trainer's margin."""
    return int(ds.ram_cache_bytes(imgsz) * (1 + defaults.RAM_CACHE_MARGIN))


def ram_cache_refusal(ds: Dataset, imgsz: int, limit_bytes: int | None) -> str | None:
    """Why cache=ram cannot run at imgsz here (None when it fits)."""
    need, free = ram_cache_need(ds, imgsz), ram_available(limit_bytes)
    if need <= free:
        return None
    return (
        f"cache=ram needs about {need / 2**30:.1f} GiB for {len(ds.train_images)} images at imgsz={imgsz} "
        f"(estimate from 30 sampled images, with the trainer's 100% margin) "
        f"but only {free / 2**30:.1f} GiB is available"
        + (" (--ram-limit)" if limit_bytes is not None and free == limit_bytes else "")
    )


def disk_cache_refusal(images: list[Path]) -> str | None:
    """Why cache=disk cannot run on these images (None when it can): a ``.npy`` goes beside each image.

    Both trainers skip the disk cache, with a warning only, where the image folder is not writable;
    a trial would then measure no cache and call it cache=disk.
    """
    for folder in sorted({p.parent for p in images}):
        if not os.access(folder, os.W_OK):
            return (
                f"cache=disk writes a .npy file beside each image, but the dataset folder {folder} is not writable; "
                "make it writable, or use cache=ram or cache=none"
            )
    return None


def check_gpus(knobs: Knobs, engine: Engine, device: str) -> str:
    """The device a ``gpus=G`` run uses (the first G GPUs of ``device``), or one line saying why it cannot run.

    DDP is the trainer's: both real trainers run it on CUDA GPUs only (NCCL); an engine lists where it
    can in ``ddp_devices``. On a ``cpu`` device, G processes need G cores.
    """
    if knobs.gpus == 1:
        return device if device == "cpu" else device.split(",")[0]
    kind = "cpu" if device == "cpu" else "cuda"
    if not engine.ddp_devices:
        raise UsageError(f"gpus={knobs.gpus}: the {engine.name} engine has no multi-GPU (DDP) mode; use gpus=1")
    if kind not in engine.ddp_devices:
        raise UsageError(
            f"gpus={knobs.gpus}: the {engine.name} trainer runs DDP on CUDA GPUs only and this runs on the CPU; "
            "use gpus=1, or --device 0,1 on a machine with GPUs"
        )
    if kind == "cpu" and knobs.gpus > machine.cpu_cores():
        raise UsageError(f"gpus={knobs.gpus}: {knobs.gpus} processes on the CPU need as many cores; this machine has {machine.cpu_cores()}")
    return machine.devices_for(device, knobs.gpus)


def gpus_refusal(knobs: Knobs) -> str | None:
    """Why a DDP run of these knobs cannot run as asked (None when it can): each rank takes batch / gpus."""
    if knobs.batch % knobs.gpus:
        return (
            f"batch={knobs.batch} is not a multiple of gpus={knobs.gpus}: batch is the total across GPUs and each GPU "
            "takes an equal share (classic train.py refuses it; Ultralytics would train a smaller batch than asked)"
        )
    return None
