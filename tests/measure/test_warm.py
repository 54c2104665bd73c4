"""Which warm worker a block's jobs fork from: its own, a caller's (nested blocks), or none (cold).

The worker here is a real process and a real socket, but never asked to fork: these tests are about the
blocks, not the forking (every slow search test forks its jobs from a real warm worker)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from speedopt.engines import EngineSpec
from speedopt.measure import _warm, warm_worker

ENV = {"SPEEDOPT_TEST": "1"}


@pytest.fixture
def idle_worker():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    worker = _warm.WarmWorker(EngineSpec("ultralytics"), dict(ENV), process, ours, 0.0)
    yield worker
    process.kill()
    theirs.close()
    worker.close()


def test_a_block_inside_a_matching_workers_block_uses_it_and_starts_none(idle_worker):
    started = []
    with _warm.using(idle_worker):
        with warm_worker("ultralytics", None, dict(ENV), on_start=lambda: started.append(1)) as worker:
            assert worker is idle_worker and _warm.current(EngineSpec("ultralytics"), ENV) is idle_worker
        assert idle_worker.alive()  # the inner block leaves the caller's worker running
    assert started == [] and _warm.current(EngineSpec("ultralytics"), ENV) is None


def test_a_worker_of_another_engine_or_environment_is_not_used(idle_worker):
    with _warm.using(idle_worker):
        assert _warm.current(EngineSpec("yolov5"), ENV) is None
        assert _warm.current(EngineSpec("ultralytics"), {"SPEEDOPT_TEST": "2"}) is None
        assert _warm.current(EngineSpec("ultralytics", "/a/checkout"), ENV) is None


def test_a_worker_serves_blocks_run_from_any_working_folder(idle_worker, tmp_path, monkeypatch):
    """Where a job resolves data.yaml paths from (the caller's folder) each job gets at its fork, so it
    does not tell workers apart: a session's searches in several folders share one worker."""
    from speedopt.data import resolution_env

    monkeypatch.chdir(tmp_path)
    here = {**ENV, **resolution_env()}
    monkeypatch.chdir(tmp_path.parent)
    elsewhere = {**ENV, **resolution_env()}
    assert here != elsewhere
    with _warm.using(idle_worker):
        assert _warm.current(EngineSpec("ultralytics"), here) is idle_worker
        assert _warm.current(EngineSpec("ultralytics"), elsewhere) is idle_worker
        assert _warm.current(EngineSpec("ultralytics"), {**elsewhere, "YOLO_CONFIG_DIR": "/other"}) is None


def test_a_disabled_block_runs_its_jobs_cold_even_inside_a_warm_one(idle_worker):
    started = []
    with _warm.using(idle_worker):
        with warm_worker(EngineSpec("ultralytics"), env=dict(ENV), on_start=lambda: started.append(1), enabled=False) as worker:
            assert worker is None and _warm.current(EngineSpec("ultralytics"), ENV) is None
        assert _warm.current(EngineSpec("ultralytics"), ENV) is idle_worker
    assert started == []


def test_a_dead_worker_is_not_used(idle_worker):
    idle_worker.process.kill()
    idle_worker.process.wait()
    with _warm.using(idle_worker):
        assert _warm.current(EngineSpec("ultralytics"), ENV) is None


def test_a_spec_and_a_checkout_beside_it_are_refused():
    with pytest.raises(TypeError, match="in the EngineSpec"), warm_worker(EngineSpec("yolov5"), "/a/checkout", dict(ENV)):
        pass
