"""The one job: started cold, forked from the fork server, or under torch.distributed.run; each waited for and
ended, with every process it started, by the same :meth:`Job.end`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from speedopt.isolation import ForkServer, Job, alive, log_tail, marked, start, wait_until
from speedopt.isolation._process import group_members

# A job that starts a worker of its own (in its group, as a dataloader worker is) and then waits forever.
FAMILY = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); print('up', flush=True); time.sleep(600)"

# A fork server whose jobs start a worker in their group, write both pids, and wait forever.
SERVER = textwrap.dedent(
    """
    import os, socket, subprocess, sys, time
    from speedopt.isolation import ForkServer

    def run(workdir):
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (workdir / "pids").write_text(f"{os.getpid()} {worker.pid}")
        time.sleep(600)

    ForkServer.serve(socket.socket(fileno=int(sys.argv[1])), run)
    """
)

# A rank under torch.distributed.run: joins the gloo group, starts a worker in a session of its own (out of
# reach of every group: only the launch's marker finds it), writes both pids, and waits forever.
RANK = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from pathlib import Path
    import torch.distributed as dist

    dist.init_process_group("gloo")
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    Path(sys.argv[1], f"pids{os.environ['RANK']}").write_text(f"{os.getpid()} {worker.pid}")
    time.sleep(600)
    """
)


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.fixture
def fork_server():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(theirs.fileno())], pass_fds=(theirs.fileno(),), start_new_session=True)
    theirs.close()
    server = ForkServer(process, ours)
    yield server
    server.close()


@pytest.fixture
def ends(monkeypatch):
    """Every call of the one kill path, :meth:`Job.end`, as the jobs it ended."""
    ended: list[Job] = []
    real = Job.end

    def end(self: Job, grace_s: float = 10.0, term_s: float = 0.0) -> int:
        ended.append(self)
        return real(self, grace_s, term_s)

    monkeypatch.setattr(Job, "end", end)
    return ended


def test_a_cold_job_ends_with_the_workers_it_started(tmp_path):
    with open(tmp_path / "job.log", "wb") as log:
        job = start([sys.executable, "-c", FAMILY], cwd=tmp_path, env=os.environ, stdout=log)
    assert os.getpgid(job.pid) == job.pid != os.getpgid(0)  # its own session and group
    assert not wait_until(lambda: "up" in log_tail(tmp_path / "job.log") and len(psutil.Process(job.pid).children()) == 1, 60, every_s=0.05)
    worker = psutil.Process(job.pid).children()[0]
    assert alive(job.pid) and alive(worker.pid) and group_members(job.pid) and not job.poll()
    assert job.wait(0.2) is True  # timed out: it runs on
    assert job.end() == 0
    assert job.ended and job.returncode is not None and not group_members(job.pid) and not alive(worker.pid)


def test_a_forked_job_is_waited_for_and_ends_with_the_workers_it_started(fork_server, tmp_path):
    job = fork_server.fork(tmp_path, dict(os.environ), ())
    assert not wait_until(lambda: len(_pids(tmp_path / "pids")) == 2, 60, every_s=0.05)
    pids = _pids(tmp_path / "pids")
    assert os.getpgid(job.pid) == job.pid != os.getpgid(0)  # its own session and group, as a cold job's
    assert pids[0] == job.pid and all(alive(p) for p in pids)
    assert job.wait(0.2) is True and not job.ended
    assert job.end() == 0
    assert job.ended and job.returncode == -9 and not any(alive(p) for p in pids)


@pytest.mark.slow  # a real torchrun launch
@pytest.mark.xdist_group("launch")  # launches are found by their marker on the whole host (see tests/measure/test_launch.py)
def test_a_warm_job_and_a_ddp_launch_end_their_workers_the_same_way(fork_server, tmp_path, ends):
    """Each with a worker of its own (the rank's in a session of its own): both ended by Job.end, nothing left."""
    from speedopt.engines import EngineSpec
    from speedopt.measure import _runner, _warm
    from speedopt.measure._launch import LaunchOptions, plan_launch, run_launch

    forked, launched = tmp_path / "forked", tmp_path / "launched"
    forked.mkdir()
    warm = _warm.WarmWorker(EngineSpec("ultralytics"), {}, fork_server.process, fork_server.sock, 0.0)
    timed_out, _ = _runner._run_one(forked, {}, 10.0, lambda: None, warm)  # the measure runner's one way
    pids = _pids(forked / "pids")
    assert timed_out and len(pids) == 2, (forked / "child.log").read_text()
    assert len(ends) == 1 and ends[0].exit_word is not None  # ended as a forked job
    assert not any(alive(p) for p in pids)

    script = tmp_path / "rank.py"
    script.write_text(RANK)
    files = [launched / f"pids{r}" for r in (0, 1)]
    plan = plan_launch([str(script), str(launched)], 2, 60)
    result = run_launch(plan, launched, 120, options=LaunchOptions(poll=lambda: all(len(_pids(f)) == 2 for f in files)))
    pids = [p for f in files for p in _pids(f)]
    assert "ended by its starter" in result.message and len(pids) == 4, result.message + "\n" + result.log_tail
    assert len(ends) == 2 and ends[1].marker == plan.launch_id  # the same function, the launch's marker
    assert not any(alive(p) for p in pids) and not marked(plan.launch_id)
