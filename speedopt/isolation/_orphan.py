"""Dying with a parent: the one watcher every speedopt child process runs (trial jobs, launch guards, ranks).

A process started by speedopt must not outlive the process that started it, even when that one is
SIGKILLed (no ``finally`` runs there). The watcher compares ``os.getppid()`` with the parent pid it
was given (not whoever the parent is when it starts: a parent killed while the child was still
importing must not leave it orphaned) and, once they differ, runs ``before`` and SIGKILLs its own
process group: a job leads a session of its own, with what it started. A worker in its starter's
group (``speedopt prepare``'s, whose group is the user's shell job) SIGKILLs itself alone.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Callable

from speedopt.isolation._process import wait_until

PARENT_ENV = "SPEEDOPT_PARENT_PID"  # the starter's pid, which a job watches (given, not read from getppid: see above)


def die_with(
    parent: int,
    before: Callable[[], None] | None = None,
    interval_s: float = 0.5,
    name: str = "speedopt-parent-watch",
    group: bool = True,
) -> None:
    """Start a daemon thread that kills this process group (``group=False``: this process) once ``parent``
    is no longer our parent."""

    def watch() -> None:
        wait_until(lambda: os.getppid() != parent, math.inf, every_s=interval_s)
        if before is not None:
            before()
        if group:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name=name, daemon=True).start()
