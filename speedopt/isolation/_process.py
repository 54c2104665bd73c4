"""What a process is doing: waiting with a deadline, whether a process or a group still runs, a log's tail.

:func:`wait_until` is every waiting loop of speedopt's process code (a deadline, a callback on each
poll); :func:`alive` is the one answer to "does this process still run", :func:`group_members` to
"what of this process group still runs"; :func:`log_tail` explains how a job ended. Starting and
ending a job is :mod:`speedopt.isolation._job`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil

POLL_S = 0.2  # how often a waiting runner looks at its job (and forwards its progress)


def wait_until(
    ended: Callable[[], bool],
    timeout_s: float,
    on_poll: Callable[[], object] | None = None,
    every_s: float = POLL_S,
    pause: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll ``ended`` until it is true (False) or ``timeout_s`` passes (True: timed out), calling ``on_poll`` each time.

    ``pause(every_s)`` waits between polls: a sleep, or a wait that returns early when the answer comes
    (a forked job's fork server telling its exit)."""
    deadline = time.monotonic() + timeout_s
    while not ended():
        if time.monotonic() > deadline:
            return True
        if on_poll is not None:
            on_poll()
        pause(every_s)
    return False


def group_members(pgid: int) -> set[int]:
    """The pids of the group's processes that still run (zombies, waiting to be reaped, do not count)."""
    members = set()
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == pgid:
                members.add(process.pid)
    return members



def alive(pid: int, started: float | None = None) -> bool:
    """Whether process ``pid`` runs (a zombie does not); with ``started`` (its ``create_time``), whether
    it is still that process and not a later one that reuses the pid."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(process.create_time() - started) < 1.0
    except (psutil.Error, ValueError, TypeError):
        return False


def log_tail(log: Path, lines: int = 15) -> str:
    """The last ``lines`` non-empty lines of a job's log (a progress bar's final state, not its redraws)."""
    try:
        text = log.read_bytes().decode(errors="replace")  # not read_text: its newline translation makes each \r a line
    except OSError:
        return ""
    rows = [r.split("\r")[-1].rstrip() for r in text.split("\n")]
    return "\n".join([r for r in rows if r][-lines:])
