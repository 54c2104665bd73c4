"""The multi-GPU launcher, on CPU: two gloo ranks of the stand-in training loop under torch.distributed.run."""

import _thread
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from speedopt.isolation import marked
from speedopt.measure._launch import (
    LAUNCH_ENV,
    LAUNCHER,
    TIMEOUT_ENV,
    LaunchResult,
    RankFigures,
    free_port,
    guarded,
    plan_launch,
    port_free,
    read_ranks,
    run_launch,
    sweep_launches,
)
from speedopt.measure._runner import PARENT_ENV
from speedopt.status import Status

# Launches are found by their marker, on the whole host: under pytest-xdist (the slow tier's --dist loadgroup)
# every launch test runs on one worker, so that no test sees another's ranks as its own leftovers.
pytestmark = pytest.mark.xdist_group("launch")


STANDIN = ["-m", "speedopt.measure._standin"]


def _standin(workdir: Path, steps: int, batch: int = 4) -> list[str]:
    return [*STANDIN, str(workdir), "--steps", str(steps), "--batch", str(batch)]


def _until(condition, timeout_s: float, every_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True


# -- plans and ports, no processes ------------------------------------------------------------------


def test_free_port_is_bindable_and_two_plans_get_distinct_ports(tmp_path):
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_free(port)
    assert port_free(port)
    first, second = plan_launch(_standin(tmp_path, 1), 2, 60), plan_launch(_standin(tmp_path, 1), 2, 60)
    assert first.master_port != second.master_port
    assert first.launch_id != second.launch_id


def test_the_plan_is_the_classic_multi_gpu_command(tmp_path):
    plan = plan_launch(["train.py", "--batch", "64"], 4, 5400, port=29555)
    assert plan.argv == (
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "4",
        "--master_addr", "127.0.0.1", "--master_port", "29555", "train.py", "--batch", "64",
    )
    assert plan.nproc == 4 and plan.master_port == 29555 and plan.timeout_s == 5400
    assert plan.env[TIMEOUT_ENV] == "5400" and plan.env[LAUNCH_ENV]
    assert guarded(plan.argv) == [sys.executable, "-m", "speedopt.measure._launch", *plan.argv[3:]]
    with pytest.raises(ValueError):
        plan_launch(["train.py"], 0, 60)
    with pytest.raises(ValueError):
        guarded(["python", "train.py"])


def test_rank_files_aggregate_to_the_sum(tmp_path):
    for rank, rate in ((0, 100.0), (1, 50.0)):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "images": 10, "seconds": 10 / rate, "images_per_s": rate}))
    ranks = read_ranks(tmp_path, 3)  # rank 2 wrote nothing
    assert [r.rank for r in ranks] == [0, 1]
    result = LaunchResult(Status.OK, "", ranks, 1.0, 0, 1, "")
    assert result.images_per_s == 150.0 and result.per_rank_images_per_s == (100.0, 50.0)
    assert result.to_dict()["ranks"][1] == vars(RankFigures(1, 10, 0.2, 50.0))


# -- real launches ----------------------------------------------------------------------------------


