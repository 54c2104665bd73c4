"""The one job runner: every trial, probe and validation pass runs through :func:`run_job`.

It inspects the ``.pt`` files the job's trainer would unpickle (:func:`_refusal`), sweeps what killed runs left (:func:`~speedopt.isolation._leftovers.sweep`), takes the host lock,
starts the one child entry point (``python -m speedopt.measure._child``) in a private temporary
folder (recorded with its owner, so a sweep removes it should this process be killed) and its own
session, sharing this process's leases with it, polls its progress, kills the whole process group
on timeout or interrupt, and maps every way the child can end to a :class:`~speedopt.status.Status`
in one place (:func:`_ending`): the child's own result, a timeout, a SIGKILL (the kernel's
out-of-memory killer), another signal, an exit code.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.errors import UsageError
from speedopt.isolation import (
    PARENT_ENV,
    log_tail,
    measuring,
    private_folder,
    remove_private_folder,
    shared_fds,
    socket_fits,
    start,
    sweep,
)
from speedopt.knobs import check_loads
from speedopt.measure._ddp import merge_ranks, run_ranks
from speedopt.measure._jobs import Job, JobOutcome, LabelsJob, job_to_json
from speedopt.measure._launch import sweep_launches
from speedopt.measure._progress import Progress, TrialProgress
from speedopt.measure._request import TrialRequest
from speedopt.measure._warm import WarmWorker, current
from speedopt.measure._workdir import read_json
from speedopt.status import Status

CHILD = "speedopt.measure._child"


@dataclass(frozen=True)
class _Exit:
    """What the parent saw of the child process."""

    result: dict[str, Any] | None  # what the child wrote, if it finished writing
    timed_out: bool
    returncode: int | None
    log_tail: str
    wall_s: float
    last_progress: TrialProgress | None


def run_job(
    job: Job,
    owner: str,
    progress: Progress | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> JobOutcome:
    """Run ``job`` in its own process under the host lock; always returns how it ended.

    ``owner`` names the holder of the host lock for whoever waits on it (a study name);
    ``progress`` gets the child's progress (:class:`TrialProgress`) each time it changes.
    """
    refused = _refusal(job)
    if refused is not None:  # nothing starts: the outcome says why
        now = time.time()
        return JobOutcome(Status.ERROR, refused, {}, 0.0, "", (), now, now)
    env = job.engine_spec.engine.environment(Path(job.cache_dir))
    with measuring(owner, on_wait=on_wait):
        sweep()
        sweep_launches()  # ranks of a launch whose guard and starter were killed at once
        started_at = time.time()
        seen = _run_child(job, env, progress)
        ended_at = time.time()
    status, message = _ending(seen, job)
    result = seen.result or {}
    return JobOutcome(
        status=status,
        message=message,
        figures=dict(result.get("figures") or {}),
        wall_s=seen.wall_s,
        log_tail=seen.log_tail,
        network_blocked=tuple(result.get("network_blocked") or ()),
        started_at=started_at,
        ended_at=ended_at,
    )


def _refusal(job: Job) -> str | None:
    """Why ``job`` may not start: a ``.pt`` file its trainer would unpickle (the model, the weights) that
    :func:`~speedopt.knobs.check_loads` refuses. A trial's knobs were checked when it was planned; a probe's and a
    validation pass's come from the study, which may be an import from anywhere."""
    if isinstance(job, LabelsJob):
        return None
    try:
        check_loads(job.knobs.model, None if isinstance(job, TrialRequest) else job.weights)
    except UsageError as exc:
        return str(exc)
    return None


def _ending(seen: _Exit, job: Job) -> tuple[Status, str]:
    """Every way a child can end, as one status and a one-line message."""
    if seen.timed_out:
        where = (seen.last_progress or TrialProgress()).text()
        return Status.TIMEOUT, f"{job.kind} exceeded {job.timeout_flag} {job.timeout_s:g} s during {where}"
    if seen.result is not None:
        return Status(seen.result["status"]), str(seen.result["message"])
    if seen.returncode == -signal.SIGKILL:
        return Status.OOM, "killed by SIGKILL without a result, most likely by the kernel's out-of-memory killer"
    last = seen.log_tail.splitlines()[-1] if seen.log_tail else "no output"
    if seen.returncode is not None and seen.returncode < 0:
        return Status.ERROR, f"process killed by {signal.Signals(-seen.returncode).name}: {last}"
    return Status.ERROR, f"process exited with code {seen.returncode}: {last}"


