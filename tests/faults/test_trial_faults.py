"""Faults of `speedopt trial` (issue 12): hostile and faulty input, and signals at each phase of a trial.

Each case runs the real CLI in a private temp folder (and, where a trial may record disk-cache files,
a private state folder), then checks what it said, how it exited, and that the user's dataset and
the temp folder are as they were. A SIGKILL runs no clean-up at all, so there the promise is about
the next start: its sweep restores the dataset and empties the temp folder.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from speedopt.isolation import LOCK_ENV, STATE_ENV
from tests.conftest import run_cli
from tests.faults.conftest import Faults, freeze, needs_classic_yolov5, one_line_error, tree

# Tiny trials: 64 px, batch 4, CPU. LONG measures long enough (60 steps) to be caught while measuring.
FAST = ["--model", "yolov5n", "--imgsz", "64", "--batch", "4", "--steps", "2", "--warmup", "1", "--device", "cpu"]
LONG = ["--model", "yolov5n", "--imgsz", "64", "--batch", "4", "--steps", "60", "--max-steps", "60", "--warmup", "1", "--device", "cpu"]


# -- helpers ---------------------------------------------------------------------------------------


@pytest.fixture
def state(faults: Faults) -> dict[str, str]:
    """A private state folder (where trials record their disk-cache files), as the env of a run."""
    return {STATE_ENV: str(faults.root / "state")}


def _files(root: Path) -> dict[str, str]:
    """The dataset's files with their digests, without the trainer's label cache (labels/*.cache)."""
    return {k: v for k, v in tree(root).items() if not k.endswith(".cache")}


def _npy(root: Path) -> list[Path]:
    return sorted(root.rglob("*.npy"))


def _records(env: dict[str, str]) -> list[str]:
    folder = Path(env[STATE_ENV])
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _start(faults: Faults, *args: str, env: dict[str, str] | None = None, session: bool = False) -> subprocess.Popen:
    """`speedopt trial ARGS` in the background, as a user would start it (output to files beside the case)."""
    out = open(faults.root / "trial.out", "w")
    return subprocess.Popen(
        [sys.executable, "-m", "speedopt", "trial", *args],
        cwd=faults.work,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(faults.tmp), **(env or {})},  # env may set another TMPDIR
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=session,
    )


def _output(faults: Faults) -> str:
    return (faults.root / "trial.out").read_text()


def _wait_for(condition: Callable[[], object], proc: subprocess.Popen, faults: Faults, what: str, timeout: float = 180) -> None:
    """Poll until ``condition`` holds; fail with the trial's output if it ends or times out first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the trial ended (code {proc.returncode}) before {what}:\n{_output(faults)[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {timeout} s:\n{_output(faults)[-3000:]}")
        time.sleep(0.02)


def _phase(tmp: Path) -> str | None:
    """The running trial's phase, from its child's progress file (setup, warmup, measure); ``tmp``: its temp folder."""
    for progress in tmp.glob("speedopt-*/progress.json"):
        try:
            return str(json.loads(progress.read_text()).get("phase"))
        except (OSError, ValueError):
            return None
    return None


def _children_gone(tmp: Path, timeout: float = 60) -> None:
    """Wait until no process of the killed trial runs (its child notices the parent's death and kills its group)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(str(tmp) in " ".join(p.info["cmdline"] or ()) for p in psutil.process_iter(["cmdline"])):
            return
        time.sleep(0.1)
    pytest.fail("the killed trial's child processes still run")


def _kill(tmp: Path, proc: subprocess.Popen, sig: int = signal.SIGKILL, group: bool = False) -> None:
    """Signal the trial (or its whole process group), then wait until nothing of it runs."""
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    proc.wait(timeout=120)
    _children_gone(tmp)


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stdout + done.stderr


def _text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def _crafted(path: Path, module: str, name: str, args: tuple[str, ...], legacy: bool) -> Path:
    """A torch checkpoint ``{"model": module.name(*args)}``: unpickling it for real calls that function."""
    body = b"\x80\x04}" + _text("model") + b"c" + f"{module}\n{name}\n".encode() + b"(" + b"".join(map(_text, args)) + b"tRs."
    if legacy:  # torch's pre-1.6 format: magic number, protocol, system info, then the object
        info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
        head = b"".join(pickle.dumps(x, protocol=2) for x in (0x1950A86A20F9469CFC6C, 1001, info))
        path.write_bytes(head + body + pickle.dumps([], protocol=2))
    else:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("evil/data.pkl", body)
            archive.writestr("evil/version", "3\n")
            archive.writestr("evil/byteorder", "little")
    return path


# -- bad numbers (item 15): finite and positive, checked in one place for trial and search ------------


@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.parametrize("option", ["--timeout", "--ram-limit"])
def test_a_trial_refuses_a_timeout_or_ram_limit_that_is_no_finite_number(faults, option, value):
    """A nan timeout never fires; a nan or inf RAM limit is no number of bytes."""
    data = faults.dataset()
    faults.watch(data.parent)
    one_line_error(faults.run("trial", "--data", str(data), *FAST, option, value), option, "finite")
    faults.unchanged()


@pytest.mark.parametrize("option", ["--trial-timeout", "--ram-limit", "--timeout"])
def test_search_refuses_the_same_values_with_the_same_check(faults, option):
    data = faults.dataset()
    faults.watch(data.parent)
    storage = faults.work / "s.db"
    done = faults.run(
        "search", "--data", str(data), option, "nan", "--trials", "1", "--quality", "off", "--repeats", "0",
        "--steps", "2", "--warmup", "1", "--device", "cpu", "--storage", f"sqlite:///{storage}",
    )
    one_line_error(done, option, "finite")
    assert not storage.exists()
    faults.unchanged()


# -- the host lock (items 4, 16b) ----------------------------------------------------------------------


def test_a_link_planted_at_the_lock_file_is_not_written_through(faults):
    data = faults.dataset()
    victim = faults.root / "victim.txt"
    victim.write_text("another user's file")
    link = faults.root / "planted.lock"
    link.symlink_to(victim)
    one_line_error(faults.run("trial", "--data", str(data), *FAST, env={LOCK_ENV: str(link)}), "symbolic link", str(link))
    assert victim.read_text() == "another user's file"


def test_a_planted_default_lock_location_is_refused(faults):
    # Another local user plants links where speedopt's lock goes in the shared temp folder (now and before).
    data = faults.dataset()
    victim = faults.root / "victim.txt"
    victim.write_text("another user's file")
    elsewhere = faults.root / "elsewhere"
    elsewhere.mkdir()
    (faults.tmp / f"speedopt-lock-{os.getuid()}").symlink_to(elsewhere)
    (faults.tmp / "speedopt-measure.lock").symlink_to(victim)
    done = faults.run("trial", "--data", str(data), *FAST, env={LOCK_ENV: ""})
    one_line_error(done, "symbolic link", f"speedopt-lock-{os.getuid()}")
    assert victim.read_text() == "another user's file" and list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's needs root to make")
def test_a_lock_folder_of_another_user_is_refused(faults):
    data = faults.dataset()
    planted = faults.tmp / f"speedopt-lock-{os.getuid()}"
    planted.mkdir()
    os.chown(planted, 12345, 12345)
    one_line_error(faults.run("trial", "--data", str(data), *FAST, env={LOCK_ENV: ""}), "belongs to uid 12345")
    assert list(planted.iterdir()) == []


@pytest.mark.slow  # starts processes
def test_the_lock_wait_line_never_names_an_exited_process_as_the_holder(faults):
    data = faults.dataset()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock = faults.root / "measure.lock"
    lock.write_text(json.dumps({"pid": gone.pid, "study": "gone-study"}))  # a stale record
    # The holder keeps the lock until the trial has said it waits (the test, not the machine's load, decides)
    code = f"import fcntl, sys\nf = open({str(lock)!r}, 'r+')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.readline()\n"
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # records nothing
    assert holder.stdout is not None and holder.stdin is not None and holder.stdout.readline().strip() == "held"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(faults.tmp), LOCK_ENV: str(lock)}
    trial = subprocess.Popen([sys.executable, "-m", "speedopt", "trial", "--data", str(data), *FAST, "--timeout", "1"],
                             cwd=faults.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert trial.stderr is not None
    seen = ""
    try:
        while "waiting for the host measurement lock" not in " ".join(seen.split()):
            line = trial.stderr.readline()
            assert line, f"the trial ended without waiting: {seen}"
            seen += line
    finally:
        holder.stdin.write("release\n")
        holder.stdin.close()
        holder.wait()
    rest = trial.stderr.read()  # not communicate(): it reads the pipe itself, past what readline() buffered
    assert trial.stdout is not None
    trial.stdout.read()
    trial.wait(timeout=300)
    said = " ".join((seen + rest).split())  # the console wraps long lines
    assert said.count("waiting for the host measurement lock") == 1, seen + rest
    assert f"held by pid {gone.pid}" not in said and f"pid {gone.pid}, study gone-study, which is no longer running" in said
    faults.unchanged()


# -- hostile checkpoints (item 3): never unpickled for real in speedopt's own process -------------------


@pytest.mark.parametrize(
    "module, name, command, legacy",
    [
        ("builtins", "open", False, False),  # zip format: creates the marker file
        ("posix", "system", True, True),  # torch's legacy format: runs a shell command
        ("ultralytics.utils", "os.system", True, False),  # a dotted name inside a package a checkpoint may use
    ],
)
def test_a_crafted_checkpoint_runs_nothing_and_is_refused(faults, module, name, command, legacy):
    data = faults.dataset()
    marker = faults.root / "pwned"
    args = (f"touch {marker}",) if command else (str(marker), "w")
    evil = _crafted(faults.root / "evil.pt", module, name, args, legacy)
    storage = faults.work / "s.db"
    faults.watch(data.parent)
    done = faults.run(
        "search", "--data", str(data), "--weights", str(evil), "--storage", f"sqlite:///{storage}",
        "--trials", "1", "--repeats", "0", "--steps", "2", "--warmup", "1", "--device", "cpu",
    )
    line = one_line_error(done, "--weights", f"{module}.{name}")
    assert "refusing" in line
    assert not marker.exists() and not storage.exists()
    faults.unchanged()


@pytest.mark.parametrize("given", ["trial --model", "search --baseline", "search --fix"])
def test_a_crafted_model_file_runs_nothing_and_is_refused(faults, given):
    # Round 2, item 1: a .pt given as the model went straight to the trainer, which unpickled it (the
    # payload's file appeared, exit 1). It is inspected as --weights is, for every way a model is given.
    data = faults.dataset()
    marker = faults.root / "pwned"
    evil = _crafted(faults.root / "evil.pt", "posix", "system", (f"touch {marker}",), legacy=False)
    storage = faults.work / "s.db"
    faults.watch(data.parent)
    command, option = given.split()
    value = {"--model": str(evil), "--baseline": f"model={evil} imgsz=64 batch=4 workers=0", "--fix": f"model={evil}"}[option]
    common = ["--data", str(data), "--steps", "2", "--warmup", "1", "--device", "cpu", option, value]
    if command == "search":
        common += ["--storage", f"sqlite:///{storage}", "--trials", "1", "--repeats", "0", "--quality", "off"]
    line = one_line_error(faults.run(command, *common), f"model {evil}", "posix.system")
    assert "refusing" in line
    assert not marker.exists() and not storage.exists()
    faults.unchanged()


def test_verify_refuses_a_crafted_model_that_a_study_names(faults):
    # A study may come from elsewhere (speedopt import): the model its recommendation names is inspected too.
    from optuna.trial import TrialState, create_trial

    from tests.reporting.test_verify import _stored_study

    data = faults.dataset()
    marker = faults.root / "pwned"
    evil = _crafted(faults.root / "evil.pt", "posix", "system", (f"touch {marker}",), legacy=True)
    url = f"sqlite:///{faults.work / 's.db'}"
    study, proto = _stored_study(data, url)
    config = {**proto.baseline.to_dict(), "model": str(evil)}
    attrs = {"status": "ok", "images_per_s": 10.0, "config": config, "feasible": True, "role": "baseline"}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=10.0, user_attrs=attrs))
    faults.watch(data.parent)
    line = one_line_error(faults.run("verify", "--storage", url, "--study", study.study_name), f"model {evil}", "posix.system")
    assert "refusing" in line and not marker.exists()
    faults.unchanged()


# -- cache=disk on a dataset folder that cannot be written (item 16c) ----------------------------------


def test_disk_cache_on_a_read_only_dataset_says_not_writable(faults):
    data = faults.dataset()
    faults.watch(data.parent)
    freeze(data.parent / "images" / "train")
    done = faults.run("trial", "--data", str(data), *FAST, "--cache", "disk", "--json")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "infeasible"
    assert "not writable" in result["message"] and str(data.parent / "images" / "train") in result["message"]
    faults.unchanged()


# -- signals at each phase of a trial (items 1, 9) -----------------------------------------------------


@pytest.mark.slow
def test_sigkill_during_setup_leaves_a_temp_folder_the_next_start_removes(faults, state):
    data = faults.dataset(train=32)
    before = _files(data.parent)
    proc = _start(faults, "--data", str(data), *LONG, env=state)
    _wait_for(lambda: list(faults.tmp.glob("speedopt-*/request.json")), proc, faults, "the trial's folder")
    _kill(faults.tmp, proc)
    assert list(faults.tmp.glob("speedopt-*"))  # no clean-up survives SIGKILL...
    _ok(faults.run("trial", "--data", str(data), *FAST, env=state))
    assert _files(data.parent) == before
    faults.unchanged()  # ...until the next start: the temp folder is empty again


@pytest.mark.slow
def test_sigkill_during_the_cache_fill_is_swept_by_the_next_start(faults, state):
    data = faults.dataset(train=32)
    before = _files(data.parent)
    proc = _start(faults, "--data", str(data), *LONG, "--cache", "disk", env=state)
    _wait_for(lambda: _npy(data.parent), proc, faults, "the first .npy file of the cache fill")
    _kill(faults.tmp, proc)
    assert _npy(data.parent)
    _ok(faults.run("trial", "--data", str(data), *FAST, env=state))
    assert _files(data.parent) == before and _records(state) == []
    faults.unchanged()


@pytest.mark.slow
@pytest.mark.parametrize("then", ["none", "disk"])
def test_sigkill_while_measuring_with_disk_cache_is_swept_by_the_next_trial(faults, state, then):
    # The trainer reads a leftover .npy in every cache mode; a cache=disk trial took them for the user's own.
    # The user's own disk cache of 5 images survives the kill and the sweep, byte for byte.
    import cv2
    import numpy as np

    data = faults.dataset(train=32)
    for image in sorted((data.parent / "images" / "train").glob("*.jpg"))[:5]:
        np.save(image.with_suffix(".npy"), cv2.imread(str(image)))  # as the trainer writes it
    before = _files(data.parent)
    proc = _start(faults, "--data", str(data), *LONG, "--cache", "disk", env=state)
    _wait_for(lambda: _phase(faults.tmp) == "measure", proc, faults, "measuring")
    _kill(faults.tmp, proc)
    assert len(_npy(data.parent)) == 36  # 32 train + 4 val images cached (5 of them the user's), then killed: nothing cleaned
    done = faults.run("trial", "--data", str(data), *FAST, "--cache", then, "--json", env=state)
    _ok(done)
    assert json.loads(done.stdout)["config"]["cache"] == then
    assert _files(data.parent) == before and _records(state) == []  # the user's 5 .npy files, and no other
    assert len(_npy(data.parent)) == 5
    faults.unchanged()


@pytest.mark.slow
def test_sigkill_of_a_classic_trials_process_group_while_measuring(faults, state):
    # Dataloader workers (the classic engine runs them on CPU) killed with the group leave temp files too:
    # in the child's own folder (the case's temp folder is short, as /tmp is), which the sweep removes.
    needs_classic_yolov5()
    data = faults.dataset(train=32)
    before = _files(data.parent)
    proc = _start(faults, "--data", str(data), "--engine", "yolov5", "--workers", "1", *LONG, "--cache", "disk", env=state, session=True)
    _wait_for(lambda: _phase(faults.tmp) == "measure", proc, faults, "measuring")
    _kill(faults.tmp, proc, group=True)
    assert _npy(data.parent) and list(faults.tmp.iterdir())
    _ok(faults.run("trial", "--data", str(data), *FAST, env=state))
    assert _files(data.parent) == before and _records(state) == []
    faults.unchanged()  # the temp folder is empty again


@pytest.mark.slow
def test_sigterm_while_measuring_cleans_up_before_it_exits(faults, state):
    data = faults.dataset(train=32)
    before = _files(data.parent)
    proc = _start(faults, "--data", str(data), *LONG, "--cache", "disk", env=state)
    _wait_for(lambda: _phase(faults.tmp) == "measure", proc, faults, "measuring")
    _kill(faults.tmp, proc, signal.SIGTERM)
    out = _output(faults)
    assert proc.returncode == 130 and "interrupted" in out and "Traceback" not in out, out[-3000:]
    assert _files(data.parent) == before and _records(state) == []  # at once: no next start needed
    faults.unchanged()


@pytest.mark.slow
def test_a_live_trials_npy_files_are_never_swept(faults, state):
    data = faults.dataset(train=32)
    before = _files(data.parent)
    image = sorted((data.parent / "images" / "train").glob("*.jpg"))[0]
    npy = image.with_suffix(".npy")
    code = f"""
import cv2, numpy as np, time
from pathlib import Path
from speedopt.measure import no_new_npy
held = no_new_npy([Path({str(image)!r})])
held.__enter__()
np.save({str(npy)!r}, cv2.imread({str(image)!r}))
print("ready", flush=True)
time.sleep(600)
"""
    env = {**os.environ, "TMPDIR": str(faults.tmp), **state}
    live = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)  # a trial caching to disk
    assert live.stdout is not None and live.stdout.readline().strip() == "ready"
    _ok(faults.run("trial", "--data", str(data), *FAST, env=state))
    assert npy.exists()  # alive: its files are not the sweep's
    live.kill()
    live.wait()
    _ok(faults.run("trial", "--data", str(data), *FAST, env=state))
    assert not npy.exists() and _files(data.parent) == before and _records(state) == []
    faults.unchanged()


# -- trials cross epoch ends (item 17) ------------------------------------------------------------------


@pytest.mark.slow
def test_a_classic_trial_longer_than_an_epoch_runs(faults):
    # 48 images at batch 8: an epoch is 6 batches, and 2 warm-up + 6 measured batches cross its end.
    needs_classic_yolov5()
    data = faults.dataset(train=48)
    done = faults.run(
        "trial", "--data", str(data), "--engine", "yolov5", "--model", "yolov5n", "--imgsz", "64", "--batch", "8",
        "--workers", "1", "--steps", "6", "--warmup", "2", "--device", "cpu", "--json",
    )
    _ok(done)
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["images_used"] == 48
    assert result["warmup"] + result["steps"] > 48 // 8
    faults.unchanged()


# -- a temp folder too long for sockets --------------------------------------------------------------


def _long_tmp(faults: Faults) -> Path:
    """A private temp folder whose path leaves no room for multiprocessing's AF_UNIX sockets (76+ bytes)."""
    tmp = faults.tmp / ("t" * max(1, 80 - len(os.fsencode(faults.tmp))))
    tmp.mkdir()
    assert len(os.fsencode(tmp)) >= 76
    return tmp


def _socket_folders() -> set[str]:
    return {p.name for p in Path("/tmp").glob("speedopt-tmp-*")}


@pytest.mark.slow
def test_a_trial_with_loader_workers_runs_under_a_temp_folder_too_long_for_sockets(faults: Faults) -> None:
    # Under a TMPDIR of 76 bytes or more, a loader worker's feeder thread failed ("OSError: AF_UNIX path too
    # long"), dropped the batch, and the trial waited for it until its timeout. (The classic engine: on CPU
    # Ultralytics runs workers=0 whatever it is asked.)
    needs_classic_yolov5()
    data = faults.dataset()
    tmp = _long_tmp(faults)
    before = _socket_folders()
    done = run_cli("trial", "--data", str(data), *FAST, "--engine", "yolov5", "--workers", "1", "--timeout", "90", "--json",
                   cwd=faults.work, env={"TMPDIR": str(tmp)}, process=True, timeout=200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "ok"
    assert sorted(p.name for p in tmp.iterdir()) == []  # nothing left in the user's temp folder ...
    assert _socket_folders() <= before  # ... nor in the short one the job's sockets used
    tmp.rmdir()
    faults.unchanged()


def test_a_search_under_a_temp_folder_too_long_for_sockets_says_what_it_means_for_the_real_run(
    faults: Faults, monkeypatch: pytest.MonkeyPatch
) -> None:
    from speedopt.search import SearchConfig, plan

    needs_classic_yolov5()
    monkeypatch.setattr(tempfile, "tempdir", str(_long_tmp(faults)))
    config = SearchConfig(data=str(faults.dataset()), device="cpu", engine="yolov5",  # Ultralytics runs workers=0 on CPU
                          baseline="model=yolov5n imgsz=64 batch=4 workers=1")
    notes = [n for n in plan(config).notes if "too long for the sockets" in n]
    assert len(notes) == 1 and "set TMPDIR to a path under 76 bytes" in notes[0], notes
    monkeypatch.setattr(tempfile, "tempdir", str(faults.tmp))
    assert not [n for n in plan(config).notes if "too long for the sockets" in n]
