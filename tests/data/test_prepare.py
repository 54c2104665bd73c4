"""`speedopt.data.prepare`: a resized copy of a real (demo) dataset, checked file by file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from speedopt import data, machine
from speedopt.errors import UsageError

DEMO = data.DemoSpec(train=6, val=3, width=640, height=480)  # larger than every imgsz below but 1600


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A 9-image demo set at 640x480, generated once for the module (its root); never changed."""
    return data.generate(tmp_path_factory.mktemp("prep-pristine") / "shapes", DEMO).parent


@pytest.fixture(scope="module")
def shared(tmp_path_factory, pristine) -> data.Dataset:
    """A copy of the pristine set that the tests here only read."""
    return data.load(_copy_of(pristine, tmp_path_factory.mktemp("prep") / "shapes"))


@pytest.fixture
def fresh(tmp_path, pristine) -> data.Dataset:
    """A copy of the pristine set of the test's own, to damage or change."""
    return data.load(_copy_of(pristine, tmp_path / "shapes"))


def _copy_of(root: Path, to: Path) -> Path:
    """A copy of the demo set at ``root`` under ``to`` (files and times), its data.yaml pointing at the copy."""
    shutil.copytree(root, to)
    spec = yaml.safe_load((to / "data.yaml").read_text())
    (to / "data.yaml").write_text(yaml.safe_dump({**spec, "path": str(to)}, sort_keys=False))
    return to / "data.yaml"


def _images(root: Path, suffix: str) -> list[Path]:
    return sorted(p for p in root.rglob(f"*{suffix}") if not p.name.startswith("."))


def _long_side(path: Path) -> int:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert image is not None, path
    return max(image.shape[:2])


def test_jpg_copy_has_every_image_resized_and_every_label_identical(shared, tmp_path):
    report = data.prepare(shared, data.PrepareSpec(320), out=tmp_path / "copy", jobs=2)
    copy = report.copy
    assert (copy.images, copy.train_images, report.written, report.reused, copy.corrupt) == (9, 6, 9, 0, ())
    outputs = _images(copy.root, ".jpg")
    assert len(outputs) == 9 and len([p for p in outputs if "val" in p.parts]) == 3  # val resized too
    assert all(_long_side(p) == 320 for p in outputs)
    for image in shared.train_images + shared.val_images:
        rel = image.relative_to(shared.root)
        out_label = data.label_path(copy.root / rel)
        assert out_label.read_bytes() == data.label_path(image).read_bytes()
    assert copy.bytes == sum(p.stat().st_size for p in outputs) and copy.bytes < copy.source_bytes
    assert report.images_per_s > 0 and copy.seconds > 0 and copy.jobs == min(2, machine.cpu_cores())  # at most one job per core
    manifest = json.loads((copy.root / data.MANIFEST).read_text())
    assert manifest["source_id"] == data.source_id(shared) == copy.source_id and manifest["spec"]["format"] == "jpg"
    assert not (copy.root / ".speedopt-preparing").exists()


def test_copy_yaml_trains_on_the_copy(shared, tmp_path):
    copy = data.prepare(shared, data.PrepareSpec(320), out=tmp_path / "copy", jobs=1).copy
    written = yaml.safe_load(copy.yaml_path.read_text())
    source = yaml.safe_load(shared.yaml_path.read_text())
    assert written["path"] == str(copy.root) and written["train"] == "images/train" and written["val"] == "images/val"
    assert written["names"] == source["names"] and "download" not in written
    again = data.load(copy.yaml_path)
    assert (len(again.train_images), len(again.val_images), again.names) == (6, 3, shared.names)
    assert data.find_copy(shared, data.PrepareSpec(320), out=tmp_path / "copy") == copy


@pytest.mark.parametrize("fmt", ["png", "npy"])
def test_lossless_formats(shared, tmp_path, fmt):
    copy = data.prepare(shared, data.PrepareSpec(256, fmt), out=tmp_path / fmt, jobs=1).copy
    pngs = _images(copy.root, ".png")
    assert len(pngs) == 9 and all(_long_side(p) == 256 for p in pngs)
    arrays = _images(copy.root, ".npy")
    if fmt == "png":
        assert arrays == []
        return
    assert [a.with_suffix(".png") for a in arrays] == pngs  # one .npy beside each png, same stem
    for png in pngs:
        array = np.load(png.with_suffix(".npy"))
        assert array.dtype == np.uint8 and array.shape == (192, 256, 3)
        assert np.array_equal(array, cv2.imread(str(png), cv2.IMREAD_COLOR))
        # Ultralytics loads the .npy only when it is not older than the image
        assert png.with_suffix(".npy").stat().st_mtime >= png.stat().st_mtime
    assert copy.bytes == sum(p.stat().st_size for p in pngs + arrays)


