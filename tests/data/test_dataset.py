import shutil

import pytest
from PIL import Image

from speedopt import data as dataset
from speedopt.data import _dataset
from speedopt.errors import UsageError


def test_load_demo(demo_yaml):
    ds = dataset.load(demo_yaml)
    assert len(ds.train_images) == 48 and len(ds.val_images) == 8
    assert ds.names == ("circle", "square", "triangle")
    assert ds.name == "shapes"


@pytest.fixture
def copy(demo_yaml, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(demo_yaml.parent, root)
    yaml_file = root / "data.yaml"
    yaml_file.write_text(yaml_file.read_text().replace(str(demo_yaml.parent), str(root)))
    return yaml_file


def test_missing_file():
    with pytest.raises(UsageError, match="data.yaml not found"):
        dataset.load("nowhere/data.yaml")


def test_malformed_yaml(copy):
    copy.write_text("train: [unclosed\nval: x\n")
    with pytest.raises(UsageError, match="not valid YAML at line"):
        dataset.load(copy)


def test_missing_keys(copy):
    copy.write_text("train: images/train\n")
    with pytest.raises(UsageError, match="lacks val, names"):
        dataset.load(copy)


def test_missing_image_folder(copy):
    shutil.rmtree(copy.parent / "images" / "val")
    with pytest.raises(UsageError, match="val images folder does not exist"):
        dataset.load(copy)


def test_empty_image_folder(copy):
    for p in (copy.parent / "images" / "train").iterdir():
        p.unlink()
    with pytest.raises(UsageError, match="no images in the train split"):
        dataset.load(copy)


def test_no_labels(copy):
    shutil.rmtree(copy.parent / "labels")
    with pytest.raises(UsageError, match="no label files"):
        dataset.load(copy)


def test_ram_estimate_matches_decoded_size(copy):
    images = dataset.load(copy).train_images
    # Exact expectation for resized uint8 HxWx3 arrays, computed from every image (sample >= count).
    expected = 0
    for p in images:
        w, h = Image.open(p).size
        r = 64 / max(w, h)
        expected += int(h * w * 3 * r * r)
    assert _dataset.estimate_ram_cache_bytes(images, 64, sample=len(images)) == expected
    sampled = _dataset.estimate_ram_cache_bytes(images, 64, sample=5)
    assert sampled == pytest.approx(expected, rel=0.01)  # all demo images share one size


def _break(copy):
    """A 0-byte image, a text file named .jpg and a JPEG cut inside its header, in the train split."""
    train = copy.parent / "images" / "train"
    good = sorted(train.glob("*.jpg"))[0].read_bytes()
    (train / "zero.jpg").write_bytes(b"")
    (train / "text.jpg").write_text("not an image\n")
    (train / "cut.jpg").write_bytes(good[:12])
    return {train / "zero.jpg", train / "text.jpg", train / "cut.jpg"}


def test_unreadable_images_are_skipped_and_counted(copy):
    broken = _break(copy)
    ds = dataset.load(copy)
    seen = _dataset.sample_sizes(ds.train_images, sample=len(ds.train_images))
    assert set(seen.unreadable) == broken and len(seen.sizes) == 48
    fp = dataset.fingerprint(ds, sample=60)
    assert fp.unreadable == 3 and fp.mean_width == 160
    # The estimate covers the readable share only: 48 of 51 images, as the trainer caches them.
    every = _dataset.estimate_ram_cache_bytes(ds.train_images, 64, sample=len(ds.train_images))
    assert every == 48 * int(120 * 160 * 3 * (64 / 160) ** 2)
    # With the usual sample of 30 the empty file is still counted (every file's size is read anyway).
    assert dataset.fingerprint(ds).unreadable >= 1


def test_a_clean_dataset_is_sampled_as_before(copy):
    """Skipping draws replacements only after the usual sample: a clean set keeps its fingerprint id."""
    import random

    ds = dataset.load(copy)
    old = random.Random(0).sample(list(ds.train_images), 30)
    seen = _dataset.sample_sizes(ds.train_images, sample=30)
    assert seen.tried == 30 and seen.unreadable == ()
    assert [ds.train_images.index(p) for p in old] == list(_dataset._draws(len(ds.train_images), 30, 0, 0))
    assert dataset.fingerprint(ds).unreadable == 0


def test_only_unreadable_images_is_one_line(copy):
    train = copy.parent / "images" / "train"
    for p in train.glob("*.jpg"):
        p.write_bytes(b"")
    with pytest.raises(UsageError, match="none of the .* train images tried can be read"):
        dataset.fingerprint(dataset.load(copy))


def test_names_keys_must_be_class_indices(copy):
    copy.write_text(copy.read_text().split("names:")[0] + "names: {0: a, x: b}\n")
    with pytest.raises(UsageError, match="keys must be integers"):
        dataset.load(copy)