@pytest.mark.slow  # a real torchrun launch
def test_two_gloo_ranks_measure_ok(tmp_path):
    plan = plan_launch(_standin(tmp_path, 20, 8), 2, 120)
    assert plan.argv[1:9] == ("-m", LAUNCHER, "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(plan.master_port))
    result = run_launch(plan, tmp_path, deadline_s=120)
    assert result.status is Status.OK, result.message + "\n" + result.log_tail
    assert sorted(p.name for p in tmp_path.glob("rank?.json")) == ["rank0.json", "rank1.json"]
    assert [r.rank for r in result.ranks] == [0, 1]
    assert all(r.images == 160 and r.images_per_s > 0 for r in result.ranks)
    assert result.images_per_s == pytest.approx(sum(result.per_rank_images_per_s))
    assert json.loads((tmp_path / "rank1.json").read_text())["pg_timeout_s"] == 120  # the collective timeout reached the rank
    assert not marked(plan.launch_id) and port_free(plan.master_port)


@pytest.mark.slow  # ~20 s: the deadline leaves the ranks time to start training, even beside another test's trainer
def test_a_timeout_kills_every_rank(tmp_path):
    plan = plan_launch(_standin(tmp_path, 10**8), 2, 60)
    started = time.monotonic()
    result = run_launch(plan, tmp_path, deadline_s=20)
    assert result.status is Status.TIMEOUT and "deadline" in result.message
    assert time.monotonic() - started < 20 + 15  # deadline + the SIGTERM grace + the wait
    assert (tmp_path / "rank0.started.json").exists(), result.log_tail  # it was training when killed
    assert not list(tmp_path.glob("rank?.json"))
    assert not marked(plan.launch_id) and port_free(plan.master_port)


@pytest.mark.slow  # ~15 s: two launches
def test_a_taken_port_is_retried_once_on_a_fresh_one(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plan = plan_launch(_standin(tmp_path, 3), 2, 60, port=port)
        result = run_launch(plan, tmp_path, deadline_s=120)
    assert result.status is Status.OK and result.retried, result.message + "\n" + result.log_tail
    assert result.master_port != port and len(result.ranks) == 2


@pytest.mark.slow  # a real torchrun launch
def test_an_interrupt_kills_every_rank(tmp_path):
    plan = plan_launch(_standin(tmp_path, 10**8), 2, 60)  # ranks that train until stopped: the work waits for the signal

    def interrupt() -> None:
        # The interrupt comes once both ranks train, however long a loaded machine takes to start them (the
        # guard is the launch's own deadline, so the launch cannot end first by timing out)
        if _until(lambda: (tmp_path / "rank1.started.json").exists(), 590):
            _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_launch(plan, tmp_path, deadline_s=600)
    assert not marked(plan.launch_id) and port_free(plan.master_port)


PARENT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from speedopt.measure._launch import plan_launch, run_launch

    workdir = Path(sys.argv[1])
    plan = plan_launch(["-m", "speedopt.measure._standin", str(workdir), "--steps", str(10**8), "--batch", "4"], 2, 60)
    (workdir / "plan.json").write_text(json.dumps({"id": plan.launch_id, "port": plan.master_port}))
    run_launch(plan, workdir, deadline_s=600)
    """
)


@pytest.mark.slow  # a real torchrun launch
def test_sigkill_of_the_parent_leaves_no_rank_and_frees_the_port(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = _until(lambda: all((tmp_path / f"rank{r}.started.json").exists() for r in (0, 1)), 90)
        assert started, (tmp_path / "launch.log").read_text() if (tmp_path / "launch.log").exists() else "no log"
        plan = json.loads((tmp_path / "plan.json").read_text())
        assert len(marked(plan["id"])) >= 3  # the agent and two ranks
        assert not port_free(plan["port"])
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        killed_at = time.monotonic()
        assert _until(lambda: not marked(plan["id"]) and port_free(plan["port"]), 10)
        assert time.monotonic() - killed_at < 5
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_sweep_kills_what_a_launch_left_when_its_starter_is_gone(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    ids = {name: f"{name}-{os.getpid()}-{time.monotonic_ns()}" for name in ("leftover", "running")}  # this test's alone
    orphan = subprocess.Popen(sleep, env={**os.environ, LAUNCH_ENV: ids["leftover"], PARENT_ENV: str(gone.pid)}, start_new_session=True)
    kept = subprocess.Popen(sleep, env={**os.environ, LAUNCH_ENV: ids["running"], PARENT_ENV: str(os.getpid())}, start_new_session=True)
    try:
        assert _until(lambda: len(marked(ids["leftover"])) == 1 and len(marked(ids["running"])) == 1, 10)
        swept = sweep_launches()  # ours, and any another test run on this host left...
        # ...unless another test's sweep (another pytest-xdist worker's trial) came first: either way it is gone
        assert swept >= 1 or _until(lambda: orphan.poll() is not None, 5)
        assert orphan.wait(timeout=5) == -signal.SIGKILL  # left for its parent to reap
        assert kept.poll() is None
    finally:
        for proc in (orphan, kept):
            proc.kill()
            proc.wait()
