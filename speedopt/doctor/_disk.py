"""Where the images live: the filesystem under the dataset, and how fast its images read (measured, a few seconds).

Every epoch reads every image (unless cached), so a dataset on a network mount pays the network each
epoch, and an overlay (a container's own layer) loses what trainers write beside the images. Read
throughput is measured on a sample of the train images, sequentially (sorted, as listed) and at random
(shuffled), each file's page cache dropped first where the kernel allows (``posix_fadvise``), so a
warm cache does not pass for a fast disk.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.doctor._check import Check, Level

NETWORK = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
    "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "fuse.glusterfs", "fuse.juicefs", "fuse.goofys",
})
MIN_RANDOM_IMAGES_PER_S = 200.0  # below this, reading alone caps training under what one GPU trains small models at


@dataclass(frozen=True)
class Mount:
    """The mount a path is under (from psutil's partitions)."""

    mountpoint: str
    fstype: str
    device: str


def mount_of(path: Path, partitions: Sequence[Any] | None = None) -> Mount | None:
    """The mount holding ``path`` (the longest mountpoint that contains it); ``partitions`` as psutil gives them."""
    import psutil

    parts = psutil.disk_partitions(all=True) if partitions is None else partitions
    target = str(path.resolve())
    best: Mount | None = None
    for part in parts:
        point = str(part.mountpoint)
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best.mountpoint)):
            best = Mount(point, str(part.fstype), str(part.device))
    return best


def filesystem(path: Path, partitions: Sequence[Any] | None = None) -> Check:
    """The dataset's filesystem: local disk, network mount or overlay."""
    if not path.exists():
        return Check("filesystem", Level.FAIL, f"{path} does not exist", "give the dataset's data.yaml with --data")
    mount = mount_of(path, partitions)
    if mount is None:
        return Check("filesystem", Level.WARN, f"no mount found for {path}")
    where = f"{path} is on {mount.fstype} ({mount.device} at {mount.mountpoint})"
    if mount.fstype in NETWORK or mount.fstype.startswith("fuse."):
        return Check("filesystem", Level.WARN, where + ": a network or FUSE mount, read again every epoch",
                     "copy the dataset (or a resized copy: speedopt prepare --out on a local disk) to a local disk, or cache=ram")
    if mount.fstype == "overlay":
        return Check("filesystem", Level.WARN, where + ": a container's layer; what trainers write beside the images "
                     "(labels/*.cache, cache=disk .npy files) is lost with the container", "mount the dataset as a volume")
    return Check("filesystem", Level.OK, where + (": in RAM" if mount.fstype == "tmpfs" else ": local"))


def _drop_cache(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):
        pass
    finally:
        os.close(fd)


def _read_all(files: Sequence[Path], budget_s: float) -> tuple[int, int, float]:
    """(files read, bytes, seconds): reads whole files until done or ``budget_s`` has passed."""
    started, count, size = time.perf_counter(), 0, 0
    for path in files:
        try:
            with open(path, "rb", buffering=0) as handle:
                while chunk := handle.read(1 << 20):
                    size += len(chunk)
        except OSError:
            continue
        count += 1
        if time.perf_counter() - started > budget_s:
            break
    return count, size, time.perf_counter() - started


def read_speed(images: Sequence[Path], budget_s: float = 3.0, sample: int = 200, seed: int = 0) -> Check:
    """Sequential and random read throughput of the train images (each half of ``budget_s`` at most)."""
    if not images:
        return Check("read", Level.WARN, "no train images to read")
    half = max(1, min(sample, len(images) // 2))
    listed = sorted(images)
    ordered, rest = listed[:half], listed[half:] or listed  # distinct files: the first read does not warm the second
    shuffled = random.Random(seed).sample(rest, min(half, len(rest)))
    for path in (*ordered, *shuffled):
        _drop_cache(path)
    parts = []
    rates = []
    for name, files in (("sequential", ordered), ("random", shuffled)):
        count, size, seconds = _read_all(files, budget_s / 2)
        per_s = count / seconds if seconds > 0 else 0.0
        rates.append(per_s)
        parts.append(f"{name} {size / 2**20 / max(seconds, 1e-9):.0f} MB/s ({per_s:.0f} images/s over {count} images)")
    detail = ", ".join(parts) + " (page cache dropped first where the kernel allowed)"
    if rates[1] < MIN_RANDOM_IMAGES_PER_S:
        return Check("read", Level.WARN, detail + f": random reads under {MIN_RANDOM_IMAGES_PER_S:.0f} images/s can cap training",
                     "a local disk, a resized copy (speedopt prepare: smaller files), or cache=ram")
    return Check("read", Level.OK, detail)
