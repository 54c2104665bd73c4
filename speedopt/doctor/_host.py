"""The host side of a pre-flight: CPU cores and the workers the trainers would run, RAM, ``/dev/shm``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from speedopt import machine
from speedopt.doctor._check import Check, Level
from speedopt.knobs import Knobs

SHM = Path("/dev/shm")
_GIB = 2**30


def cores(knobs: Knobs, gpus: int) -> Check:
    """Cores this process may use vs the workers the trainers would start (both cap at ``os.cpu_count() // GPUs``)."""
    usable, logical = machine.cpu_cores(), os.cpu_count() or 1
    per_gpu = max(1, gpus)
    ran = min(logical // per_gpu, knobs.workers)
    if gpus:
        runs = f"the trainers run min(cpu_count // {gpus} GPU(s), workers) = {ran} per GPU"
    else:
        runs = f"on the CPU Ultralytics runs 0, classic train.py min(cpu_count, batch, workers) = {min(ran, knobs.batch)}"
    detail = f"{usable} cores usable ({logical} logical); workers={knobs.workers} asked: {runs}"
    if usable < logical:
        return Check("cores", Level.WARN, detail + f"; only {usable} of {logical} are this process's (affinity or a "
                     "container limit), but the trainers size their workers by all of them", f"pass workers={usable // per_gpu} or fewer")
    if usable < 4:
        return Check("cores", Level.WARN, detail + ": few cores to decode images, so the data path is likely the bottleneck",
                     "a resized copy (speedopt prepare) or cache=ram takes decoding off the loop")
    return Check("cores", Level.OK, detail)


def shm_need(knobs: Knobs, prefetch: int) -> int:
    """Bytes of shared memory the loader workers hold: each in-flight batch (uint8, 3 x imgsz^2 per image)
    is passed to the trainer through ``/dev/shm``, ``workers x prefetch`` batches at a time."""
    return knobs.workers * prefetch * knobs.batch * 3 * knobs.imgsz**2


def shm(knobs: Knobs, prefetch: int, path: Path = SHM) -> Check:
    """``/dev/shm`` against what the loader workers need: too small is the classic "DataLoader worker killed by bus error"."""
    need = shm_need(knobs, prefetch)
    if knobs.workers == 0:
        return Check("shm", Level.OK, "workers=0: no loader workers, no shared memory needed")
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return Check("shm", Level.WARN, f"{path} not found: loader workers need shared memory",
                     "mount a tmpfs there (docker run --shm-size=8g, or --ipc=host)")
    what = (f"{path} {usage.total / _GIB:.1f} GiB ({usage.free / _GIB:.1f} GiB free); workers={knobs.workers} x prefetch {prefetch} "
            f"x batch {knobs.batch} at imgsz {knobs.imgsz} hold about {need / _GIB:.2f} GiB")
    fix = f"give it at least {2 * need / _GIB:.1f} GiB (docker run --shm-size={max(1, round(2 * need / _GIB))}g, or --ipc=host), or fewer workers"
    if need > usage.total:
        return Check("shm", Level.FAIL, what + ": the workers will die with a bus error", fix)
    if need > usage.free:
        return Check("shm", Level.WARN, what + ": more than is free now", fix)
    return Check("shm", Level.OK, what)


def ram(need: int | None, imgsz: int) -> Check:
    """Free RAM against cache=ram for the dataset at imgsz (the trainers' own estimate, with their margin)."""
    import psutil

    memory = psutil.virtual_memory()
    free = f"{memory.available / _GIB:.1f} GiB free of {memory.total / _GIB:.1f} GiB"
    if need is None:
        return Check("ram", Level.OK, f"{free} (give --data to check cache=ram)")
    if need > memory.available:
        return Check("ram", Level.WARN, f"{free}; cache=ram at imgsz={imgsz} needs about {need / _GIB:.1f} GiB: it does not fit",
                     "cache=disk, or a resized copy (speedopt prepare), takes the decode off each epoch instead")
    return Check("ram", Level.OK, f"{free}; cache=ram at imgsz={imgsz} needs about {need / _GIB:.1f} GiB: it fits")
