"""A warm worker: the trainer imported once, each job still in its own fresh process, forked from it.

A trial's fixed cost starts with a new Python importing torch and the trainer (about 2.5 s of an 8 s
demo trial here). A search runs dozens of jobs with the same engine, so :func:`warm_worker` starts
one process (``python -m speedopt.measure._warm``) that imports them once and then, as the fork
server (:class:`speedopt.isolation.ForkServer`), for each job forks a child that becomes exactly what
the cold path starts: its own session and process group, its log as stdout and stderr, its private
folder as working directory, the job's environment, the parent's leases (passed over the socket with
``SCM_RIGHTS``), and then the one child entry point (:func:`speedopt.measure._child.main`). Nothing
else is shared: the fork happens before any job runs, so no CUDA context, no trainer, no dataset, no
patched module exists in the worker; each job patches and builds its trainer in its own child, as a
cold one does. ``benchmarks/trial_overhead.py`` measures a config cold and warm side by side.

Dying: the worker watches the process that started it, and each forked child watches the worker
(:func:`speedopt.isolation._orphan.die_with`), so a SIGKILLed search leaves neither. Multi-GPU jobs run
cold (``torch.distributed.run`` starts the ranks). The worker in use is a context variable set by
:func:`warm_worker` (:func:`current`); with none, or one for another engine, jobs run cold. A
:func:`warm_worker` block inside one with a matching worker uses it (:func:`using` sets one for a block).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from speedopt.data import resolution_env
from speedopt.engines import EngineName, EngineSpec
from speedopt.isolation import PARENT_ENV, ForkServer, Job
from speedopt.isolation import start as start_job

_CURRENT: contextvars.ContextVar[WarmWorker | None] = contextvars.ContextVar("speedopt_warm_worker", default=None)


@dataclass
class WarmWorker:
    """The parent's handle on a running warm worker: its process and its socket (a fork server)."""

    engine_spec: EngineSpec  # the engine it imported, from its checkout
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    sock: socket.socket
    started_s: float  # seconds from start to ready (the imports it saves each job)
    jobs: int = field(default=0)

    @property
    def server(self) -> ForkServer:
        return ForkServer(self.process, self.sock)

    def alive(self) -> bool:
        return self.server.alive()

    def matches(self, engine_spec: EngineSpec, env: dict[str, str]) -> bool:
        if engine_spec != self.engine_spec:
            return False
        per_job = resolution_env().keys()  # where a job resolves data.yaml from: each gets its own at its fork
        return _without(env, per_job) == _without(self.env, per_job) and self.alive()

    def fork(self, workdir: Path, env: dict[str, str], fds: tuple[int, ...]) -> Job:
        """Start the job in ``workdir`` as a forked child (its pid is its process group too).

        The child's environment is this process's now, with ``env`` added: what the cold path gives its
        child, whenever the worker started.
        """
        job = self.server.fork(workdir, {**os.environ, **env}, fds)
        self.jobs += 1
        return job

    def close(self) -> None:
        """End the worker (closing its socket ends it; its group is ended to be sure)."""
        self.server.close(grace_s=5.0)


