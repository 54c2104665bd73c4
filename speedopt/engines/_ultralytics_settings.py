"""The private, offline Ultralytics settings a job runs under, for both engines: the Ultralytics trainer reads
them, and the classic ``train.py`` imports ``ultralytics`` too (today's ultralytics/yolov5 master builds on it).

A private settings folder: the user's own Ultralytics settings stay untouched, and ours turn off telemetry,
sync and the logger integrations (an installed mlflow would otherwise log every trial).
"""

from __future__ import annotations

from pathlib import Path

from speedopt.data import resolution_env
from speedopt.offline import place_font

INTEGRATIONS = ("clearml", "comet", "dvc", "mlflow", "raytune", "tensorboard", "wandb")  # switched off in a job


def settings_env(cache_dir: Path) -> dict[str, str]:
    """The environment of a job that imports ``ultralytics``: offline, its settings in a private folder under
    ``cache_dir``, and the user's working directory and datasets_dir for resolving a data.yaml.

    Called in the parent: the job reads data.yaml against the user's working directory and datasets_dir.
    ULTRALYTICS_SAFE_LOAD (read by Ultralytics >= 8.4's nn/tasks.py; ignored by older ones): checkpoints load
    with weights_only=True and an allowlist, and a model yaml's activation is parsed, never eval()'d (issue 44;
    speedopt inspects both before a trial starts, speedopt.checkpoint and speedopt._model_yaml).
    """
    return {
        "YOLO_OFFLINE": "1", "YOLO_CONFIG_DIR": str(cache_dir / "ultralytics-config"), "ULTRALYTICS_SAFE_LOAD": "1",
        **resolution_env(),
    }


def apply_settings(cache_dir: Path) -> None:
    """Inside the job (under :func:`settings_env`): the local font, sync and integrations off, a private datasets_dir."""
    from ultralytics.utils import SETTINGS, USER_CONFIG_DIR

    place_font(Path(USER_CONFIG_DIR))  # check_det_dataset() wants Arial.ttf and would download it
    # datasets_dir: the private settings were created in some trial's temporary folder and would keep
    # it; trials hand the trainer an absolute data.yaml, so nothing reads it, but nothing may recreate a
    # folder in the temp dir through it either.
    datasets = str(cache_dir / "ultralytics-datasets")
    wanted = {"sync": False, "datasets_dir": datasets, **dict.fromkeys(INTEGRATIONS, False)}
    if any(SETTINGS.get(k) != v for k, v in wanted.items()):
        SETTINGS.update(wanted)
