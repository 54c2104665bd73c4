"""The one way to start a job and end it: its own group, a deadline, the whole group killed, its log tail."""

from __future__ import annotations

import os
import sys
import time

import psutil

from speedopt.isolation import alive, group_running, kill_group, log_tail, start, wait_until

# A job that starts a worker of its own (in its group, as a dataloader worker is) and then waits forever.
FAMILY = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); print('up', flush=True); time.sleep(600)"


def test_kill_group_ends_the_job_and_the_workers_it_started(tmp_path):
    with open(tmp_path / "job.log", "wb") as log:
        proc = start([sys.executable, "-c", FAMILY], cwd=tmp_path, env=os.environ, stdout=log)
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)  # its own session and group
    assert not wait_until(lambda: "up" in log_tail(tmp_path / "job.log") and len(psutil.Process(proc.pid).children()) == 1, 60, every_s=0.05)
    worker = psutil.Process(proc.pid).children()[0]
    assert alive(proc.pid) and alive(worker.pid) and group_running(proc.pid)
    kill_group(proc.pid, proc)
    assert proc.returncode is not None and not group_running(proc.pid) and not alive(worker.pid)


def test_wait_until_says_whether_the_deadline_passed():
    polls = []
    started = time.monotonic()
    assert wait_until(lambda: False, 0.3, lambda: polls.append(1), every_s=0.05) is True
    assert 0.3 <= time.monotonic() - started < 5 and len(polls) >= 2
    assert wait_until(lambda: True, 0.0) is False


def test_alive_tells_a_reused_pid_from_the_process_it_was():
    me = psutil.Process()
    assert alive(me.pid) and alive(me.pid, me.create_time())
    assert not alive(me.pid, me.create_time() - 3600)  # same pid, another start time: another process
    done = start([sys.executable, "-c", "pass"], cwd=None, env=os.environ)
    done.wait()
    assert not alive(done.pid)


def test_log_tail_keeps_the_last_lines_and_a_progress_bars_final_state(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("one\n\ntwo\n 10%\r 50%\r100%\nthree\n")
    assert log_tail(log, 3) == "two\n100%\nthree"
    assert log_tail(tmp_path / "missing.log") == ""