def start(engine_spec: EngineSpec, env: dict[str, str], timeout_s: float = 120.0) -> WarmWorker:
    """Start a warm worker for ``engine_spec`` with the engine's job environment ``env``; ready when it returns."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    started = time.monotonic()
    args = [sys.executable, "-m", "speedopt.measure._warm", str(theirs.fileno()), engine_spec.name, engine_spec.checkout or ""]
    job = start_job(args, cwd=None, env={**os.environ, **env, PARENT_ENV: str(os.getpid())}, stderr=subprocess.PIPE,
                    pass_fds=(theirs.fileno(),))
    theirs.close()
    assert job.proc is not None  # started cold
    process = job.proc
    worker = WarmWorker(engine_spec, dict(env), process, ours, 0.0)
    try:
        ready = worker.server.read(timeout_s)
    except BaseException:  # Ctrl-C while it imports: it goes with us
        worker.close()
        raise
    if ready is None or not ready.get("ready"):
        worker.close()
        err = process.stderr.read().decode(errors="replace").strip().splitlines() if process.stderr else []
        raise RuntimeError(f"the warm worker did not start: {err[-1] if err else 'no output'}")
    worker.started_s = time.monotonic() - started
    return worker


@contextlib.contextmanager
def warm_worker(
    engine: EngineName | EngineSpec = "ultralytics",
    yolov5_dir: str | None = None,
    env: dict[str, str] | None = None,
    on_start: Callable[[], None] | None = None,
    enabled: bool = True,
) -> Iterator[WarmWorker | None]:
    """Jobs of ``engine`` in the block run forked from one warm worker (None, and cold jobs, when it cannot start).

    ``engine``: an engine's name (``yolov5_dir``: the classic engine's checkout), or an
    :class:`~speedopt.engines.EngineSpec` that names both.

    Inside a block that already has a matching worker (the same engine, code and engine environment,
    whatever working folder each search runs in: :func:`current`) the block uses that one and starts
    none: several searches in one process import the trainer once. That worker imported the trainer
    under the environment it started in; each job still gets the environment of the moment it starts.
    ``env``: the engine's job environment (default: its own, as a search's jobs get). ``on_start()`` is called before one starts. ``enabled=False``: every
    job in the block starts a fresh Python, even inside another block.
    """
    if isinstance(engine, EngineSpec) and yolov5_dir is not None:
        raise TypeError("give the checkout in the EngineSpec, not as yolov5_dir beside it")
    spec = engine if isinstance(engine, EngineSpec) else EngineSpec(engine, yolov5_dir)
    if env is None:
        from speedopt.offline import cache_dir

        env = spec.engine.environment(cache_dir())
    if not enabled:
        with using(None):
            yield None
        return
    running = current(spec, env)
    if running is not None:
        yield running
        return
    if on_start is not None:
        on_start()
    try:
        worker: WarmWorker | None = start(spec, env)
    except (OSError, RuntimeError):  # jobs run cold
        worker = None
    try:
        with using(worker):
            yield worker
    finally:
        if worker is not None:
            worker.close()


@contextlib.contextmanager
def using(worker: WarmWorker | None) -> Iterator[None]:
    """Jobs in the block fork from ``worker`` (None: they run cold); the worker stays running after it."""
    token = _CURRENT.set(worker)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def cold() -> contextlib.AbstractContextManager[None]:
    """Jobs in the block start a fresh Python, even inside :func:`warm_worker` (a side-by-side comparison)."""
    return using(None)


def _without(env: dict[str, str], keys: Iterable[str]) -> dict[str, str]:
    """``env`` less ``keys``: the part of a job environment a worker's imports may read (see :meth:`WarmWorker.matches`)."""
    drop = set(keys)
    return {k: v for k, v in env.items() if k not in drop}


def current(engine_spec: EngineSpec, env: dict[str, str]) -> WarmWorker | None:
    """The warm worker for a job of ``engine_spec`` with ``env`` here, if one runs."""
    worker = _CURRENT.get()
    return worker if worker is not None and worker.matches(engine_spec, env) else None


# -- the worker process ------------------------------------------------------------------------------


def _run(workdir: Path) -> None:
    """In a forked child that became its job: the one child entry point."""
    from speedopt.measure import _child

    _child.main([str(workdir)])  # ends with os._exit


def _main(argv: list[str]) -> int:
    fd, name, checkout = int(argv[0]), argv[1], argv[2] or None
    from speedopt.isolation import die_with

    die_with(int(os.environ[PARENT_ENV]))
    from speedopt import engines
    from speedopt.measure import _child, _clock, _threads  # noqa: F401 - imported once, for every job

    _threads.at_start()  # before the trainer's imports set OMP_NUM_THREADS; every forked job inherits it
    _clock.preload()

    EngineSpec(engines.engine_name(name), checkout).engine.preload()
    sock = socket.socket(fileno=fd)
    sock.send(json.dumps({"ready": 1}).encode())
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # nobody reads its pipe from now on; each job logs to its own file
    ForkServer.serve(sock, _run)
    # The search closed the socket: nothing is left to flush or save (each job ran and ended in its own
    # child). Exit at once: tearing down torch's interpreter state would keep the search waiting ~2 s.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
