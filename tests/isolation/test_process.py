"""Waiting with a deadline, whether a process or group runs, a log's tail (starting and ending jobs: test_job.py)."""

from __future__ import annotations

import os
import sys
import time

import psutil

from speedopt.isolation import alive, log_tail, start, wait_until


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
    assert done.wait(60) is False  # ended (and reaped) before the deadline
    assert not alive(done.pid)


def test_log_tail_keeps_the_last_lines_and_a_progress_bars_final_state(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("one\n\ntwo\n 10%\r 50%\r100%\nthree\n")
    assert log_tail(log, 3) == "two\n100%\nthree"
    assert log_tail(tmp_path / "missing.log") == ""
