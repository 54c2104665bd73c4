"""The multi-GPU launcher: one trial as ``python -m torch.distributed.run --nproc_per_node G ...``.

A trial with ``gpus > 1`` runs the way the user's real multi-GPU run does: under torch's own elastic
agent (``torch.distributed.run``, alias ``torchrun``), one node, a static rendezvous on
``127.0.0.1:<port>``. :func:`plan_launch` writes that command (:class:`LaunchPlan`), and
:func:`run_launch` runs it, waits under a deadline, kills everything it started whatever happens, and
reads what each rank measured (``rank<R>.json`` in the work folder) into a :class:`LaunchResult`.

Processes. The agent starts every rank in a *new session of its own* (torch's ``SubprocessHandler``
passes ``start_new_session=True``), so killing the agent's process group does not reach the ranks,
and a rank whose agent died is re-parented away from the tree. Every process of a launch is
therefore found by a marker instead: the plan's environment carries ``SPEEDOPT_LAUNCH_ID`` (a random
id, the marker of the launch's :class:`~speedopt.isolation.Job`), which the agent, the ranks and their
dataloader workers all inherit; isolation's ``marked`` lists this user's processes whose environment
holds it. Killing a launch (:func:`kill_launch`) is the one kill path of every job,
:meth:`~speedopt.isolation.Job.end`: SIGTERM to the agent's group and to each marked process and its
group (the agent forwards it to its ranks and waits for them), then, after a grace, SIGKILL to the
same, and a wait until none is left.

Dying with the parent. The agent runs *in-process* under a guard: :func:`run_launch` executes
``python -m speedopt.measure._launch <the same torch.distributed.run arguments>``, whose main starts a
watcher thread and then calls ``torch.distributed.run.main`` with those arguments (the same agent
code, the same arguments: only the first module name differs from the plan's argv). The watcher is
the trick of :func:`speedopt.measure._child._die_with_parent`: it compares ``os.getppid()`` with the
pid of the process that started it (``SPEEDOPT_PARENT_PID``, so a parent killed while the guard was
still importing is noticed too) and, once the parent is gone (even by SIGKILL), SIGKILLs every
process carrying the launch's marker and its own process group. ``PR_SET_PDEATHSIG`` was not used:
it fires when the parent *thread* ends (a launch started from a worker thread would die with that
thread), it needs ``preexec_fn`` (not safe with threads), and it would reach the agent only, not the
ranks in their own sessions. The stand-in rank (:mod:`speedopt.measure._standin`) also watches its
agent (``SPEEDOPT_AGENT_PID``), so ranks go even when the agent itself is SIGKILLed; the real
trainers' ranks do not, and are reached by the marker; should the guard and its starter be killed at
once, :func:`sweep_launches` (for the next job's start) kills what carries a marker and a dead starter.

The collective timeout. A rank that waits in a collective (``dist.barrier`` while rank 0 scans labels
or fills a RAM cache in the first epoch) fails after the process group's timeout. torch's defaults
(``torch.distributed.constants``, torch 2.14): 10 min for NCCL, 30 min for gloo. speedopt passes the
trial's collective timeout to the ranks in ``SPEEDOPT_PG_TIMEOUT_S`` (:data:`TIMEOUT_ENV`), which the
stand-in reads into ``init_process_group(timeout=timedelta(seconds=...))``. The real trainers:

- Ultralytics 8.4 (``ultralytics/engine/trainer.py``, ``BaseTrainer._setup_ddp``, lines 290-299) sets
  ``TORCH_NCCL_BLOCKING_WAIT=1`` and calls ``dist.init_process_group(..., timeout=timedelta(seconds=10800))``:
  3 hours, hard-coded; no argument or setting changes it. Long enough for any first epoch; to shorten
  or lengthen it, change that literal (or subclass the trainer and override ``_setup_ddp``).
- Classic YOLOv5 7.0 (``yolov5/train.py`` line 611 in the ``yolov5`` 7.0.14 package, ``train.py`` in a
  checkout) calls ``dist.init_process_group(backend='nccl' if dist.is_nccl_available() else 'gloo')``
  with no timeout: torch's default, 10 min for NCCL, and ranks 1..G-1 wait in
  ``torch_distributed_zero_first`` (``utils/torch_utils.py``) barriers while rank 0 builds the label
  cache, so a first scan of millions of labels longer than 10 min kills the run. There is no
  supported way to change it: edit that line to
  ``dist.init_process_group(backend=..., timeout=timedelta(seconds=10800))`` (``from datetime import
  timedelta``), or, without editing, set the module global torch reads at call time,
  ``torch.distributed.distributed_c10d.default_pg_nccl_timeout = timedelta(hours=3)`` (private API),
  in the rank before ``init_process_group`` (e.g. from a ``sitecustomize`` on the rank's path).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from speedopt.engines import PG_TIMEOUT_ENV
from speedopt.isolation import MARK_ENV, PARENT_ENV, Job, alive, die_with, log_tail, marked, start, wait_until
from speedopt.measure._workdir import read_json
from speedopt.status import Status

TIMEOUT_ENV = PG_TIMEOUT_ENV  # the process-group (collective) timeout, seconds, read by the ranks
LAUNCH_ENV = MARK_ENV  # marks every process of one launch (agent, ranks, their workers): the job's marker
AGENT_ENV = "SPEEDOPT_AGENT_PID"  # the guard's (agent's) pid, which a stand-in rank watches
LAUNCHER = "torch.distributed.run"
GUARD = "speedopt.measure._launch"
LOG = "launch.log"
_IN_USE = ("eaddrinuse", "address already in use")
_handed: set[int] = set()  # ports free_port gave out in this process, never given twice


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).

    There is a small race: another process may take the port between this call and the agent's
    bind of its rendezvous store. :func:`run_launch` therefore retries once, with a fresh port, when
    the launch fails with EADDRINUSE. A port is never handed out twice by one process, so plans made
    one after the other get distinct ports.
    """
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _handed:
            _handed.add(port)
            return port
    raise OSError(errno.EADDRINUSE, "no fresh free port after 100 tries")


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` (a bind with SO_REUSEADDR succeeds, so TIME_WAIT does not count)."""
    families = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    for family, host in families:
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no such family on this host
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return False
                # EADDRNOTAVAIL and the like: the family is not configured, nothing listens there
    return True


@dataclass(frozen=True)
class LaunchPlan:
    """One single-node ``torch.distributed.run`` launch: the command and the environment it adds."""

    nproc: int
    master_port: int
    timeout_s: float  # the process-group (collective) timeout the ranks get through TIMEOUT_ENV
    argv: tuple[str, ...]  # [python, -m, torch.distributed.run, --nproc_per_node, N, ..., script or -m module, args]
    env: Mapping[str, str] = field(default_factory=dict)  # added to this process's environment
    script_argv: tuple[str, ...] = ()  # what follows the launcher's own options (kept to re-plan on a new port)

    @property
    def launch_id(self) -> str:
        return self.env[LAUNCH_ENV]

    def command(self) -> str:
        """The command as a user types it."""
        return " ".join(self.argv)


def plan_launch(module_or_script_argv: Sequence[str], nproc: int, timeout_s: float, port: int | None = None) -> LaunchPlan:
    """``python -m torch.distributed.run --nproc_per_node N --master_addr 127.0.0.1 --master_port PORT <argv>``.

    ``module_or_script_argv`` is what a user puts after the launcher's options: ``train.py --batch 64``,
    or ``-m speedopt.measure._standin WORKDIR ...`` for a module. ``port`` defaults to
    :func:`free_port`; ``timeout_s`` is the ranks' collective timeout (see the module docstring).
    """
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1, not {nproc}")
    if timeout_s <= 0:
        raise ValueError(f"the collective timeout must be positive, not {timeout_s}")
    if not module_or_script_argv:
        raise ValueError("nothing to launch: give a script or -m module")
    port = free_port() if port is None else port
    script = tuple(str(a) for a in module_or_script_argv)
    argv = (
        sys.executable, "-m", LAUNCHER,
        "--nproc_per_node", str(nproc),
        "--master_addr", "127.0.0.1",
        "--master_port", str(port),
        *script,
    )
    env = {TIMEOUT_ENV: f"{timeout_s:g}", LAUNCH_ENV: secrets.token_hex(8)}
    return LaunchPlan(nproc=nproc, master_port=port, timeout_s=timeout_s, argv=argv, env=env, script_argv=script)


def _on_port(plan: LaunchPlan, port: int) -> LaunchPlan:
    """The same plan on another port, with a new launch id."""
    fresh = plan_launch(plan.script_argv, plan.nproc, plan.timeout_s, port)
    return replace(fresh, env={**plan.env, LAUNCH_ENV: fresh.launch_id})


@dataclass(frozen=True)
class RankFigures:
    """What one rank measured (its ``rank<R>.json``)."""

    rank: int
    images: int
    seconds: float
    images_per_s: float


@dataclass(frozen=True)
class LaunchResult:
    """How a launch ended and what its ranks measured."""

    status: Status
    message: str  # one line
    ranks: tuple[RankFigures, ...]  # ordered by rank; only the ranks that wrote a result
    wall_s: float
    returncode: int | None
    master_port: int  # the port actually used (after a retry, the second one)
    log_tail: str
    retried: bool = False

    @property
    def images_per_s(self) -> float:
        """The launch's throughput: the sum over ranks (each rank trains its own share of the batch)."""
        return sum(r.images_per_s for r in self.ranks)

    @property
    def per_rank_images_per_s(self) -> tuple[float, ...]:
        return tuple(r.images_per_s for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value, "message": self.message, "images_per_s": self.images_per_s,
            "ranks": [vars(r) for r in self.ranks], "wall_s": self.wall_s, "returncode": self.returncode,
            "master_port": self.master_port, "retried": self.retried,
        }


@dataclass(frozen=True)
class LaunchOptions:
    """How :func:`run_launch` runs a plan beyond its deadline: what the processes get, and when to stop early."""

    env: Mapping[str, str] = field(default_factory=dict)  # added to the ranks' environment (after the plan's own)
    pass_fds: tuple[int, ...] = ()  # descriptors the agent inherits (the runner's host-lock leases)
    log: str = LOG  # the agent's and ranks' output, in the work folder
    poll: Callable[[], bool] | None = None  # called every 0.1 s; True: the launch has what it needs, end it now


def run_launch(
    plan: LaunchPlan, workdir: Path, deadline_s: float, grace_s: float = 5.0, options: LaunchOptions | None = None
) -> LaunchResult:
    """Run ``plan`` in ``workdir`` for at most ``deadline_s`` seconds; nothing of it runs when this returns.

    The agent starts in a new session under the guard (see the module docstring); on timeout,
    KeyboardInterrupt, ``options.poll`` saying done, or any exit, every process of the launch is killed
    (SIGTERM, SIGKILL after ``grace_s``) and its port waited free. Retries once on a fresh port if the
    port was taken.
    """
    opts = options or LaunchOptions()
    started = time.monotonic()
    result = _run_once(plan, workdir, started + deadline_s, grace_s, opts)
    if result.status is Status.ERROR and any(s in result.log_tail.lower() for s in _IN_USE):
        for stale in workdir.glob("rank*.json"):
            stale.unlink()
        result = replace(_run_once(_on_port(plan, free_port()), workdir, started + deadline_s, grace_s, opts), retried=True)
    return replace(result, wall_s=time.monotonic() - started)


def _run_once(plan: LaunchPlan, workdir: Path, deadline: float, grace_s: float, opts: LaunchOptions) -> LaunchResult:
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    timed_out = stopped = False
    with open(workdir / opts.log, "ab") as log:
        # its own group: we kill it as one; a terminal's Ctrl-C reaches us only, and we end it
        job = start(guarded(plan.argv), cwd=workdir, env={**os.environ, **plan.env, **opts.env, PARENT_ENV: str(os.getpid())},
                    stdout=log, pass_fds=opts.pass_fds, marker=plan.launch_id)

    def has_enough() -> bool:
        nonlocal stopped
        stopped = opts.poll is not None and opts.poll()
        return stopped

    try:
        timed_out = job.wait(deadline - time.monotonic(), every_s=0.1, done=has_enough)
    finally:  # timeout, KeyboardInterrupt, any exception, or a normal end (workers that outlived a rank)
        left = kill_launch(job, grace_s)
        _wait_port_free(plan.master_port, grace_s)
    ranks = read_ranks(workdir, plan.nproc)
    tail = log_tail(workdir / opts.log, 30)
    wall = time.monotonic() - started
    if stopped:
        status, message = Status.OK, f"launch of {plan.nproc} ranks ended by its starter after {wall:.1f} s: it had what it needed"
    else:
        status, message = _ending(plan, ranks, timed_out, job.returncode, tail, wall)
    if left:
        status, message = Status.ERROR, f"{left} process(es) of the launch survived SIGKILL; {message}"
    return LaunchResult(status, message, ranks, wall, job.returncode, plan.master_port, tail)


def _ending(plan: LaunchPlan, ranks: tuple[RankFigures, ...], timed_out: bool, code: int | None, tail: str, wall: float) -> tuple[Status, str]:
    if timed_out:
        return Status.TIMEOUT, f"launch of {plan.nproc} ranks exceeded its deadline after {wall:.1f} s; every rank killed"
    last = tail.splitlines()[-1] if tail else "no output"
    if code != 0:
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with code {code}"
        return Status.ERROR, f"launcher {how}: {last}"
    if len(ranks) != plan.nproc:
        return Status.ERROR, f"{len(ranks)} of {plan.nproc} ranks wrote a result: {last}"
    total = sum(r.images_per_s for r in ranks)
    return Status.OK, f"{plan.nproc} ranks trained {sum(r.images for r in ranks)} images at {total:.1f} images/s in total"


def read_ranks(workdir: Path, nproc: int) -> tuple[RankFigures, ...]:
    """The ``rank<R>.json`` files the ranks wrote, ordered by rank (missing ones left out)."""
    out = []
    for rank in range(nproc):
        data = read_json(workdir / f"rank{rank}.json")
        if data is None:
            continue
        with contextlib.suppress(KeyError, TypeError, ValueError):
            out.append(RankFigures(int(data["rank"]), int(data["images"]), float(data["seconds"]), float(data["images_per_s"])))
    return tuple(out)


def guarded(argv: Sequence[str]) -> list[str]:
    """The plan's ``python -m torch.distributed.run ...`` run as ``python -m speedopt.measure._launch ...`` (same arguments)."""
    if list(argv[1:3]) != ["-m", LAUNCHER]:
        raise ValueError(f"not a {LAUNCHER} command: {' '.join(argv[:3])}")
    return [argv[0], "-m", GUARD, *argv[3:]]


# -- finding and killing the processes of a launch --------------------------------------------------


def kill_launch(job: Job, grace_s: float = 5.0) -> int:
    """SIGTERM every process of the launch (the agent forwards it to its ranks and waits for them), SIGKILL after
    ``grace_s``; returns how many still run after that (0). The one kill path, :meth:`~speedopt.isolation.Job.end`."""
    return job.end(grace_s, term_s=grace_s)


def sweep_launches(grace_s: float = 2.0) -> int:
    """SIGKILL what is left of launches whose starter is gone; returns how many processes that was.

    For the one case the guard cannot cover: the guard (the agent) and the process that started it
    both killed at once (the out-of-memory killer), leaving real-trainer ranks, which do not watch
    their agent, waiting in a collective until its timeout. Every process of a launch carries the
    starter's pid (``SPEEDOPT_PARENT_PID``) next to the launch id; one whose starter no longer runs is
    left over. A starter's pid reused by a new process keeps its leftovers alive (the safe side).
    Each such launch is ended as a job (:meth:`~speedopt.isolation.Job.end`), found by its marker.
    """
    orphans: dict[str, list[psutil.Process]] = {}
    me = os.getpid()
    for process in marked():
        with contextlib.suppress(psutil.Error, OSError):
            env = process.environ()
            starter = env.get(PARENT_ENV, "")
            if env.get(LAUNCH_ENV) and starter.isdigit() and int(starter) != me and not alive(int(starter)):
                orphans.setdefault(env[LAUNCH_ENV], []).append(process)
    for launch_id, processes in orphans.items():
        with contextlib.suppress(psutil.Error, OSError):
            Job(os.getpgid(processes[0].pid), marker=launch_id).end(grace_s)
    return sum(len(processes) for processes in orphans.values())


def _wait_port_free(port: int, timeout_s: float) -> bool:
    return not wait_until(lambda: port_free(port), timeout_s, every_s=0.05)


# -- the guard: the agent in-process, dying with its parent -----------------------------------------


def _die_with_parent() -> None:
    """SIGKILL every process of this launch, then this group, once the parent is gone (even by SIGKILL)."""
    launch_id = os.environ.get(LAUNCH_ENV)

    def ranks_first() -> None:  # the ranks run in sessions of their own: this group does not hold them
        if launch_id:
            Job(os.getpgid(0), marker=launch_id).send(signal.SIGKILL)  # never to our own group: die_with ends it

    die_with(int(os.environ.get(PARENT_ENV) or os.getppid()), ranks_first, 0.2, "speedopt-launch-parent-watch")


def _failure_text(exc: BaseException) -> str:
    """One line for the agent's failure: which ranks ended how (``ChildFailedError.failures``), else the exception."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        parts = []
        for rank, failure in sorted(failures.items()):
            code = getattr(failure, "exitcode", None)
            how = f"killed by {signal.Signals(-code).name}" if isinstance(code, int) and code < 0 else f"exited with code {code}"
            parts.append(f"rank {rank} {how}")
        return "; ".join(parts)
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0]


def main(argv: list[str]) -> int:
    """``python -m speedopt.measure._launch <torch.distributed.run arguments>``: the agent, guarded."""
    _die_with_parent()
    os.environ[AGENT_ENV] = str(os.getpid())  # the ranks inherit it (the agent copies os.environ)
    from torch.distributed import run

    sys.argv = [run.__file__, *argv]
    try:
        run.main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # the agent's ChildFailedError and the like: already logged by @record
        print(f"launch failed: {_failure_text(exc)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


__all__ = [
    "TIMEOUT_ENV", "LAUNCH_ENV", "AGENT_ENV",
    "free_port", "port_free", "LaunchPlan", "plan_launch", "RankFigures", "LaunchOptions", "LaunchResult", "run_launch",
    "kill_launch", "sweep_launches", "read_ranks", "guarded",
]
