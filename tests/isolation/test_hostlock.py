import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from speedopt.errors import UsageError
from speedopt.isolation import _hostlock as hostlock
from tests.conftest import TINY, run_cli


def _holder(seconds: float) -> subprocess.Popen:
    code = textwrap.dedent(
        f"""
        import time
        from speedopt.isolation import measuring
        with measuring("holder-study"):
            print("held", flush=True)
            time.sleep({seconds})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.slow  # starts a process
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
    assert hostlock.lock_path().name == "measure.lock"


@pytest.fixture
def default_lock(tmp_path, monkeypatch):
    """The default lock location, in a private temp folder: its lock folder's path."""
    monkeypatch.delenv(hostlock.LOCK_ENV)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"speedopt-lock-{os.getuid()}"


def test_the_default_lock_lives_in_a_folder_only_this_user_can_write(default_lock):
    with hostlock.measuring("me"):
        pass
    info = default_lock.lstat()
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert hostlock.lock_path() == default_lock / "measure.lock"
    default_lock.chmod(0o777)  # ours but open: tightened, not refused
    with hostlock.measuring("me"):
        pass
    assert stat.S_IMODE(default_lock.stat().st_mode) == 0o700


def test_a_link_planted_at_the_lock_is_never_written_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "planted.lock"
    link.symlink_to(victim)
    monkeypatch.setenv(hostlock.LOCK_ENV, str(link))
    with pytest.raises(UsageError, match="symbolic link"), hostlock.measuring("me"):
        pass
    assert victim.read_text() == "precious"


def test_a_hard_link_planted_at_the_lock_is_refused(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.link(victim, tmp_path / "planted.lock")
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path / "planted.lock"))
    with pytest.raises(UsageError, match="hard link"), hostlock.measuring("me"):
        pass
    assert victim.read_text() == "precious"


def test_a_planted_lock_folder_link_is_refused(default_lock, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    default_lock.symlink_to(elsewhere)
    with pytest.raises(UsageError, match="symbolic link"), hostlock.measuring("me"):
        pass
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder of another user's needs root")
def test_a_lock_folder_of_another_user_is_refused(default_lock):
    default_lock.mkdir()
    os.chown(default_lock, 12345, 12345)
    with pytest.raises(UsageError, match="belongs to uid 12345"), hostlock.measuring("me"):
        pass
    assert list(default_lock.iterdir()) == []


@pytest.mark.slow  # starts a process
def test_the_wait_line_never_names_an_exited_process_as_the_holder(tmp_path, monkeypatch):
    # The file names a process that has exited, while a process that did not record itself holds the lock.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock = tmp_path / "measure.lock"
    lock.write_text(json.dumps({"pid": gone.pid, "study": "gone-study"}))
    monkeypatch.setenv(hostlock.LOCK_ENV, str(lock))
    code = f"import fcntl, time\nf = open({str(lock)!r}, 'r+')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(1.5)\n"
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    messages = []
    with hostlock.measuring("me", on_wait=messages.append):
        pass
    holder.wait()
    assert len(messages) == 1
    assert f"held by pid {gone.pid}" not in messages[0]
    assert "did not record itself" in messages[0] and "no longer running" in messages[0]


def test_the_lock_is_reentrant_in_one_thread(tmp_path, monkeypatch):
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path / "measure.lock"))
    with hostlock.measuring("outer"), hostlock.measuring("inner") as waited:
        assert waited == 0.0
        assert json.loads((tmp_path / "measure.lock").read_text())["study"] == "outer"


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
