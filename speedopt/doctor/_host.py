"""The host side of a pre-flight: CPU cores and the workers the trainers would run, the CPUs a loader worker may
use, RAM, ``/dev/shm`` (for the loader's batches and for the RAM cache)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

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
    # fewer usable than logical (taskset, a cpuset): the affinity check warns, with the workers to pass
    if usable < 4:
        return Check("cores", Level.WARN, detail + ": few cores to decode images, so the data path is likely the bottleneck",
                     "a resized copy (speedopt prepare) or cache=ram takes decoding off the loop")
    return Check("cores", Level.OK, detail)


def affinity(gpus: int, cpus: frozenset[int] | None, logical: int) -> Check:
    """The CPUs a loader worker may run on: it inherits this process's affinity (``cpus``, from :func:`allowed_cpus`;
    None where ``os.sched_getaffinity`` does not exist), so workers beyond them only time-share them."""
    if cpus is None:
        return Check("affinity", Level.OK, f"os.sched_getaffinity does not exist on {sys.platform}: the CPUs a loader "
                     f"worker may use are not known here ({logical} logical)")
    listed = _ranges(cpus)
    if len(cpus) < logical:
        return Check(
            "affinity", Level.WARN,
            f"this process may run on {len(cpus)} of {logical} CPUs ({listed}), and each loader worker inherits that: "
            f"workers beyond {len(cpus)} only time-share them, while the trainers size their workers by all {logical}",
            f"pass workers={max(1, len(cpus) // max(1, gpus))} or fewer, or widen the affinity (taskset, numactl, "
            "docker --cpuset-cpus)",
        )
    return Check("affinity", Level.OK, f"each loader worker inherits this process's CPU affinity: all {logical} CPUs ({listed})")


def allowed_cpus() -> frozenset[int] | None:
    """The CPUs this process (and every loader worker it starts) may run on; None where the OS cannot say."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    return frozenset(getaffinity(0)) if getaffinity else None


def _ranges(cpus: frozenset[int]) -> str:
    """``0-3,8``: the CPU numbers as ``taskset -c`` writes them."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs) or "none"


class ShmUsage(NamedTuple):
    """Bytes of a shared-memory mount: its size and what is free now."""

    total: int
    free: int


def shm_usage(path: Path = SHM) -> ShmUsage | None:
    """The size and free space of ``path`` (``/dev/shm``); None where there is none (not Linux, or not mounted)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return ShmUsage(usage.total, usage.free)


def shm_cache(cache: int | None, knobs: Knobs, usage: ShmUsage | None, path: Path = SHM) -> Check:
    """``/dev/shm`` against the RAM cache (``cache`` bytes at imgsz; None without --data). Ultralytics (its PR #26086)
    shares the cache with spawned loader workers through shared memory; where ``/dev/shm`` is short, each worker gets
    its own pickled copy, so RAM grows with the workers. Docker's default ``/dev/shm`` is 64 MB."""
    if usage is None:
        where = "not Linux" if not sys.platform.startswith("linux") else "not mounted"
        level = Level.WARN if sys.platform.startswith("linux") else Level.OK
        return Check("shm-cache", level, f"no {path} here ({where}): the RAM cache's sharing with loader workers is not checked",
                     "mount a tmpfs there (docker run --shm-size=..., or --ipc=host)" if level is Level.WARN else "")
    space = f"{path} {_size(usage.free)} free of {_size(usage.total)}"
    if cache is None:
        return Check("shm-cache", Level.OK, f"{space} (give --data to check it against cache=ram)")
    what = f"{space}; cache=ram at imgsz={knobs.imgsz} holds about {_size(cache)}"
    if knobs.workers == 0 or cache <= usage.free:
        return Check("shm-cache", Level.OK, what + ": loader workers can share it")
    return Check(
        "shm-cache", Level.WARN,
        f"{what}: too little to share it, so each spawned loader worker gets its own copy (workers={knobs.workers}: "
        f"about {_size(knobs.workers * cache)} more RAM)",
        f"docker run --shm-size={max(1, -(-2 * cache // _GIB))}g (or --ipc=host), or cache=disk",
    )


def _size(n: float) -> str:
    return f"{n / _GIB:.1f} GiB" if n >= _GIB else f"{n / 2**20:.0f} MiB"


def shm_need(knobs: Knobs, prefetch: int) -> int:
    """Bytes of shared memory the loader workers hold: each in-flight batch (uint8, 3 x imgsz^2 per image)
    is passed to the trainer through ``/dev/shm``, ``workers x prefetch`` batches at a time."""
    return knobs.workers * prefetch * knobs.batch * 3 * knobs.imgsz**2


def shm(knobs: Knobs, prefetch: int, path: Path = SHM) -> Check:
    """``/dev/shm`` against what the loader workers need: too small is the classic "DataLoader worker killed by bus error"."""
    need = shm_need(knobs, prefetch)
    if knobs.workers == 0:
        return Check("shm", Level.OK, "workers=0: no loader workers, no shared memory needed")
    usage = shm_usage(path)
    if usage is None:
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