def test_lossless_copy_holds_the_pixels_the_ultralytics_loader_computes(shared, tmp_path):
    from types import SimpleNamespace

    from ultralytics.data.base import BaseDataset

    copy = data.prepare(shared, data.PrepareSpec(320, "png"), out=tmp_path / "png", jobs=1).copy
    source = shared.train_images[0]
    resized = copy.root / source.relative_to(shared.root).with_suffix(".png")

    def loaded(image: Path):
        fake = SimpleNamespace(
            ims=[None], im_files=[str(image)], npy_files=[tmp_path / "none.npy"], cache=None, channels=3,
            cv2_flag=cv2.IMREAD_COLOR, imgsz=320, augment=False, prefix="", im_hw0=[None], im_hw=[None],
        )
        return BaseDataset.load_image(fake, 0)[0]

    assert np.array_equal(loaded(source), loaded(resized))


def test_images_at_or_below_imgsz_are_not_upscaled(shared, tmp_path):
    copy = data.prepare(shared, data.PrepareSpec(1600), out=tmp_path / "big", jobs=1).copy
    assert {_long_side(p) for p in _images(copy.root, ".jpg")} == {DEMO.width}


def test_corrupt_image_is_skipped_listed_and_its_label_not_copied(fresh, tmp_path):
    bad = fresh.train_images[2]
    bad.write_bytes(b"this is not a jpeg" * 10)
    report = data.prepare(fresh, data.PrepareSpec(320), out=tmp_path / "copy", jobs=1)
    copy = report.copy
    assert copy.corrupt == (str(bad),) and copy.images == 8 and copy.train_images == 5 and report.written == 8
    out_image = copy.root / bad.relative_to(fresh.root)
    assert not out_image.exists() and not data.label_path(out_image).exists()
    assert json.loads((copy.root / data.MANIFEST).read_text())["corrupt"] == [str(bad)]
    assert len(_images(copy.root / "labels", ".txt")) == 8


