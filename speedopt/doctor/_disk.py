"""Where the images live: the filesystem under the dataset, and how fast its images read (measured, a few seconds).

Every epoch reads every image (unless cached), so a dataset on a network mount pays the network each
epoch, and an overlay (a container's own layer) loses what trainers write beside the images. Read
throughput is measured on a sample of the train images, sequentially (sorted, as listed) and at random
(shuffled), each file's page cache dropped first where the kernel allows (``posix_fadvise``), so a
warm cache does not pass for a fast disk. Only real images are sampled: a sparse file (a ``truncate``d
2 GB "image" read its holes at memory speed and was the whole sequential sample) or one no image reader
opens is left out, and named.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.data import image_size
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


def _not_an_image(path: Path) -> str | None:
    """Why ``path`` is no sample of the images a trainer reads (None: it is one): a sparse file (holes read
    as zeros at memory speed: a 2 GB ``truncate``d file measured 986 MB/s), or one no image reader opens
    (the trainer drops it)."""
    try:
        stat = path.stat()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    allocated = getattr(stat, "st_blocks", None)
    if allocated is not None and stat.st_size > 1 << 20 and allocated * 512 < stat.st_size // 8:
        return f"sparse: {stat.st_size / 2**20:.0f} MB, {allocated * 512 / 2**20:.0f} MB on disk"
    if image_size(path) is None:
        return "not an image"
    return None


def _sample(listed: Sequence[Path], count: int, skipped: dict[Path, str]) -> list[Path]:
    """Up to ``count`` real images from ``listed``, in its order (those that are not go in ``skipped``)."""
    found: list[Path] = []
    for path in listed:
        if len(found) >= count:
            break
        why = skipped.get(path) or _not_an_image(path)
        if why is None:
            found.append(path)
        else:
            skipped[path] = why
    return found


def _names(files: Sequence[Path]) -> str:
    return files[0].name if len(files) == 1 else f"{files[0].name} .. {files[-1].name}"


def read_speed(images: Sequence[Path], budget_s: float = 3.0, sample: int = 200, seed: int = 0) -> Check:
    """Sequential and random read throughput of the train images (each half of ``budget_s`` at most), over
    real images only: a sparse file or one that is not an image is left out, and named."""
    if not images:
        return Check("read", Level.WARN, "no train images to read")
    half = max(1, min(sample, len(images) // 2))
    listed = sorted(images, key=str)
    skipped: dict[Path, str] = {}
    ordered = _sample(listed, half, skipped)
    rest = listed[listed.index(ordered[-1]) + 1:] if ordered else []  # distinct files: the first read does not warm the second
    shuffled = _sample(random.Random(seed).sample(rest, min(len(rest), 4 * half)), half, skipped) or ordered
    if not ordered:
        first = next(iter(skipped.items()))
        return Check("read", Level.WARN, f"none of the {len(skipped)} train files tried is a real image (e.g. {first[0]}: {first[1]})",
                     "fix or replace the image files")
    for path in (*ordered, *shuffled):
        _drop_cache(path)
    parts = []
    rates = []
    for name, files in (("sequential", ordered), ("random", shuffled)):
        count, size, seconds = _read_all(files, budget_s / 2)
        per_s = count / seconds if seconds > 0 else 0.0
        rates.append(per_s)
        which = f"{_names(files[:count])} in order" if name == "sequential" else f"e.g. {files[0].name}"
        parts.append(f"{name} {size / 2**20 / max(seconds, 1e-9):.0f} MB/s ({per_s:.0f} images/s over {count} images: {which})")
    detail = ", ".join(parts) + " (page cache dropped first where the kernel allowed)"
    if skipped:
        shown = "; ".join(f"{p.name} ({why})" for p, why in list(skipped.items())[:3])
        detail += f"; left out {len(skipped)} file(s) that are no real image: {shown}" + ("; ..." if len(skipped) > 3 else "")
    if rates[1] < MIN_RANDOM_IMAGES_PER_S:
        return Check("read", Level.WARN, detail + f": random reads under {MIN_RANDOM_IMAGES_PER_S:.0f} images/s can cap training",
                     "a local disk, a resized copy (speedopt prepare: smaller files), or cache=ram")
    return Check("read", Level.OK, detail)
