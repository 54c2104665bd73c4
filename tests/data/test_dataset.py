import shutil

import pytest
from PIL import Image

from speedopt import data as dataset
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
    assert dataset.estimate_ram_cache_bytes(images, 64, sample=len(images)) == expected
    sampled = dataset.estimate_ram_cache_bytes(images, 64, sample=5)
    assert sampled == pytest.approx(expected, rel=0.01)  # all demo images share one size