def _run_child(job: Job, env: dict[str, str], progress: Progress | None) -> _Exit:
    """Run the child entry point on ``job`` and collect how it ended; its folder is removed.

    A trial with ``gpus`` > 1 runs the same child as that many DDP ranks (:mod:`speedopt.measure._ddp`).
    """
    workdir = private_folder()
    started = time.monotonic()
    base_env = env
    nproc = job.knobs.gpus if isinstance(job, TrialRequest) else 1
    sockets: Path | None = None
    try:
        (workdir / "request.json").write_text(job_to_json(job))
        temp, sockets = _temp_for(workdir, Path(job.cache_dir) / "torchinductor" if job.cache_dir else None)
        env = {**env, **temp}
        forward = _Forward(workdir, progress)
        warm = None if nproc > 1 else current(job.engine_spec, base_env)
        if nproc > 1:
            timed_out, code = run_ranks(nproc, workdir, env, job.timeout_s, forward)
            result = None if timed_out else merge_ranks(workdir, nproc)
        else:
            timed_out, code = _run_one(workdir, env, job.timeout_s, forward, warm)
            result = None if timed_out else read_json(workdir / "result.json")
        return _Exit(
            result=result,
            timed_out=timed_out,
            returncode=code,
            log_tail=log_tail(workdir / "child.log"),
            wall_s=time.monotonic() - started,
            last_progress=_progress(workdir),
        )
    finally:
        remove_private_folder(workdir)
        if sockets is not None:
            remove_private_folder(sockets)


def _run_one(workdir: Path, env: dict[str, str], timeout_s: float, forward: Callable[[], None], warm: WarmWorker | None = None) -> tuple[bool, int | None]:
    """The child as one job in its own session, cold or forked from ``warm`` (see :mod:`speedopt.measure._warm`);
    (timed out, exit code). Nothing of it runs after."""
    if warm is not None:
        job = warm.fork(workdir, {**env, "PWD": str(workdir)}, shared_fds())
    else:
        with open(workdir / "child.log", "wb") as log:
            job = start(
                [sys.executable, "-m", CHILD, str(workdir)],
                cwd=workdir,  # stray relative writes of a trainer land here, not in the user's folder
                env={**os.environ, **env, PARENT_ENV: str(os.getpid())},
                stdout=log,
                pass_fds=shared_fds(),  # it holds this process's leases too, until it is gone
            )
    try:
        timed_out = job.wait(timeout_s, forward)
    finally:
        job.end()  # on timeout, interrupt, or workers that outlived the child
    return timed_out, job.returncode


def _progress(workdir: Path) -> TrialProgress | None:
    """The child's last progress update (``progress.json``; None before its first, or while it is unreadable)."""
    state = read_json(workdir / "progress.json")
    return TrialProgress.from_dict(state) if state else None


class _Forward:
    """Hands the child's progress (``progress.json``) to the caller's callback each time it changes."""

    def __init__(self, workdir: Path, progress: Progress | None):
        self.workdir, self.progress = workdir, progress
        self.last: TrialProgress | None = None

    def __call__(self) -> None:
        if self.progress is None:
            return
        update = _progress(self.workdir)
        if update and update != self.last:
            self.progress(update)
            self.last = update


def _temp_for(workdir: Path, inductor: Path | None = None) -> tuple[dict[str, str], Path | None]:
    """Environment that sends the child's temp files into its folder, so they go with it (even after a SIGKILL),
    and the private socket folder made for it, if any.

    torch's compile cache folder (made at import) always: ``inductor``, speedopt's own one shared by its jobs
    (a compile trial's graphs compile cold once, as a real run's do the first time on a machine, and its finals
    rounds find them, as the user's next runs do), else the job's folder; every temp file (multiprocessing's ``pymp-*``
    folders among them) where the path is short enough for multiprocessing's AF_UNIX sockets
    (:func:`~speedopt.isolation.socket_fits`). Where neither the job's folder nor the user's temp folder
    is (a ``TMPDIR`` of 76 bytes or more), a short private folder in /tmp
    holds them: otherwise a trial with loader workers would wait for its first batch until its timeout.
    """
    env = {} if "TORCHINDUCTOR_CACHE_DIR" in os.environ else {"TORCHINDUCTOR_CACHE_DIR": str(inductor or workdir / "torchinductor")}
    tmp = workdir / "tmp"
    if socket_fits(tmp):
        tmp.mkdir()
        env["TMPDIR"] = str(tmp)
        return env, None
    if socket_fits(tempfile.gettempdir()):
        return env, None
    sockets = private_folder("speedopt-tmp-", short=True)
    env["TMPDIR"] = str(sockets)
    return env, sockets
