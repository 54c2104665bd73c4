"""Issue 44, item 5: an image whose file name is not UTF-8 (``images/train/x_\\xff.jpg`` with its label) is
left out of every listing with one line naming it, never a crash: a trial's list file, the label-cache
build's, a trial request's subset and a prepared copy (whose worker decoded the surrogate-escaped name and
died: SIGSEGV with one job, "a worker process died" with two).

The trainers cannot be handed such a name: Ultralytics reads speedopt's list file as UTF-8 text, classic
YOLOv5 hashes the names with ``str.encode()``. The fast cases call the library; the slow ones run the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from speedopt import data, measure
from speedopt.engines._ultralytics_labels import _listing
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from tests.faults.conftest import Faults, no_traceback

BAD = b"x_\xff"  # not UTF-8: os.fsdecode gives "x_\udcff"
SHOWN = "x_\\xff.jpg"  # as the line prints it


def _with_bad_name(faults: Faults) -> Path:
    """A demo dataset plus one train image (a copy of the first) named ``x_\\xff.jpg``, with its label."""
    yaml_path = faults.dataset(train=8, val=2)
    train, labels = yaml_path.parent / "images" / "train", yaml_path.parent / "labels" / "train"
    first = sorted(train.iterdir())[0]
    try:
        target = os.path.join(os.fsencode(train), BAD + b".jpg")
        shutil.copyfile(first, target)
    except (OSError, UnicodeError) as exc:
        pytest.skip(f"this filesystem refuses a file name that is not UTF-8: {exc}")
    shutil.copyfile(labels / f"{first.stem}.txt", os.path.join(os.fsencode(labels), BAD + b".txt"))
    return yaml_path


def _named_once(text: str) -> None:
    lines = [line for line in text.splitlines() if SHOWN in line]
    assert len(lines) == 1 and "not UTF-8" in lines[0], text


def test_the_listing_leaves_the_name_out_and_hands_it_back(faults: Faults) -> None:
    yaml_path = _with_bad_name(faults)
    left: list[Path] = []
    listed = data.list_images(yaml_path.parent / "images" / "train", left)
    assert len(listed) == 8 and all(str(p).isprintable() and str(p).encode() for p in listed)
    assert [os.fsencode(p.name) for p in left] == [BAD + b".jpg"]
    ds = data.load(yaml_path)
    assert len(ds.train_images) == 8 and [os.fsencode(p.name) for p in ds.left_out] == [BAD + b".jpg"]
    _named_once(ds.left_out_note)


def test_only_such_names_in_a_split_is_one_line(faults: Faults) -> None:
    yaml_path = _with_bad_name(faults)
    val = yaml_path.parent / "images" / "val"
    for image in val.iterdir():
        image.unlink()
    shutil.copyfile(os.path.join(os.fsencode(yaml_path.parent / "images" / "train"), BAD + b".jpg"),
                    os.path.join(os.fsencode(val), BAD + b".jpg"))
    with pytest.raises(UsageError, match="no images in the val split") as caught:
        data.load(yaml_path)
    assert "\n" not in str(caught.value) and SHOWN in str(caught.value) and "not UTF-8" in str(caught.value)


def test_the_trainers_list_file_is_utf8_without_the_name(faults: Faults, tmp_path: Path) -> None:
    yaml_path = _with_bad_name(faults)
    listing = Path(_listing(str(yaml_path.parent / "images" / "train"), tmp_path))
    lines = listing.read_bytes().decode("utf-8-sig").splitlines()  # strict: as Ultralytics' get_img_files reads it
    assert len(lines) == 8 and not any("x_" in line for line in lines)


def test_a_trial_request_notes_the_name_and_leaves_it_out(faults: Faults) -> None:
    yaml_path = _with_bad_name(faults)
    knobs = Knobs(model="yolov5n", imgsz=64, batch=2, workers=0)
    request = measure.make_request(str(yaml_path), knobs, measure.TrialOptions(device="cpu", steps=2, warmup=1))
    _named_once("\n".join(request.notes))
    assert request.images_total == 8 and all(str(p).encode() for p in request.train_subset)


def test_prepare_with_workers_leaves_the_name_out(faults: Faults) -> None:
    yaml_path = _with_bad_name(faults)
    ds = data.load(yaml_path)
    report = data.prepare(ds, data.PrepareSpec(imgsz=32), out=faults.work / "copy", jobs=2)
    assert report.copy.train_images == 8 and report.copy.corrupt == ()
    _named_once("\n".join(report.notes))
    copied = [os.fsencode(p) for p in (faults.work / "copy").rglob("*")]
    assert copied and not any(b"\xff" in p for p in copied)


def test_prepare_refuses_an_out_that_is_not_utf8(faults: Faults) -> None:
    yaml_path = faults.dataset(train=3, val=1)
    out = os.fsdecode(os.path.join(os.fsencode(faults.work), BAD))
    with pytest.raises(UsageError, match=r"--out .*x_\\xff is not a UTF-8 path"):
        data.prepare(data.load(yaml_path), data.PrepareSpec(imgsz=32), out=Path(out), jobs=1)
    assert not os.path.exists(out)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_prepare_cli_leaves_the_name_out(faults: Faults, jobs: str) -> None:
    yaml_path = _with_bad_name(faults)
    faults.watch(yaml_path.parent)
    done = faults.run("prepare", "--data", str(yaml_path), "--imgsz", "32", "--out", str(faults.work / "copy"), "--jobs", jobs)
    no_traceback(done)
    assert done.returncode == 0, (done.returncode, (done.stdout + done.stderr)[-2000:])
    _named_once(done.stdout + done.stderr)
    faults.unchanged()


@pytest.mark.slow
def test_a_trial_on_such_a_dataset_runs(faults: Faults) -> None:
    yaml_path = _with_bad_name(faults)
    done = faults.run(
        "trial", "--data", str(yaml_path), "--model", "yolov5n", "--imgsz", "64", "--batch", "4", "--steps", "2",
        "--warmup", "1", "--device", "cpu", "--json", timeout=600,
        env={"TORCHINDUCTOR_CACHE_DIR": str(faults.root / "inductor")},
    )
    no_traceback(done)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and "UnicodeEncodeError" not in done.stdout + done.stderr
    _named_once("\n".join(result["notes"]))
