"""`speedopt prepare` against a user's own folder: it deletes only what it wrote (its record says which)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from speedopt import data
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
