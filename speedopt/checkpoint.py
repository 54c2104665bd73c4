"""Look inside a torch checkpoint without running it: how every checkpoint a trainer will load is checked
at plan time (``--weights``, and ``--model``/``model=`` given as a ``.pt`` file: :func:`check_checkpoint`).

A ``.pt`` file is a pickle, and unpickling calls whatever the file names: ``torch.load(...,
weights_only=False)`` of a crafted checkpoint runs its code, here in speedopt's own process before
any trial's sandbox. ``weights_only=True`` is no way out: a YOLO checkpoint pickles whole
``DetectionModel`` objects, which it refuses. So :func:`peek` never unpickles for real: every
class or function the pickle names resolves to an inert stand-in (:class:`_Inert`) that records
the name and accepts any arguments, and tensors' storages are never read. What comes back is the
top-level keys and the set of names the file refers to; :func:`foreign` says which name no
Ultralytics or yolov5 checkpoint needs. The trainer itself loads the file later, inside the trial's
child process, as the user's own training run would.
"""

from __future__ import annotations

import functools
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from speedopt.errors import UsageError

_TORCH_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER (the legacy, non-zip format)
_MAX_PICKLE = 256 << 20  # a YOLO checkpoint's pickle (storages apart) is a few hundred kB

#: Packages a YOLO checkpoint's classes come from (any module inside; plain names only).
_PACKAGES = ("torch", "numpy", "ultralytics", "yolov5", "models", "utils")
#: Standard-library names a checkpoint's plain data may need.
_STDLIB = {
    "builtins": {"set", "frozenset", "slice", "range", "complex", "bytearray", "bytes", "object"},
    "__builtin__": {"set", "frozenset", "slice", "complex", "bytearray", "object"},  # protocol 2's name for builtins
    "collections": {"OrderedDict", "defaultdict", "deque"},
    "_codecs": {"encode"},  # how protocol 2 pickles bytes (numpy arrays)
    "copyreg": {"_reconstructor"},
    "copy_reg": {"_reconstructor"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "argparse": {"Namespace"},
    "types": {"SimpleNamespace"},
    "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath"},
}


class _Inert:
    """Stands in for every class and function a pickle names: building, calling or filling it runs nothing."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return _Inert()

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass


class _Reader(pickle.Unpickler):
    """An unpickler whose every global is :class:`_Inert` and every persistent id (a storage) too."""

    def __init__(self, file: IO[bytes], names: set[tuple[str, str]]):
        super().__init__(file)
        self.names = names

    def find_class(self, module: str, name: str) -> Any:
        self.names.add((module, name))
        return _Inert

    def persistent_load(self, pid: Any) -> Any:
        return _Inert  # a storage, or (legacy format) a module's class: the class serves as both


@dataclass(frozen=True)
class Peek:
    """What a checkpoint holds, read without running it."""

    keys: frozenset[str]  # the top-level dict's keys (empty when the top level is not a dict)
    names: frozenset[tuple[str, str]]  # every (module, name) the pickle refers to


def peek(path: Path) -> Peek:
    """The keys and referenced names of a torch checkpoint (zip or legacy format); ValueError when it is none."""
    names: set[tuple[str, str]] = set()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            pickles = [i for i in archive.infolist() if i.filename.endswith("/data.pkl") and i.filename.count("/") == 1]
            if len(pickles) != 1:
                raise ValueError("a zip file, but not a torch checkpoint (no single <archive>/data.pkl)")
            if pickles[0].file_size > _MAX_PICKLE:
                raise ValueError("its pickle is too large for a checkpoint")
            top = _Reader(io.BytesIO(archive.read(pickles[0])), names).load()
    else:
        with open(path, "rb") as f:
            if _Reader(f, names).load() != _TORCH_MAGIC:
                raise ValueError("not a torch checkpoint (no torch magic number)")
            _Reader(f, names).load()  # protocol version
            _Reader(f, names).load()  # system info
            top = _Reader(f, names).load()
    keys = frozenset(k for k in top if isinstance(k, str)) if isinstance(top, dict) else frozenset()
    return Peek(keys=keys, names=frozenset(names))


def foreign(names: frozenset[tuple[str, str]]) -> str | None:
    """The first referenced name (``module.name``) that no YOLO checkpoint needs, or None."""
    for module, name in sorted(names):
        package = module.split(".")[0]
        plain = name.isidentifier()  # no dotted path: "os.system" inside an allowed module is refused
        if plain and (package in _PACKAGES or name in _STDLIB.get(module, ())):
            continue
        return f"{module}.{name}"
    return None


def check_checkpoint(path: Path, what: str) -> None:
    """Refuse, with one line naming ``what`` (``--weights x.pt``, ``model x.pt``), a file that is no YOLO
    checkpoint or refers to code no checkpoint needs: the trainer unpickles it, which would run that code.
    Every checkpoint handed to a trainer passes here first, read inertly (:func:`peek`), never loaded."""
    try:
        inside = _peeked(str(path), *_stamp(path))
    except Exception:  # an inert unpickler fails on bad data only, in many ways: none of them is ours
        inside = None
    if inside is None or not ({"model", "ema"} & inside.keys):
        raise UsageError(f"{what} is not a YOLO checkpoint (a torch file with a 'model' entry)")
    stranger = foreign(inside.names)
    if stranger is not None:
        raise UsageError(
            f"{what} refers to {stranger}, which no Ultralytics or yolov5 checkpoint needs: refusing it "
            "(loading it would run that code); give a checkpoint saved by the trainer itself"
        )


def check_weights_file(text: str) -> Path:
    """The local checkpoint ``--weights`` names (the one probes and validation passes start from), inspected by
    :func:`check_checkpoint`; UsageError for a missing or refused file."""
    path = Path(text).expanduser()
    if not path.is_file():
        raise UsageError(f"--weights file not found: {text}; give a local .pt checkpoint (speedopt never downloads)")
    check_checkpoint(path, f"--weights {text}")  # never unpickled for real here: its code must not run
    return path


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


@functools.lru_cache(maxsize=32)
def _peeked(path: str, mtime_ns: int, size: int) -> Peek:
    """:func:`peek`, once per file version: a search checks its model for every trial it plans."""
    return peek(Path(path))
