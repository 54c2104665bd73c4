import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from speedopt.measure import _hostlock as hostlock
from tests.conftest import TINY, run_cli


def _holder(seconds: float) -> subprocess.Popen:
    code = textwrap.dedent(
        f"""
        import time
        from speedopt.measure import measuring
        with measuring("holder-study"):
            print("held", flush=True)
            time.sleep({seconds})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_waits_for_the_holder_and_says_who_it_is():
    holder = _holder(1.5)
    messages = []
    started = time.monotonic()
    with hostlock.measuring("me", on_wait=messages.append) as waited:
        assert waited >= 1.0
    assert time.monotonic() - started >= 1.0
    assert len(messages) == 1 and f"pid {holder.pid}" in messages[0] and "holder-study" in messages[0]
    holder.wait()


def test_a_killed_holder_releases_the_lock():
    holder = _holder(60)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    with hostlock.measuring("me"):
        pass
    assert time.monotonic() - started < 2


def test_lock_file_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path / "private.lock"))
    assert hostlock.lock_path() == tmp_path / "private.lock"
    with hostlock.measuring("me"):
        assert (tmp_path / "private.lock").read_text().startswith('{"pid": ')
    monkeypatch.delenv(hostlock.LOCK_ENV)
    assert hostlock.lock_path().name == "speedopt-measure.lock"


@pytest.mark.slow
def test_a_standalone_trial_waits_for_a_measurement_in_progress(demo_yaml, tmp_path):
    # A search's trial holds the host lock: `speedopt trial` must not measure beside it.
    holder = _holder(4)
    released = time.time() + 4
    done = run_cli("trial", "--data", str(demo_yaml), *TINY, "--json", cwd=tmp_path)
    holder.wait()
    assert done.returncode == 0, done.stderr
    assert f"pid {holder.pid}" in done.stderr and "holder-study" in done.stderr
    assert json.loads(done.stdout)["measure_started_at"] >= released - 0.5
