"""data.yaml resolved as Ultralytics resolves it for the user's own run, and the trainer's absolute copy."""

import json
import shutil

import pytest
import yaml

from speedopt import data as dataset
from speedopt.data import _root
from speedopt.errors import UsageError


@pytest.fixture
def shapes(tmp_path, monkeypatch):
    """A demo set at tmp/sets/shapes, a user config folder with no settings, and the working dir tmp/work."""
    ds = dataset.generate(tmp_path / "sets" / "shapes", dataset.DemoSpec(train=4, val=2, width=64, height=48, seed=2))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(tmp_path / "config"))
    for name in (_root.CWD_ENV, _root.DATASETS_ENV):
        monkeypatch.delenv(name, raising=False)
    return ds.parent


def _yaml(folder, path_line):
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "data.yaml"
    target.write_text(f"{path_line}train: images/train\nval: images/val\nnames: [circle, square, triangle]\n")
    return target


def test_relative_path_falls_back_to_the_users_datasets_dir(shapes, tmp_path):
    settings = tmp_path / "config" / "Ultralytics" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"datasets_dir": str(tmp_path / "sets")}))
    ds = dataset.load(_yaml(tmp_path / "cfg", "path: shapes\n"))
    assert _root.datasets_dir() == tmp_path / "sets"
    assert ds.root == shapes


def test_without_settings_datasets_dir_is_the_working_directorys(shapes, tmp_path):
    assert _root.datasets_dir() == tmp_path / "work" / "datasets"


def test_yaml_folder_is_not_a_fallback_ultralytics_would_not_use(shapes, tmp_path):
    """A path relative only to the yaml's folder fails in the user's `yolo` run: speedopt says so."""
    with pytest.raises(UsageError, match="does not exist: not at .* nor .*datasets_dir"):
        dataset.load(_yaml(tmp_path / "sets", "path: shapes\n"))


def test_leading_dot_dot_is_dropped_when_only_that_exists(shapes, tmp_path):
    target = shapes / "data.yaml"
    target.write_text(f"path: {shapes}\ntrain: ../images/train\nval: images/val\nnames: [a, b, c]\n")
    assert len(dataset.load(target).train_images) == 4


def test_trainer_yaml_is_absolute_without_download_and_follows_the_caller(shapes, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = _yaml(tmp_path / "cfg", "path: sets/shapes\ndownload: https://example.com/shapes.zip\n")
    assert dataset.load(source).root == shapes  # the working directory first, as Ultralytics reads it
    env = dataset.resolution_env()
    trial = tmp_path / "trial"
    trial.mkdir()
    monkeypatch.chdir(trial)  # a trial runs in its own temporary folder, with the caller's resolution env
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    written = yaml.safe_load(dataset.write_trainer_yaml(source, trial).read_text())
    assert written["path"] == str(shapes) and "download" not in written
    assert written["train"] == str(shapes / "images" / "train") and written["val"] == str(shapes / "images" / "val")
    assert written["names"] == ["circle", "square", "triangle"]


def test_missing_data_with_a_download_key_never_downloads(shapes, tmp_path):
    shutil.rmtree(shapes / "images" / "val")
    target = shapes / "data.yaml"
    target.write_text(target.read_text() + "download: https://example.com/shapes.zip\n")
    with pytest.raises(UsageError, match="never downloads"):
        dataset.load(target)
