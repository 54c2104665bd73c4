"""`speedopt prepare` as a user runs it: summary, refusals, and a run killed with SIGKILL then resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import pytest

from speedopt import data, machine
from speedopt.cli import build_parser
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """A 9-image demo set at 640x480 (its data.yaml), read-only here."""
    return data.generate(tmp_path_factory.mktemp("cli-prep") / "shapes", data.DemoSpec(train=6, val=3, width=640, height=480))


def test_help_explains_the_formats(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["prepare", "--help"])
    text = capsys.readouterr().out
    assert exit_.value.code == 0 and "usage: speedopt prepare" in text
    for words in ("jpg", "png", "npy", "quality 100", "--jobs", "`data` knob"):
        assert words in text.replace("\n", " "), words


def test_prepare_prints_one_summary(demo, tmp_path):
    done = run_cli("prepare", "--data", str(demo), "--imgsz", "320", "--out", str(tmp_path / "copy"), "--jobs", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "9 written, 0 reused" in out and f"images/s with {min(2, machine.cpu_cores())} job(s)" in out
    assert "MB vs source" in out and f"data.yaml: {tmp_path / 'copy' / 'data.yaml'}" in out
    assert "corrupt" not in out and (tmp_path / "copy" / data.MANIFEST).is_file()
    again = run_cli("prepare", "--data", str(demo), "--imgsz", "320", "--out", str(tmp_path / "copy"), cwd=tmp_path)
    assert again.returncode == 0 and "0 written, 9 reused" in again.stdout and "every image was current" in again.stdout


def test_default_out_under_the_working_directory_and_corrupt_line(tmp_path):
    yaml_path = data.generate(tmp_path / "shapes", data.DemoSpec(train=4, val=2, width=320, height=240))
    bad = data.load(yaml_path).train_images[0]
    bad.write_bytes(b"")
    done = run_cli("prepare", "--data", str(yaml_path), "--imgsz", "128", "--format", "png", "--jobs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if "corrupt" in line)
    assert line.startswith("skipped 1 corrupt image(s)") and str(bad) in line
    copies = list((tmp_path / "prepared").glob("shapes-*/128-png"))
    assert len(copies) == 1 and (copies[0] / data.MANIFEST).is_file()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--imgsz", "100"], "multiple of 32"),
        (["--imgsz", "320", "--quality", "0"], "quality"),
        (["--imgsz", "320", "--format", "bmp"], "invalid choice"),
        (["--imgsz", "320", "--jobs", "0"], "--jobs"),
        (["--imgsz", "320", "--out", "FOREIGN"], "not a speedopt prepared copy"),
    ],
)
def test_refusals_are_one_line_and_exit_2(demo, tmp_path, args, words):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    args = [str(foreign) if a == "FOREIGN" else a for a in args]
    done = run_cli("prepare", "--data", str(demo), *args, cwd=tmp_path)
    assert done.returncode == 2 and words in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"] and not (tmp_path / "prepared").exists()


def _final_images(out: Path) -> list[Path]:
    return [p for p in out.rglob("*.jpg") if not p.name.startswith(".")]


class Held:
    """One train image replaced by a FIFO that nobody writes yet: whoever opens it to decode it waits there
    until :meth:`release`. So a run is held part-way, for certain, until the test has sent its signal and
    the run has ended: the race between the signal and the end of the work is the test's, not the load's."""

    def __init__(self, yaml_path: Path):
        images = sorted((yaml_path.parent / "images" / "train").glob("*.jpg"))
        self.path = images[len(images) // 2]
        self.original = self.path.read_bytes()
        self.path.unlink()
        os.mkfifo(self.path)
        self.released = False

    def release(self) -> None:
        """Let a reader blocked on the FIFO go on (it reads nothing: an undecodable image), then put the real image back."""
        if self.released:
            return
        self.released = True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody is reading, so nobody waits
            os.close(fd)
        except OSError:
            pass
        self.path.unlink()
        self.path.write_bytes(self.original)


def _held_until_images_appear(child: subprocess.Popen, out: Path) -> None:
    deadline = time.monotonic() + 120  # a hang guard only: the run cannot finish while the FIFO holds it
    while not _final_images(out) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert child.poll() is None, "the run ended while an image was held"
    assert _final_images(out), "no image was written in 120 s"


@pytest.mark.slow  # a real prepare process (and, with --jobs 2, its spawned workers)
def test_killed_run_leaves_only_whole_files_and_a_rerun_resumes(tmp_path):
    yaml_path = data.generate(tmp_path / "big", data.DemoSpec(train=32, val=8, width=1280, height=960))
    held = Held(yaml_path)
    out = tmp_path / "copy"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "speedopt", "prepare", "--data", str(yaml_path), "--imgsz", "320", "--out", str(out), "--jobs", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _held_until_images_appear(child, out)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
        held.release()
    assert child.returncode == -signal.SIGKILL
    assert not (out / data.MANIFEST).exists() and (out / ".speedopt-preparing").is_file()
    finals = _final_images(out)
    assert 1 <= len(finals) < 40
    for image in finals:  # nothing under a final name is half-written
        decoded = cv2.imread(str(image), cv2.IMREAD_COLOR)
        assert decoded is not None and max(decoded.shape[:2]) == 320, image
    assert data.find_copy(data.load(yaml_path), data.PrepareSpec(320), out=out) is None

    report = data.prepare(data.load(yaml_path), data.PrepareSpec(320), out=out, jobs=2)
    assert report.reused == len(finals) and report.reused + report.written == 40 and report.copy.images == 40
    assert (out / data.MANIFEST).is_file() and not (out / ".speedopt-preparing").exists()
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    assert len(_final_images(out)) == 40


@pytest.mark.slow  # a real prepare process and its spawned workers
def test_ctrl_c_stops_the_workers_and_leaves_no_half_written_file(tmp_path):
    import psutil

    yaml_path = data.generate(tmp_path / "big", data.DemoSpec(train=32, val=8, width=1280, height=960))
    held = Held(yaml_path)
    out = tmp_path / "copy"
    child = subprocess.Popen(
        [sys.executable, "-m", "speedopt", "prepare", "--data", str(yaml_path), "--imgsz", "320", "--out", str(out), "--jobs", "2"],
        cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _held_until_images_appear(child, out)
        workers = psutil.Process(child.pid).children(recursive=True)
        child.send_signal(signal.SIGINT)
        # The held image stays held until the run has ended: the work cannot finish before the signal is
        # handled, however loaded the machine (stopping the workers ends the one blocked on the FIFO)
        _, stderr = child.communicate(timeout=120)
    finally:
        held.release()
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr, stderr
    _, alive = psutil.wait_procs(workers, timeout=30)  # a hang guard only
    assert workers
    assert not alive, [(p.pid, p.cmdline()) for p in alive if p.is_running()]
    for image in _final_images(out):
        assert cv2.imread(str(image), cv2.IMREAD_COLOR) is not None, image
    assert not (out / data.MANIFEST).exists()
