"""Run one piece of measuring work (a speed trial, a quality probe) in its own process.

Parent side, :func:`run_isolated`: a private temporary folder holds ``request.json``, the child's
``progress.json`` and ``result.json`` and its log; the child runs in its own session (process
group) under a timeout, so killing the group also kills dataloader workers; the folder is removed
afterwards. Child side, :func:`child_start` / :func:`child_finish`: refuse the network, die with
the parent, write results atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.measurement import Status
from speedopt.offline import forbid_network


@dataclass(frozen=True)
class Finished:
    """How the child ended: its result (None if it wrote none), timeout, exit code, log tail."""

    result: dict[str, Any] | None
    timed_out: bool
    returncode: int | None
    log_tail: str
    wall_s: float
    last_progress: dict[str, Any] | None

    def failure(self) -> tuple[Status, str]:
        """Status and message for a child that ended without writing a result."""
        if self.returncode == -signal.SIGKILL:
            return Status.OOM, "killed by SIGKILL without a result, most likely by the kernel's out-of-memory killer"
        last = self.log_tail.splitlines()[-1] if self.log_tail else "no output"
        return Status.ERROR, f"process exited with code {self.returncode}: {last}"


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    rows = [r.split("\r")[-1].rstrip() for r in text.split("\n")]  # keep a progress bar's final state
    return "\n".join([r for r in rows if r][-lines:])


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file written atomically by the other side, or None if absent or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (temp file + rename), so a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def run_isolated(
    module: str,
    request: str,
    env: dict[str, str],
    timeout_s: float,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> Finished:
    """Run ``python -m module WORKDIR`` on ``request`` (JSON text) and collect how it ended."""
    workdir = Path(tempfile.mkdtemp(prefix="speedopt-"))
    started = time.monotonic()
    try:
        (workdir / "request.json").write_text(request)
        with open(workdir / "child.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, str(workdir)],
                cwd=workdir,  # stray relative writes of a trainer land here, not in the user's folder
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a timeout kills its workers too
            )
        try:
            timed_out = _wait(proc, workdir, timeout_s, progress)
        finally:
            _kill_group(proc)  # on timeout, interrupt, or workers that outlived the child
        return Finished(
            result=None if timed_out else read_json(workdir / "result.json"),
            timed_out=timed_out,
            returncode=proc.returncode,
            log_tail=_log_tail(workdir / "child.log"),
            wall_s=time.monotonic() - started,
            last_progress=read_json(workdir / "progress.json"),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _wait(proc: subprocess.Popen, workdir: Path, timeout_s: float, progress) -> bool:
    deadline = time.monotonic() + timeout_s
    last = None
    while proc.poll() is None:
        if time.monotonic() > deadline:
            return True
        if progress:
            state = read_json(workdir / "progress.json")
            if state and state != last:
                progress(state)
                last = state
        time.sleep(0.2)
    return False


def _die_with_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            time.sleep(0.5)

    threading.Thread(target=watch, name="speedopt-parent-watch", daemon=True).start()


def child_start(workdir: Path) -> tuple[str, list[str]]:
    """In the child: die with the parent, refuse the network; return the request text and the
    list that collects refused network attempts."""
    _die_with_parent()
    blocked: list[str] = []
    forbid_network(blocked)
    return (workdir / "request.json").read_text(), blocked


def child_progress(workdir: Path, **state: Any) -> None:
    """In the child: publish progress (the parent polls it)."""
    write_json(workdir / "progress.json", state)


def child_finish(workdir: Path, result: dict[str, Any]) -> None:
    """In the child: write the result and exit at once (trainer threads have nothing left to say)."""
    write_json(workdir / "result.json", result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
