"""One way to start a job and one way to end it: its own session, a deadline, its whole group killed.

Every process speedopt starts for work (a trial or probe job, the warm worker, a DDP launch, the
user's trainer under ``speedopt verify``) is started by :func:`start`, in its own session and so its
own process group, with stdin closed; it is waited for by :func:`wait_until` (a deadline, and a
callback on each poll), ended by :func:`kill_group` (SIGKILL to the group, then waiting until none
of it runs, so nothing of one job is left when the next is measured), and explained by
:func:`log_tail`. :func:`alive` is the one answer to "does this process still run".
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import psutil

POLL_S = 0.2  # how often a waiting runner looks at its job (and forwards its progress)


def start(
    argv: Sequence[str],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str],
    stdout: IO[bytes] | int | None = subprocess.DEVNULL,
    stderr: IO[bytes] | int | None = subprocess.STDOUT,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (its own process group: :func:`kill_group` ends its workers too),
    stdin closed, output to ``stdout``/``stderr`` (a log file, as a rule), ``env`` as its whole environment."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


def wait_until(ended: Callable[[], bool], timeout_s: float, on_poll: Callable[[], None] | None = None, every_s: float = POLL_S) -> bool:
    """Poll ``ended`` until it is true (False) or ``timeout_s`` passes (True: timed out), calling ``on_poll`` each time."""
    deadline = time.monotonic() + timeout_s
    while not ended():
        if time.monotonic() > deadline:
            return True
        if on_poll is not None:
            on_poll()
        time.sleep(every_s)
    return False


def kill_group(pgid: int, proc: subprocess.Popen[bytes] | None = None, grace_s: float = 10.0) -> None:
    """SIGKILL the process group ``pgid`` and wait (up to ``grace_s``) until none of it runs any more.

    ``proc``, the group's leader as started by :func:`start`, is reaped too. A killed process with a
    large address space (a trainer with a RAM cache) takes a while to tear down; waiting here means
    nothing of this job is left running when the next one is measured.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.wait(timeout=grace_s)
    deadline = time.monotonic() + grace_s
    while group_running(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def group_running(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies, waiting to be reaped, do not count)."""
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == pgid:
                return True
    return False


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
