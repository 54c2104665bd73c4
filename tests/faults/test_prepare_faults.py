"""`speedopt prepare` against a user's own folder, a SIGKILL, and an absurd ``--jobs``: it deletes only what
it wrote (its record says which), leaves no worker behind, and starts no more workers than can run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedopt import data, machine
from speedopt.data._prepare import _jobs
from tests.cli.test_prepare_cli import Held, _held_until_images_appear
from tests.faults.conftest import Faults, one_line_error


def _prepare(faults: Faults, yaml_path: Path, out: Path, imgsz: int, jobs: int = 1) -> subprocess.CompletedProcess:
    return faults.run("prepare", "--data", str(yaml_path), "--imgsz", str(imgsz), "--out", str(out), "--jobs", str(jobs))


# ------------------------------------------------------------------ item 2: the user's files in --out


def test_another_size_at_an_out_holding_the_users_files_is_refused(faults):
    yaml_path = faults.dataset(train=3, val=1)
    out = faults.work / "f2"
    assert _prepare(faults, yaml_path, out, 32).returncode == 0
    (out / "README.txt").write_text("my notes")
    (out / "keep.dat").write_bytes(b"mine")
    faults.watch(out)
    line = one_line_error(_prepare(faults, yaml_path, out, 64), str(out), "did not write", "README.txt")
    assert "2 file(s)" in line, line
    faults.unchanged()


def test_the_same_settings_at_an_out_holding_stray_images_and_text_are_refused(faults):
    yaml_path = faults.dataset(train=3, val=1)
    out = faults.work / "f2"
    assert _prepare(faults, yaml_path, out, 32).returncode == 0
    (out / "images" / "train" / "holiday.jpg").write_bytes(b"my photo")
    (out / "labels" / "train" / "notes.txt").write_text("mine")
    (out / "mine").mkdir()
    (out / "mine" / "a.txt").write_text("counted with its folder")
    faults.watch(out)
    one_line_error(_prepare(faults, yaml_path, out, 32), "did not write", "3 file(s)")
    faults.unchanged()


@pytest.mark.parametrize("marker", ["x", '{"spec": {"imgsz": 32, "format": "jpg", "quality": 100}}'])
def test_a_stray_marker_does_not_make_a_folder_speedopts(faults, marker):
    yaml_path = faults.dataset(train=3, val=1)
    out = faults.work / "mine"
    (out / "images").mkdir(parents=True)
    (out / "notes.txt").write_text("keep me")
    (out / "images" / "a.png").write_bytes(b"mine")
    (out / ".speedopt-preparing").write_text(marker)
    faults.watch(out)
    one_line_error(_prepare(faults, yaml_path, out, 64), "did not write", "notes.txt")
    faults.unchanged()


def test_a_trainers_label_cache_in_the_copy_is_neither_refused_nor_removed(faults):
    yaml_path = faults.dataset(train=3, val=1)
    out = faults.work / "copy"
    assert _prepare(faults, yaml_path, out, 32).returncode == 0
    cache = out / "labels" / "train.cache"  # what both trainers write beside a label folder
    cache.write_bytes(b"labels")
    beside = out / "images" / "train" / f"{sorted((out / 'images' / 'train').iterdir())[0].stem}.npy"  # cache=disk
    beside.write_bytes(b"pixels")
    done = _prepare(faults, yaml_path, out, 32)
    assert done.returncode == 0 and "0 written, 4 reused" in done.stdout, done.stderr
    assert cache.read_bytes() == b"labels" and beside.read_bytes() == b"pixels"
    assert json.loads((out / data.MANIFEST).read_text())["images"] == 4


# ------------------------------------------------------------------ item 3: the workers of a killed run


def _command(process) -> str:
    import psutil

    try:
        return " ".join(process.cmdline())
    except psutil.Error as error:
        return f"<{type(error).__name__}>"


def _running_after(processes: list, seconds: float) -> list:
    """Those of ``processes`` still running (a zombie is not: it waits for pid 1 to reap it) after ``seconds``."""
    import psutil

    def running(process: psutil.Process) -> bool:
        try:
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + seconds
    while any(map(running, processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in processes if running(p)]


@contextlib.contextmanager
def _held_prepare(faults: Faults, images: int, jobs: int) -> Iterator[tuple[subprocess.Popen, list]]:
    """A real ``speedopt prepare --jobs`` of camera-size images, held on one of them (a FIFO) once it has
    written an image: its process and every process it started then. Each is killed after, by pid."""
    import psutil

    yaml_path = data.generate(faults.root / "big", data.DemoSpec(train=images - 4, val=4, width=1280, height=960))
    held = Held(yaml_path)
    out = faults.work / "copy"
    child = subprocess.Popen(
        [sys.executable, "-m", "speedopt", "prepare", "--data", str(yaml_path), "--imgsz", "320", "--out", str(out), "--jobs", str(jobs)],
        cwd=faults.work, env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(faults.tmp)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    started: list[psutil.Process] = []
    try:
        _held_until_images_appear(child, out)
        started = psutil.Process(child.pid).children(recursive=True)
        yield child, started
    finally:
        child.kill()
        child.wait()
        held.release()
        for process in started:
            if process.is_running():
                process.kill()


@pytest.mark.slow  # a real prepare process and its spawned workers
def test_a_sigkilled_prepare_leaves_no_worker_or_resource_tracker(faults):
    with _held_prepare(faults, images=28, jobs=2) as (child, started):  # the workers are alive when the kill lands
        commands = [_command(p) for p in started]
        child.send_signal(signal.SIGKILL)
        child.wait()
        alive = _running_after(started, 5.0)
        survivors = [(p.pid, _command(p)) for p in alive]
    assert len(started) >= 3 and any("resource_tracker" in c for c in commands), commands  # 2 workers + the tracker
    assert not alive, survivors


# ------------------------------------------------------------------ item 5: --jobs bounded


def _one_image(faults: Faults) -> Path:
    """A dataset of one image (its val split is its train folder): a prepare of it starts no worker."""
    yaml_path = faults.dataset(train=1, val=1)
    yaml_path.write_text(yaml_path.read_text().replace("images/val", "images/train"))
    return yaml_path


def test_jobs_past_the_sane_maximum_are_refused(faults):
    yaml_path = _one_image(faults)
    out = faults.work / "copy"
    faults.watch(faults.work)
    one_line_error(_prepare(faults, yaml_path, out, 32, jobs=100000), "--jobs", "at most", "100000")
    faults.unchanged()


def test_jobs_are_capped_at_the_images_with_a_note(faults):
    cores = machine.cpu_cores()
    done = _prepare(faults, _one_image(faults), faults.work / "one", 32, jobs=8)
    assert done.returncode == 0, done.stderr
    assert "with 1 job(s)" in done.stdout, done.stdout
    assert f"note: --jobs 8 -> 1: at most one job per CPU core ({cores}) and per image (1)" in done.stdout, done.stdout
    assert json.loads((faults.work / "one" / data.MANIFEST).read_text())["jobs"] == 1
    assert _jobs(None, 1) == (1, ()) and _jobs(None, 10**6) == (cores, ())  # the default: no note


@pytest.mark.slow  # a real prepare process and its spawned workers
def test_jobs_are_capped_at_the_cores(faults):
    cores = machine.cpu_cores()
    with _held_prepare(faults, images=cores * 4 + 4, jobs=64) as (_, started):  # 64: the most --jobs allowed here
        commands = [_command(p) for p in started]
    workers = [c for c in commands if "spawn_main" in c]
    assert len(workers) == cores, commands  # before: one per image, 4x the cores and more
