"""Where the classic engine's code comes from: a user's checkout of ultralytics/yolov5 (``--yolov5-dir``:
checked to hold YOLOv5's own train.py, versioned by its git commit) or the ``yolov5`` package."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from speedopt.errors import UsageError

# Text every YOLOv5 train.py has (v6.x, v7.0, the yolov5 package, today's master).
_TRAIN_PY_MARKERS = ("def parse_opt", "def main(opt", "Callbacks", "create_dataloader", "--batch-size", "on_train_batch_end")


def checkout_root(path: str) -> Path:
    """The absolute folder of a YOLOv5 checkout; UsageError (one line) when ``path`` is not one."""
    root = Path(path).expanduser()
    hint = "give the folder of a clone of ultralytics/yolov5 (the one holding train.py)"
    if not root.is_dir():
        raise UsageError(f"--yolov5-dir {path}: no such folder; {hint}")
    train = root / "train.py"
    if not train.is_file():
        raise UsageError(f"--yolov5-dir {path} has no train.py; {hint}")
    text = train.read_text(errors="replace")
    missing = [m for m in _TRAIN_PY_MARKERS if m not in text]
    if missing or not (root / "utils" / "callbacks.py").is_file() or not (root / "models" / "yolo.py").is_file():
        raise UsageError(f"--yolov5-dir {path}: its train.py is not the YOLOv5 one; {hint}")
    return root.resolve()


def checkout_version(root: Path) -> str:
    """``git <commit>`` of a checkout, read from ``.git`` without running git; ``checkout`` otherwise."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return f"git {head[:12]}"
        ref = head[5:]
        loose = git / ref
        if loose.is_file():
            return f"git {loose.read_text().strip()[:12]}"
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return f"git {line.split()[0][:12]}"
    except OSError:
        pass
    return "checkout"


def import_train(root: Path | None, install_hint: str) -> ModuleType:
    """train.py as a module: from the checkout ``root`` (its own utils/, models/ first on sys.path) or the package."""
    try:
        with _frames_without_source():
            if root is None:
                return importlib.import_module("yolov5.train")
            sys.path.insert(0, str(root))
            return importlib.import_module("train")
    except ImportError as exc:
        raise RuntimeError(
            f"the classic YOLOv5 code could not be imported ({exc}); {install_hint} "
            "(the extra pins setuptools<81: the old code imports pkg_resources)"
        ) from exc


@contextlib.contextmanager
def _frames_without_source() -> Iterator[None]:
    """``inspect.stack()`` without source lines, while train.py imports.

    YOLOv5's utils/general.py calls ``inspect.stack()`` twice at import and reads only the frames' file
    names. With source lines, each frame scans every loaded module: 2 s of each job forked from a warm
    worker (which has torch's compiler stack loaded), against a fraction of that in a real ``python
    train.py``. Without them the file names are the same.
    """
    real = inspect.stack
    inspect.stack = lambda context=1: real(0)
    try:
        yield
    finally:
        inspect.stack = real
