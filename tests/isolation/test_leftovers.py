"""What a killed run leaves behind is recorded before it exists and swept at the next start, and the
sweep never touches what a live run holds, the user's own files, or anything that is not ours."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest

from speedopt.errors import UsageError
from speedopt.isolation import _leftovers as leftovers
from speedopt.measure import no_new_npy


@pytest.fixture
def private(tmp_path, monkeypatch):
    """A private temp folder and state folder for this test (both read at each use)."""
    tmp, state = tmp_path / "tmp", tmp_path / "state"
    tmp.mkdir()
    (tmp_path / "short").mkdir()
    monkeypatch.setattr(leftovers, "SHORT_ROOT", tmp_path / "short")  # the sweep looks there too, not in /tmp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv(leftovers.STATE_ENV, str(state))
    return tmp, state


def _holder(code: str, env: dict[str, str]) -> subprocess.Popen:
    """Another process that runs ``code`` (which prints a line when ready), then sleeps until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code) + "\nimport time\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, **env},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_private_folder_is_swept_only_once_its_owner_is_dead(private):
    tmp, state = private
    env = {"TMPDIR": str(tmp), leftovers.STATE_ENV: str(state)}
    owner = _holder("from speedopt.isolation import private_folder\nprivate_folder()\nprint('ready', flush=True)", env)
    folders = [p for p in tmp.iterdir() if p.name.startswith("speedopt-")]
    assert len(folders) == 1 and json.loads((folders[0] / "owner.json").read_text())["pid"] == owner.pid
    assert leftovers.sweep() == (0, 0) and folders[0].exists()  # alive: never removed
    _kill(owner)
    assert leftovers.sweep() == (1, 0) and not folders[0].exists()


def test_a_folder_without_an_owner_or_of_someone_else_is_left_alone(private):
    tmp, _ = private
    (tmp / "speedopt-old").mkdir()  # an older speedopt's, maybe running: no owner recorded
    other = tmp / "speedopt-other"
    other.mkdir()
    (other / "owner.json").write_text("{}")
    if os.geteuid() == 0:
        os.chown(other, 12345, 12345)
    link = tmp / "speedopt-link"
    link.symlink_to(tmp / "speedopt-old")
    leftovers.sweep()
    assert (tmp / "speedopt-old").is_dir() and link.is_symlink()
    assert other.is_dir() == (os.geteuid() == 0)  # root: another uid's folder stays


def test_this_process_folders_are_removed_with_their_lease(private):
    folder = leftovers.private_folder("speedopt-verify-")
    assert folder.name.startswith("speedopt-verify-") and leftovers.shared_fds()
    assert leftovers.sweep() == (0, 0)  # our own: held
    leftovers.remove_private_folder(folder)
    assert not folder.exists() and leftovers.shared_fds() == ()
    with pytest.raises(ValueError):
        leftovers.private_folder("elsewhere-")


def test_a_dead_trials_npy_files_are_removed_and_nothing_else(private, tmp_path):
    _, state = private
    images = tmp_path / "images"
    images.mkdir()
    users = images / "a.npy"
    users.write_bytes(b"the user's own cache")
    trials = images / "b.npy"
    label = images / "b.txt"
    label.write_text("0 0.5 0.5 0.1 0.1")
    target = tmp_path / "precious.npy"
    target.write_bytes(b"keep")
    link = images / "c.npy"
    env = {leftovers.STATE_ENV: str(state)}
    code = f"""
        from pathlib import Path
        from speedopt.measure import no_new_npy
        cm = no_new_npy([Path({str(images / 'a.jpg')!r}), Path({str(images / 'b.jpg')!r}), Path({str(images / 'c.jpg')!r})])
        cm.__enter__()
        Path({str(trials)!r}).write_bytes(b"trial")
        Path({str(link)!r}).symlink_to({str(target)!r})
        print('ready', flush=True)
        """
    holder = _holder(code, env)
    (manifest,) = state.glob("npy-*.json")
    assert sorted(json.loads(manifest.read_text())["files"]) == [str(trials), str(link)]  # a.npy was the user's
    assert leftovers.sweep() == (0, 0) and trials.exists()  # alive: kept
    _kill(holder)
    assert leftovers.sweep() == (0, 2)
    assert not trials.exists() and not link.is_symlink()
    assert users.read_bytes() == b"the user's own cache" and target.read_bytes() == b"keep" and label.exists()
    assert list(state.iterdir()) == []


def test_a_hostile_manifest_removes_only_npy_files(private, tmp_path):
    _, state = private
    state.mkdir(mode=0o700)
    data = tmp_path / "data.yaml"
    data.write_text("path: .")
    npy = tmp_path / "x.npy"
    npy.write_bytes(b"x")
    folder = tmp_path / "folder.npy"
    folder.mkdir()
    (state / "npy-1-dead.json").write_text(json.dumps({"files": [str(data), str(folder), "relative.npy", 7, str(npy)]}))
    (state / "npy-2-garbage.json").write_text("not json")
    assert leftovers.sweep() == (0, 1)
    assert data.exists() and folder.is_dir() and not npy.exists() and list(state.iterdir()) == []


def test_files_a_live_manifest_lists_are_a_trials_not_the_users(private, tmp_path):
    _, state = private
    image = tmp_path / "a.jpg"
    npy = tmp_path / "a.npy"
    holder = _holder(
        f"""
        from pathlib import Path
        from speedopt.measure import no_new_npy
        cm = no_new_npy([Path({str(image)!r})])
        cm.__enter__()
        Path({str(npy)!r}).write_bytes(b"another trial's")
        print('ready', flush=True)
        """,
        {leftovers.STATE_ENV: str(state)},
    )
    with no_new_npy([image]):  # it exists, but another trial wrote it: ours to remove too, never "the user's"
        pass
    assert not npy.exists()
    _kill(holder)


def test_a_state_folder_someone_else_controls_is_refused(private, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "state-link"
    link.symlink_to(elsewhere)
    monkeypatch.setenv(leftovers.STATE_ENV, str(link))
    with pytest.raises(UsageError, match="symbolic link"), no_new_npy([tmp_path / "a.jpg"]):
        pass
    assert list(elsewhere.iterdir()) == []


def test_a_dead_runs_short_socket_folder_is_swept_too(private):
    # A job's sockets go to a short folder in /tmp when TMPDIR is too long for them (measure._runner).
    tmp, state = private
    short = leftovers.SHORT_ROOT
    code = (f"from pathlib import Path\nfrom speedopt.isolation import _leftovers as l\nl.SHORT_ROOT = Path({str(short)!r})\n"
            "l.private_folder('speedopt-tmp-', short=True)\nprint('ready', flush=True)")
    owner = _holder(code, {"TMPDIR": str(tmp), leftovers.STATE_ENV: str(state)})
    [folder] = list(short.iterdir())
    assert leftovers.sweep() == (0, 0) and folder.exists()  # alive: never removed
    _kill(owner)
    assert leftovers.sweep() == (1, 0) and not folder.exists()
    assert leftovers.socket_fits("/tmp") and not leftovers.socket_fits("/" + "t" * 75)
