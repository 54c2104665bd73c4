"""The fork server: one process that imported what jobs need once, forking each job from that state.

Its client side (:class:`ForkServer`) holds the server's process and one end of an ``AF_UNIX``
``SOCK_SEQPACKET`` socket; :meth:`ForkServer.fork` sends a job's folder and whole environment (and the
descriptors it inherits, with ``SCM_RIGHTS``) and returns the forked :class:`~speedopt.isolation.Job`,
whose exit the server tells over the same socket. The server side (:meth:`ForkServer.serve`) forks one
child per request; the child becomes exactly what a cold :func:`~speedopt.isolation.start` gives a
job: its own session and process group, its log as stdout and stderr, stdin closed, its folder as
working directory, the job's environment, the fork server as the parent it dies with
(:data:`~speedopt.isolation.PARENT_ENV`), and then the job's entry point. What the server imports
before serving is its owner's business (:mod:`speedopt.measure._warm`: the trainer).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from speedopt.isolation._job import Job
from speedopt.isolation._orphan import PARENT_ENV

MAX_MESSAGE = 1 << 17  # a request carries the job's whole environment


@dataclass(frozen=True)
class ForkServer:
    """The parent's handle on a running fork server: its process and its end of the socket."""

    process: subprocess.Popen[bytes]
    sock: socket.socket

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, workdir: Path, env: dict[str, str], fds: tuple[int, ...]) -> Job:
        """Start a job in ``workdir`` as a forked child with ``env`` as its whole environment, inheriting ``fds``."""
        message = json.dumps({"workdir": str(workdir), "env": env}).encode()
        socket.send_fds(self.sock, [message], list(fds))
        reply = self.read(timeout_s=60.0)
        if reply is None or "pid" not in reply:
            raise RuntimeError(f"the warm worker did not start the job ({reply})")
        return Job(int(reply["pid"]), exit_word=self.exit_code)

    def exit_code(self, timeout_s: float) -> tuple[bool, int | None]:
        """(ended, exit code) of the job last forked, waiting up to ``timeout_s``; a dead server ends it with None."""
        reply = self.read(timeout_s)
        if reply is None:
            return (not self.alive()), None
        return True, reply.get("code")

    def read(self, timeout_s: float) -> dict[str, int] | None:
        """The server's next message, waiting up to ``timeout_s`` (None: none came, or the socket closed)."""
        ready, _, _ = select.select([self.sock], [], [], timeout_s)
        if not ready:
            return None
        data = self.sock.recv(MAX_MESSAGE)
        return json.loads(data) if data else None

    def close(self, grace_s: float = 5.0) -> None:
        """End the server (closing its socket ends it; its group is ended to be sure)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=grace_s)
        Job(self.process.pid, proc=self.process).end(grace_s)  # to be sure

    @staticmethod
    def serve(sock: socket.socket, run: Callable[[Path], None]) -> None:
        """The server's loop: fork one child per request until the socket closes, report each child's pid, then
        its exit code; each child becomes its job (see the module docstring) and calls ``run(workdir)``, which
        must end the process (``os._exit``)."""
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 64)
            except OSError:
                return
            if not message:
                return
            request = json.loads(message)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _become_job(sock, request, fds, run)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
            _, status = os.waitpid(pid, 0)
            sock.send(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _become_job(sock: socket.socket, request: dict[str, object], fds: list[int], run: Callable[[Path], None]) -> None:
    """In the forked child: become the job process the cold path would have started, then run the job."""
    try:
        sock.close()
        os.setsid()  # its own session and process group, as the cold path's start_new_session
        workdir = Path(str(request["workdir"]))
        log = os.open(workdir / "child.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.chdir(workdir)
        env = request.get("env")
        os.environ.clear()  # the job's environment is the one sent (the parent's of the moment)
        os.environ.update({str(k): str(v) for k, v in (env.items() if isinstance(env, dict) else ())})
        os.environ[PARENT_ENV] = str(os.getppid())  # it watches the fork server, which watches its starter
        import tempfile

        tempfile.tempdir = None  # TMPDIR is the job's now
        run(workdir)  # ends with os._exit
    finally:
        os._exit(1)
