"""Where a data.yaml's images are, decided the way Ultralytics decides it for the user's own run.

Ultralytics (``check_det_dataset``) reads a relative ``path:`` against the working directory when it
exists there, else against the ``datasets_dir`` of the user's Ultralytics settings; a missing
``path:`` means the yaml's folder; each split entry is ``path / entry`` (a leading ``../`` dropped
when that does not exist). speedopt checks the dataset in the user's working directory, but a trial
trains in a private temporary folder with private Ultralytics settings, where the same yaml would
resolve elsewhere. So the caller's working directory and the user's ``datasets_dir`` travel to the
trial (:func:`resolution_env`, set by the engine's environment), and the trainer gets
:func:`write_trainer_yaml`'s copy: every path absolute, no ``download:`` (speedopt never downloads).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from speedopt.data._yamlfile import read_yaml
from speedopt.errors import UsageError

CWD_ENV = "SPEEDOPT_DATA_CWD"  # the working directory of the speedopt command a trial belongs to
DATASETS_ENV = "SPEEDOPT_DATASETS_DIR"  # the user's Ultralytics datasets_dir, as that command read it
SPLITS = ("train", "val", "test", "minival")  # the entries Ultralytics resolves against ``path``


def caller_cwd() -> Path:
    """The working directory relative paths in a data.yaml are read against (the user's, even in a trial)."""
    return Path(os.environ.get(CWD_ENV) or os.getcwd())


def settings_file() -> Path:
    """The user's Ultralytics settings file (``ultralytics.utils.get_user_config_dir``), never created here."""
    if folder := os.environ.get("YOLO_CONFIG_DIR"):
        base = Path(folder).expanduser()
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path.home() / "AppData" / "Roaming"
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "Ultralytics" / "settings.json"


def datasets_dir() -> Path:
    """The folder the user's own Ultralytics run reads a relative ``path:`` against when the working
    directory does not hold it: their settings' ``datasets_dir``, else Ultralytics' default for a
    package install, ``<working directory>/datasets``. Read without importing Ultralytics (which would
    create a settings file)."""
    if given := os.environ.get(DATASETS_ENV):
        return Path(given)
    try:
        value = json.loads(settings_file().read_text()).get("datasets_dir")
    except (OSError, ValueError, AttributeError):
        value = None
    return Path(value) if isinstance(value, str) and value else caller_cwd() / "datasets"


def resolution_env() -> dict[str, str]:
    """Environment for a trial's process so that it resolves data.yaml exactly as this process does."""
    return {CWD_ENV: str(caller_cwd()), DATASETS_ENV: str(datasets_dir())}


def resolve_root(data: dict[str, Any], yaml_path: Path) -> tuple[Path, tuple[Path, ...]]:
    """The dataset root of a parsed data.yaml (``yaml_path``: absolute) and the places it was looked for."""
    given = data.get("path")
    if not given:
        return yaml_path.parent, (yaml_path.parent,)
    root = Path(str(given))
    if root.is_absolute():
        return root, (root,)
    here = caller_cwd() / root
    if here.exists():
        return here, (here,)
    return datasets_dir() / root, (here, datasets_dir() / root)


def split_path(root: Path, entry: str) -> Path:
    """One train/val entry as Ultralytics resolves it: ``root / entry``, or without a leading ``../``
    when only that exists."""
    path = root / entry
    if not path.exists() and entry.startswith("../"):
        path = root / entry[3:]
    return path


def write_trainer_yaml(yaml_path: str | os.PathLike[str], folder: Path) -> Path:
    """A copy of the data.yaml in ``folder`` with ``path`` and every split absolute and no ``download:``
    key, resolved as :func:`resolve_root` does: the trainer reads exactly the files speedopt checked."""
    source = Path(yaml_path).resolve()
    data = read_yaml(source, "data.yaml")
    if not isinstance(data, dict):
        raise UsageError(f"data.yaml must be a mapping with train, val and names keys: {source}")
    root, _ = resolve_root(data, source)
    out = {k: v for k, v in data.items() if k != "download"}
    out["path"] = str(root.resolve())
    for split in SPLITS:
        entry = data.get(split)
        if isinstance(entry, str) and entry:
            out[split] = str(split_path(root, entry).resolve())
        elif isinstance(entry, list):
            out[split] = [str((root / str(item)).resolve()) for item in entry]
    target = folder / "data.yaml"
    target.write_text(yaml.safe_dump(out, sort_keys=False))
    return target
