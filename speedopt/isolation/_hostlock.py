"""A host-wide lock so that no two trials on one machine are measured at the same time.

Two searches (or workers) on one host would otherwise share CPU cores, disk and GPU and corrupt
each other's numbers. The lock is an ``flock`` on a file: the kernel releases it when its holder
dies, even by SIGKILL, so a crashed search never blocks the next one.

The file lives in a folder of the user's own in the system temp folder (``speedopt-lock-<uid>``,
mode 0700, checked by :func:`~speedopt.isolation._private.owned_dir`) and is opened without following
links: in the shared temp folder another local user could otherwise plant a link at the lock's path
and make speedopt overwrite the link's target. The price: the lock serialises one user's trials;
two users measuring on one host at once are not kept apart (a lock that other users could create
first would be a lock they control).

``SPEEDOPT_HOST_LOCK`` names another lock file, read at each use: the tests point it at a private
file so they never queue behind (or block) a real search on the same host.

The lock is re-entrant within a thread: a trial holds it across its whole measurement (its disk
cache snapshot and clean-up included) while the job runner inside asks for it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from speedopt.isolation._private import open_private, owned_dir
from speedopt.isolation._process import alive, wait_until

LOCK_ENV = "SPEEDOPT_HOST_LOCK"
_FIX = f"set {LOCK_ENV} to a lock file of yours"
_held = threading.local()
_used = threading.local()  # this thread's measurements under the lock, and its seconds waiting for it


@dataclass(frozen=True)
class LockUse:
    """What one thread did with the host lock so far: the measurements it held it for, and the seconds it
    waited for another process's (never part of a measurement: a search bills them apart)."""

    held: int = 0
    waited_s: float = 0.0


def lock_use() -> LockUse:
    """This thread's :class:`LockUse` since it started (a search compares two to tell what a stage measured)."""
    return LockUse(getattr(_used, "held", 0), getattr(_used, "waited_s", 0.0))


def lock_path() -> Path:
    """The lock file shared by every speedopt process of this user on this host (``SPEEDOPT_HOST_LOCK`` overrides it)."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    return Path(tempfile.gettempdir()) / f"speedopt-lock-{os.getuid()}" / "measure.lock"


def _open_lock() -> int:
    path = lock_path()
    if not os.environ.get(LOCK_ENV):
        owned_dir(path.parent, _FIX)
    return open_private(path, fix=f"remove it, or {_FIX}")


def check_lock() -> Path:
    """The lock file, checked (and created) before anything runs: a planted link or a folder of someone
    else's is refused with one line at once, not after the trial's set-up."""
    os.close(_open_lock())
    return lock_path()




def _recorded(fd: int) -> tuple[int | None, str]:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        return None, "?"
    pid = data.get("pid") if isinstance(data, dict) else None
    study = data.get("study", "?") if isinstance(data, dict) else "?"
    return (pid if isinstance(pid, int) else None), str(study)


def holder_text(fd: int, settle_s: float = 0.5) -> str:
    """Who holds the lock, honestly: the process it names when that one runs, else what is known.

    A new holder records itself just after it takes the lock, so a record naming an exited process
    is re-read for ``settle_s`` before it is reported as stale.
    """
    pid: int | None = None
    study = ""

    def named_alive() -> bool:
        nonlocal pid, study
        pid, study = _recorded(fd)
        return pid is not None and alive(pid)

    if not wait_until(named_alive, settle_s, every_s=0.05):
        return f"held by pid {pid} (study {study})"
    if pid is None:
        return "held by a process that did not record itself"
    return (
        f"held by a process that did not record itself (the lock names pid {pid}, study {study}, "
        "which is no longer running)"
    )


@contextlib.contextmanager
def measuring(owner: str, on_wait: Callable[[str], None] | None = None) -> Iterator[float]:
    """Hold the host lock for one measurement; yields the seconds spent waiting for it.

    Inside a ``measuring`` block of the same thread, another one holds nothing more and yields 0.
    """
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield 0.0
        finally:
            _held.depth -= 1
        return
    fd = _open_lock()
    try:
        started = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait(f"waiting for the host measurement lock {holder_text(fd)}: trials on one host never overlap")
            fcntl.flock(fd, fcntl.LOCK_EX)
            _used.waited_s = getattr(_used, "waited_s", 0.0) + time.monotonic() - started
        _used.held = getattr(_used, "held", 0) + 1
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "study": owner}).encode(), 0)
        _held.depth = 1
        try:
            yield time.monotonic() - started
        finally:
            _held.depth = 0
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