def test_stale_copy_is_refused_until_prepared_again(fresh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out is under the working directory
    spec = data.PrepareSpec(320)
    first = data.prepare(fresh, spec, jobs=1)
    assert first.copy.root == data.default_out(fresh, spec)
    assert data.find_copy(fresh, spec) == first.copy
    changed = fresh.train_images[1]
    image = cv2.imread(str(changed))
    cv2.imwrite(str(changed), 255 - image)
    st = changed.stat()
    os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a later mtime, whatever the clock's step
    with pytest.raises(UsageError, match="stale") as raised:
        data.find_copy(fresh, spec)
    assert "speedopt prepare --data" in str(raised.value) and "\n" not in str(raised.value)
    again = data.prepare(fresh, spec, jobs=1)
    assert (again.written, again.reused) == (1, 8)
    assert data.find_copy(fresh, spec) == again.copy
    redone = again.copy.root / changed.relative_to(fresh.root)
    assert redone.stat().st_mtime_ns == changed.stat().st_mtime_ns


def test_rerun_removes_outputs_whose_source_is_gone_and_leftover_temp_files(fresh, tmp_path):
    out = tmp_path / "copy"
    copy = data.prepare(fresh, data.PrepareSpec(320), out=out, jobs=1).copy
    gone = fresh.val_images[0]
    gone.unlink()
    data.label_path(gone).unlink()
    leftover = out / "images" / "train" / ".train_00000.jpg.tmp-99999"
    leftover.write_bytes(b"half a jpeg")
    report = data.prepare(data.load(fresh.yaml_path), data.PrepareSpec(320), out=out, jobs=1)
    assert (report.written, report.reused, report.copy.images) == (0, 8, 8)
    assert not (out / gone.relative_to(fresh.root)).exists() and not data.label_path(out / gone.relative_to(fresh.root)).exists()
    assert not leftover.exists()
    assert report.copy.seconds == copy.seconds and report.copy.source_id != copy.source_id


def test_damaged_output_fails_verification_then_a_rerun_redoes_it(shared, tmp_path):
    out = tmp_path / "copy"
    copy = data.prepare(shared, data.PrepareSpec(320), out=out, jobs=1).copy
    damaged = copy.root / shared.train_images[3].relative_to(shared.root)
    stamp = damaged.stat().st_mtime_ns
    damaged.write_bytes(damaged.read_bytes()[:100])  # truncated, yet stamped as current
    os.utime(damaged, ns=(stamp, stamp))
    with pytest.raises(UsageError, match="verification") as raised:
        data.prepare(shared, data.PrepareSpec(320), out=out, jobs=2)
    assert str(damaged) in str(raised.value)
    assert data.find_copy(shared, data.PrepareSpec(320), out=out) is None  # no manifest: not complete
    again = data.prepare(shared, data.PrepareSpec(320), out=out, jobs=1)
    assert (again.written, again.reused) == (1, 8) and _long_side(damaged) == 320


def test_another_spec_at_the_same_out_replaces_the_copy(shared, tmp_path):
    out = tmp_path / "copy"
    data.prepare(shared, data.PrepareSpec(320, "npy"), out=out, jobs=1)
    report = data.prepare(shared, data.PrepareSpec(256, "jpg", quality=90), out=out, jobs=1)
    assert report.written == 9 and _images(out, ".png") == [] and _images(out, ".npy") == []
    assert {_long_side(p) for p in _images(out, ".jpg")} == {256}
    assert data.find_copy(shared, data.PrepareSpec(320, "npy"), out=out) is None
    assert data.find_copy(shared, data.PrepareSpec(256, "jpg", quality=90), out=out) == report.copy


def test_list_splits_and_images_outside_the_root(shared, tmp_path):
    outside = tmp_path / "elsewhere" / "images"
    outside.mkdir(parents=True)
    extra = outside / "extra.jpg"
    extra.write_bytes(shared.train_images[0].read_bytes())
    (tmp_path / "elsewhere" / "labels").mkdir()
    data.label_path(extra).write_bytes(data.label_path(shared.train_images[0]).read_bytes())
    listing = tmp_path / "train.txt"
    first, *rest = shared.train_images[:3]
    climbing = shared.root / "images" / ".." / "images" / "train" / first.name  # a '..' never leads out of the copy
    listing.write_text("".join(f"{p}\n" for p in (climbing, *rest, extra)))
    source = yaml.safe_load(shared.yaml_path.read_text())
    yaml_path = tmp_path / "listed.yaml"
    yaml_path.write_text(yaml.safe_dump({**source, "train": str(listing), "download": "https://example.invalid/x.zip"}))
    ds = data.load(yaml_path)
    copy = data.prepare(ds, data.PrepareSpec(320), out=tmp_path / "copy", jobs=1).copy
    written = yaml.safe_load(copy.yaml_path.read_text())
    assert "download" not in written and written["val"] == "images/val"
    listed = (copy.root / written["train"]).read_text().split()
    assert len(listed) == 4 and all(Path(p).is_file() and copy.root in Path(os.path.normpath(p)).parents for p in listed)
    assert str(copy.root / "images" / "train" / first.name) in listed
    moved = [Path(p) for p in listed if "external" in Path(p).parts]
    assert len(moved) == 1 and data.label_path(moved[0]).read_bytes() == data.label_path(extra).read_bytes()
    again = data.load(copy.yaml_path)
    assert (len(again.train_images), len(again.val_images)) == (4, 3)


def test_source_id_follows_images_and_labels(fresh):
    before = data.source_id(fresh)
    assert before == data.source_id(fresh) and len(before) == 16
    label = data.label_path(fresh.val_images[1])
    label.write_text(label.read_text() + "0 0.5 0.5 0.1 0.1\n")
    assert data.source_id(fresh) != before


def test_default_out_names_dataset_hash_and_spec(shared, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    jpg = data.default_out(shared, data.PrepareSpec(640))
    assert jpg.parent.parent == tmp_path / "prepared" and jpg.name == "640-jpgq100"
    assert jpg.parent.name.startswith("shapes-") and len(jpg.parent.name) == len("shapes-") + 8
    assert data.default_out(shared, data.PrepareSpec(640, "npy", quality=50)).name == "640-npy"
    assert data.find_copy(shared, data.PrepareSpec(640)) is None


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (data.PrepareSpec(0), "multiple of 32"),
        (data.PrepareSpec(100), "multiple of 32"),
        (data.PrepareSpec(8224), "at most"),
        (data.PrepareSpec(320, quality=0), "quality"),
        (data.PrepareSpec(320, quality=101), "quality"),
        (data.PrepareSpec(320, "bmp"), "--format"),
    ],
)
def test_bad_spec_is_one_line(spec, words):
    with pytest.raises(UsageError, match=words) as raised:
        spec.checked()
    assert "\n" not in str(raised.value)


def test_refused_outs_leave_everything_untouched(shared, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    root = shared.root
    cases = [
        (root, "dataset's own folder"),
        (root.parent, "dataset's own files"),
        (root / "images" / "train" / "copy", "inside the train folder"),
        (foreign, "not a speedopt prepared copy"),
        (a_file, "not a folder"),
    ]
    for out, words in cases:
        with pytest.raises(UsageError, match=words):
            data.prepare(shared, data.PrepareSpec(320), out=out, jobs=1)
    with pytest.raises(UsageError, match="--jobs"):
        data.prepare(shared, data.PrepareSpec(320), out=tmp_path / "ok", jobs=0)
    assert not (root / "images" / "train" / "copy").exists() and not (tmp_path / "ok").exists()
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"] and a_file.read_text() == "x"


def test_a_copy_of_another_dataset_is_not_overwritten(shared, fresh, tmp_path):
    out = tmp_path / "copy"
    data.prepare(shared, data.PrepareSpec(320), out=out, jobs=1)
    with pytest.raises(UsageError, match="another dataset"):
        data.prepare(fresh, data.PrepareSpec(320), out=out, jobs=1)
    assert data.find_copy(shared, data.PrepareSpec(320), out=out) is not None
