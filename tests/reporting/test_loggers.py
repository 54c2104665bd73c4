"""The logger detector: the user's Ultralytics settings file, read without importing Ultralytics."""

import json

import pytest

from speedopt.engines._words import TRAIN_PY, YOLO
from speedopt.reporting import _loggers
from speedopt.reporting._loggers import logger_integrations


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(tmp_path))
    for env in ("WANDB_MODE", "COMET_MODE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(env, raising=False)
    # every logger package "installed", so the settings alone decide
    monkeypatch.setattr(_loggers, "_installed", lambda package: True)

    def write(**values):
        folder = tmp_path / "Ultralytics"
        folder.mkdir(exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(values))

    return write


def _names(found):
    return {log.name for log in found}


def test_wandb_switched_on_in_the_settings_is_found_and_online(settings):
    settings(wandb=True, comet=False, clearml=False, mlflow=False, tensorboard=False, dvc=False, raytune=False)
    found = logger_integrations("ultralytics")
    assert _names(found) == {"wandb"}
    (wandb,) = found
    assert wandb.online and "settings.json" in wandb.source
    assert wandb.how_off(YOLO) == "`yolo settings wandb=False` or `WANDB_MODE=offline`"


def test_wandb_switched_off_in_the_settings_is_not_found(settings):
    settings(wandb=False, comet=False, clearml=False, mlflow=False, tensorboard=True, dvc=False, raytune=False)
    found = logger_integrations("ultralytics")
    assert _names(found) == {"tensorboard"} and not found[0].online


def test_wandb_offline_mode_is_not_online(settings, monkeypatch):
    settings(wandb=True)
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert not next(log for log in logger_integrations("ultralytics") if log.name == "wandb").online


def test_missing_keys_take_ultralytics_defaults_and_mlflow_is_online_only_to_a_server(settings, monkeypatch):
    settings()  # no integration key: Ultralytics' defaults (clearml, comet, dvc, mlflow, raytune on)
    found = {log.name: log for log in logger_integrations("ultralytics")}
    assert set(found) == {"clearml", "comet", "dvc", "mlflow", "raytune"}
    assert found["comet"].online and found["clearml"].online and not found["mlflow"].online
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com")
    assert next(log for log in logger_integrations("ultralytics") if log.name == "mlflow").online


def test_an_integration_whose_package_is_missing_is_off(settings, monkeypatch):
    settings(wandb=True)
    monkeypatch.setattr(_loggers, "_installed", lambda package: package != "wandb")
    assert "wandb" not in _names(logger_integrations("ultralytics"))


def test_classic_loads_each_installed_logger_and_tensorboard_always(settings, monkeypatch):
    monkeypatch.setattr(_loggers, "_installed", lambda package: package == "comet_ml")
    found = logger_integrations("yolov5")
    assert _names(found) == {"comet", "tensorboard"}
    comet = found[0]
    assert comet.online and comet.how_off(TRAIN_PY).startswith("`pip uninstall comet_ml`")


def test_reading_settings_never_imports_ultralytics_nor_creates_the_file(tmp_path):
    import os
    import subprocess
    import sys

    code = (
        "import sys; from speedopt.reporting._loggers import logger_integrations; logger_integrations('ultralytics'); "
        "assert 'ultralytics' not in sys.modules, 'imported'"
    )
    env = {**os.environ, "YOLO_CONFIG_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "Ultralytics").exists()
