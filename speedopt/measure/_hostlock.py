"""A host-wide lock so that no two trials on one machine are measured at the same time.

Two searches (or workers) on one host would otherwise share CPU cores, disk and GPU and corrupt
each other's numbers. The lock is an ``flock`` on a file in the system temp folder: the kernel
releases it when its holder dies, even by SIGKILL, so a crashed search never blocks the next one.

``SPEEDOPT_HOST_LOCK`` names another lock file, read at each use: the tests point it at a private
file so they never queue behind (or block) a real search on the same host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

LOCK_ENV = "SPEEDOPT_HOST_LOCK"


def lock_path() -> Path:
    """The lock file shared by every speedopt process on this host (``SPEEDOPT_HOST_LOCK`` overrides it)."""
    override = os.environ.get(LOCK_ENV)
    return Path(override) if override else Path(tempfile.gettempdir()) / "speedopt-measure.lock"


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        return "another speedopt process"
    return f"pid {data.get('pid', '?')} (study {data.get('study', '?')})"


@contextlib.contextmanager
def measuring(owner: str, on_wait: Callable[[str], None] | None = None) -> Iterator[float]:
    """Hold the host lock for one measurement; yields the seconds spent waiting for it."""
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        started = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait(f"waiting for the host measurement lock held by {_holder(fd)}: trials on one host never overlap")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "study": owner}).encode(), 0)
        yield time.monotonic() - started
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
