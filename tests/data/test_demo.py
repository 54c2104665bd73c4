import hashlib
from pathlib import Path

import pytest
import yaml

from speedopt import data as demo_data
from speedopt.errors import UsageError
from tests.conftest import run_cli


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".jpg", ".txt")
    }


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    spec = demo_data.DemoSpec(train=6, val=2, width=96, height=64, seed=3)
    a = demo_data.generate(tmp_path / "a", spec).parent
    b = demo_data.generate(tmp_path / "b", spec).parent
    c = demo_data.generate(tmp_path / "c", demo_data.DemoSpec(train=6, val=2, width=96, height=64, seed=4)).parent
    assert _digest(a) == _digest(b)
    assert len(_digest(a)) == 16
    assert _digest(a) != _digest(c)


def test_layout_and_yaml(demo_yaml):
    data = yaml.safe_load(demo_yaml.read_text())
    assert Path(data["path"]).is_absolute()
    assert data["names"] == {0: "circle", 1: "square", 2: "triangle"}
    root = Path(data["path"])
    assert len(list((root / "images" / "train").glob("*.jpg"))) == 48
    assert len(list((root / "labels" / "val").glob("*.txt"))) == 8


def test_trainer_accepts_every_label(demo_yaml):
    from ultralytics.data.utils import verify_image_label

    root = demo_yaml.parent
    classes = set()
    for image in sorted((root / "images").rglob("*.jpg")):
        label = root / "labels" / image.parent.name / (image.stem + ".txt")
        out = verify_image_label((str(image), str(label), "", False, 3, 0, 0, False))
        _, boxes, shape, _, _, missing, found, empty, corrupt, msg = out
        assert (missing, found, empty, corrupt) == (0, 1, 0, 0), msg
        assert shape == (120, 160)
        assert ((boxes[:, 1:] > 0) & (boxes[:, 1:] <= 1)).all()
        classes.update(int(c) for c in boxes[:, 0])
    assert classes == {0, 1, 2}


def test_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        demo_data.generate(tmp_path, demo_data.DemoSpec(train=1, val=1, width=64, height=64))
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_rewrites_its_own_folder(tmp_path):
    first = demo_data.generate(tmp_path / "d", demo_data.DemoSpec(train=4, val=1, width=64, height=64))
    demo_data.generate(tmp_path / "d", demo_data.DemoSpec(train=2, val=1, width=64, height=64))
    assert len(list((first.parent / "images" / "train").glob("*.jpg"))) == 2


def test_cli_prints_yaml_path_and_rejects_bad_size(tmp_path):
    done = run_cli("demo-data", str(tmp_path / "cli"), "--train", "2", "--val", "1", "--size", "64x48")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == (tmp_path / "cli" / "data.yaml").resolve()
    bad = run_cli("demo-data", str(tmp_path / "bad"), "--size", "big")
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_png_demo_data_is_lossless_and_loads(tmp_path):
    from PIL import Image

    from speedopt.data import DemoSpec, generate, load

    yaml_path = generate(tmp_path / "png", DemoSpec(train=3, val=2, width=96, height=64, format="png"))
    ds = load(str(yaml_path))
    assert len(ds.train_images) == 3 and all(p.suffix == ".png" for p in ds.train_images)
    with Image.open(ds.train_images[0]) as im:
        assert im.format == "PNG" and im.size == (96, 64)


def test_photos_are_camera_size_jpegs_unless_told_otherwise(tmp_path):
    from PIL import Image

    done = run_cli("demo-data", str(tmp_path / "p"), "--photos", "--train", "2", "--val", "1")
    assert done.returncode == 0, done.stderr
    images = sorted((tmp_path / "p" / "images").rglob("*.jpg"))
    assert len(images) == 3
    with Image.open(images[0]) as im:
        assert im.size == (1920, 1080) and im.format == "JPEG"
    small = run_cli("demo-data", str(tmp_path / "q"), "--photos", "--size", "640x360", "--train", "1", "--val", "1")
    assert small.returncode == 0, small.stderr
    with Image.open(next((tmp_path / "q" / "images" / "train").iterdir())) as im:
        assert im.size == (640, 360)
