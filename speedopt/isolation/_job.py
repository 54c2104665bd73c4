"""A job: one way to start it, one way to wait for it, one way to end it with everything it started.

Every process speedopt starts for work (a trial or probe job, the warm worker, a DDP launch, the
user's trainer under ``speedopt verify``) is a :class:`Job`, as pyperf's manager has one way to run a
worker. It starts one of three ways, all leading a session (and so a process group) of their own:

- cold, by :func:`start` (the one ``subprocess.Popen`` of speedopt's jobs), stdin closed, its output
  to a log file as a rule;
- forked from the fork server (:class:`~speedopt.isolation.ForkServer`), which tells its exit;
- under ``torch.distributed.run``: started cold with a ``marker`` (:data:`MARK_ENV`), which every
  process of the launch inherits, since the agent starts each rank in a session of its own, out of
  reach of its group.

It is waited for by :meth:`Job.wait` (:func:`~speedopt.isolation.wait_until`: a deadline, a callback
on each poll), and ended by :meth:`Job.end`, the one kill path: SIGTERM first where the job stops its
own children on it (the DDP agent forwards it to its ranks), then SIGKILL to its group and to each
marked process and that one's group, its leader reaped, and a wait until none of it runs, so nothing
of one job is left when the next is measured.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from speedopt.isolation._process import POLL_S, group_members, wait_until

MARK_ENV = "SPEEDOPT_LAUNCH_ID"  # marks every process of a job whose children leave its group (a launch's ranks)
ExitWord = Callable[[float], tuple[bool, int | None]]  # a forked job's fork server: (ended, exit code), waiting up to s


@dataclass(eq=False)
class Job:
    """A started job: its leader (whose pid is the job's process group), how to learn its exit, its marker."""

    pid: int
    proc: subprocess.Popen[bytes] | None = None  # a cold job's leader, reaped here
    exit_word: ExitWord | None = None  # a forked job's: its fork server tells when its leader ended
    marker: str | None = None  # the MARK_ENV value every process of it carries (None: its group holds all of it)
    returncode: int | None = None
    ended: bool = False

    def poll(self) -> bool:
        """Whether the leader has ended (its exit status then in :attr:`returncode`)."""
        if not self.ended:
            self._learn(0.0)
        return self.ended

    def wait(
        self,
        timeout_s: float,
        on_poll: Callable[[], None] | None = None,
        every_s: float = POLL_S,
        done: Callable[[], bool] | None = None,
    ) -> bool:
        """Wait until the leader ends or ``done()`` says the job has what it needs (False), or ``timeout_s`` passes
        (True: timed out); ``on_poll`` is called each ``every_s``. The job still runs its group until :meth:`end`."""
        return wait_until(lambda: self.poll() or (done is not None and done()), timeout_s, on_poll, every_s, self._pause)

    def end(self, grace_s: float = 10.0, term_s: float = 0.0) -> int:
        """End the job and everything it started; how many of its processes still run after that (0).

        ``term_s`` > 0: SIGTERM first, and up to ``term_s`` for it to stop. Then SIGKILL to its group and
        to every process carrying its marker (and their groups), its leader reaped (up to ``grace_s``),
        and up to ``grace_s`` until none of it runs.
        """
        if term_s > 0:
            self.send(signal.SIGTERM)
            wait_until(lambda: not self.left(), term_s, self.poll, every_s=0.05)
        self.send(signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.returncode = self.proc.wait(timeout=grace_s)
                self.ended = True
        elif self.exit_word is not None and not self.ended:
            self._learn(grace_s)
        wait_until(lambda: not self.left(), grace_s, every_s=0.05)
        return len(self.left())

    def send(self, sig: signal.Signals) -> None:
        """``sig`` to the job's group and to every process carrying its marker and that one's group (never to ours)."""
        ours = os.getpgid(0)
        groups = {self.pid}
        for process in marked(self.marker) if self.marker else ():
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                groups.add(os.getpgid(process.pid))
            with contextlib.suppress(psutil.Error):
                process.send_signal(sig)
        for group in groups - {ours}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)

    def left(self) -> set[int]:
        """The pids of the job's processes that still run: its group's and the marked ones (zombies do not count)."""
        pids = group_members(self.pid) if self.pid != os.getpgid(0) else set()  # our own group is not the job's
        if self.marker:
            pids |= {process.pid for process in marked(self.marker)}
        return pids

    def _learn(self, timeout_s: float) -> None:
        """Learn whether the leader ended, waiting up to ``timeout_s`` for a forked job's fork server to say so."""
        if self.proc is not None:
            self.returncode = self.proc.poll()
            self.ended = self.returncode is not None
        elif self.exit_word is not None:
            self.ended, self.returncode = self.exit_word(timeout_s)

    def _pause(self, seconds: float) -> None:
        """Wait between polls: on a forked job's fork server, which answers as soon as the leader ends; else a sleep."""
        if self.exit_word is not None and not self.ended:
            self._learn(seconds)
        else:
            time.sleep(seconds)


def start(
    argv: Sequence[str],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str],
    stdout: IO[bytes] | int | None = subprocess.DEVNULL,
    stderr: IO[bytes] | int | None = subprocess.STDOUT,
    pass_fds: Sequence[int] = (),
    marker: str | None = None,
) -> Job:
    """Start ``argv`` cold in its own session (its own process group: :meth:`Job.end` ends its workers too),
    stdin closed, output to ``stdout``/``stderr`` (a log file, as a rule), ``env`` as its whole environment;
    ``marker``: every process it starts carries it (:data:`MARK_ENV`), wherever their sessions are."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env={**env, MARK_ENV: marker} if marker else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    return Job(proc.pid, proc=proc, marker=marker)


def own_processes() -> Iterator[tuple[psutil.Process, dict[str, str]]]:
    """This user's running processes other than this one (zombies excluded), with their environments."""
    me = os.getpid()
    for process in psutil.process_iter(["status", "uids"]):
        with contextlib.suppress(psutil.Error, OSError):
            if process.pid == me or process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if process.info["uids"] is not None and process.info["uids"].real != os.getuid():
                continue
            yield process, process.environ()


def marked(marker: str | None = None) -> list[psutil.Process]:
    """This user's running processes (zombies excluded) whose environment carries ``marker`` (:data:`MARK_ENV`;
    None: any marker)."""
    return [process for process, env in own_processes() if (env.get(MARK_ENV) == marker if marker else MARK_ENV in env)]
