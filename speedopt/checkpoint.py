"""Look inside a torch checkpoint without running it: how every checkpoint a trainer will load is checked
at plan time (``--weights``, and ``--model``/``model=`` given as a ``.pt`` file: :func:`check_checkpoint`).

A ``.pt`` file is a pickle, and unpickling calls whatever the file names: ``torch.load(...,
weights_only=False)`` of a crafted checkpoint runs its code, here in speedopt's own process before
any trial's sandbox. ``weights_only=True`` is no way out: a YOLO checkpoint pickles whole
``DetectionModel`` objects, which it refuses. So :func:`peek` never unpickles for real: every
class or function the pickle names resolves to an inert stand-in (:class:`_Inert`) that records
the name, and whether the file calls it, and tensors' storages are never read. :func:`refusal` then
holds that against an allowlist of exact names (:data:`CALLED`, :data:`REBUILT`), read from the
checkpoints both trainers write (tests/test_checkpoint.py builds them and checks every name is here).
The trainer itself loads the file later, inside the trial's child process, as the user's own training
run would.

Only the zip format (torch >= 1.6, what both trainers write) is accepted, read as torch reads it: the
legacy format carries pickles torch loads that no inspection here reads (the storage keys; a tar
variant), so it is refused with the way to re-save it (issue 44).
"""

from __future__ import annotations

import functools
import io
import pickle
import shlex
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from speedopt._model_yaml import shown, yaml_problem
from speedopt.errors import UsageError

_TORCH_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER (the legacy, non-zip format)
_ZIP_MAGIC = b"PK\x03\x04"  # how torch.serialization._is_zipfile tells the zip format: the file's first bytes
_MAX_PICKLE = 256 << 20  # a YOLO checkpoint's pickle (storages apart) is a few hundred kB


def _names(module: str, *names: str) -> set[tuple[str, str]]:
    return {(module, name) for name in names}


#: Globals a checkpoint may call with arguments (REDUCE): tensor and container rebuilders, plain data types.
#: Each does nothing but build a value from its arguments.
CALLED: frozenset[tuple[str, str]] = frozenset(
    _names("torch._utils", "_rebuild_tensor_v2", "_rebuild_parameter")
    | _names("torch", "Size", "device")
    | _names("collections", "OrderedDict")
    | _names("__builtin__", "set", "frozenset", "complex", "slice", "bytearray")  # protocol 2's name for builtins
    | _names("builtins", "set", "frozenset", "complex", "slice", "bytearray")
    | _names("_codecs", "encode")  # how protocol 2 pickles bytes (numpy scalars)
    | _names("numpy", "dtype")
    | _names("numpy.core.multiarray", "scalar", "_reconstruct")  # numpy < 2
    | _names("numpy._core.multiarray", "scalar", "_reconstruct")
    | _names("datetime", "datetime", "date", "timedelta")
    | _names("pathlib", "Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath")
    | _names("pathlib._local", "Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath")
    | _names("argparse", "Namespace")
    | _names("types", "SimpleNamespace")
    | _names("ultralytics.utils", "IterableSimpleNamespace")
)

_TORCH_LAYERS = {
    "activation": ("SiLU", "ReLU", "LeakyReLU", "Hardswish", "Mish", "GELU", "Sigmoid", "Tanh", "ReLU6", "Hardsigmoid",
                   "ELU", "MultiheadAttention"),
    "batchnorm": ("BatchNorm2d",), "container": ("Sequential", "ModuleList"), "conv": ("Conv2d", "ConvTranspose2d"),
    "linear": ("Identity", "Linear", "NonDynamicallyQuantizableLinear"), "pooling": ("MaxPool2d",),
    "upsampling": ("Upsample",), "dropout": ("Dropout",), "padding": ("ZeroPad2d",),
}
_CLASSIC_LAYERS = {  # the classic yolov5 model's classes, as its pip package and its checkout (GitHub releases) name them
    "models.common": ("Conv", "C3", "Bottleneck", "SPPF", "SPP", "Concat", "Focus", "BottleneckCSP", "DWConv",
                      "GhostConv", "GhostBottleneck", "C3Ghost", "C3TR", "C3SPP", "C3x", "CrossConv", "Contract",
                      "Expand", "DWConvTranspose2d", "TransformerBlock", "TransformerLayer"),
    "models.yolo": ("Detect", "DetectionModel", "Model"),
    "models.experimental": ("MixConv2d", "CrossConv", "Sum"),
}
_ULTRALYTICS_LAYERS = {
    "ultralytics.nn.tasks": ("DetectionModel",),
    "ultralytics.nn.modules.conv": ("Conv", "Concat", "DWConv", "GhostConv", "Focus", "ConvTranspose",
                                    "DWConvTranspose2d"),
    "ultralytics.nn.modules.block": ("Bottleneck", "C3", "DFL", "SPPF", "SPP", "BottleneckCSP", "C3Ghost",
                                     "GhostBottleneck", "C3TR", "C3x", "C1", "C2", "C2f"),
    "ultralytics.nn.modules.head": ("Detect",),
    "ultralytics.nn.modules.transformer": ("TransformerBlock", "TransformerLayer"),
}
#: Classes a checkpoint may only rebuild from saved state (NEWOBJ: ``cls.__new__`` and ``__setstate__``, never
#: ``__init__``), plus the storage types its tensors name: the YOLOv5 models of both trainers, every layer their
#: model yamls build, and numpy's array type (an argument of ``_reconstruct``).
REBUILT: frozenset[tuple[str, str]] = frozenset(
    {(f"torch.nn.modules.{m}", n) for m, names in _TORCH_LAYERS.items() for n in names}
    | {(p + m, n) for m, names in _CLASSIC_LAYERS.items() for n in names for p in ("", "yolov5.")}
    | {(m, n) for m, names in _ULTRALYTICS_LAYERS.items() for n in names}
    | _names("torch", *(f"{t}Storage" for t in ("Float", "Half", "BFloat16", "Double", "Long", "Int", "Short",
                                                   "Char", "Byte", "Bool")))
    | _names("numpy", "ndarray")
)


class _Inert:
    """Stands in for every class and function a pickle names (one subclass per name, :meth:`_Reader.find_class`):
    building, calling or filling it runs nothing, and it notes when the file calls it."""

    ref: ClassVar[tuple[str, str]] = ("", "")
    calls: ClassVar[set[tuple[str, tuple[str, str]]]] = set()
    yamls: ClassVar[list[Any]] = []

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        return object.__new__(cls)  # NEWOBJ (the class rebuilt from state) ends here

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.add(("calls", self.ref))  # REDUCE/OBJ/INST: the class or function called, its code run

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        self.calls.add(("calls an object of", self.ref))  # no checkpoint calls an object it holds
        return self

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (state, slots): the form pickle's BUILD also takes
            state = state[0]
        if isinstance(state, dict) and "yaml" in state:  # a model's own yaml: the trainer evaluates its strings
            self.yamls.append(state["yaml"])

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass


class _Reader(pickle.Unpickler):
    """An unpickler whose every global is a stand-in (:class:`_Inert`) and every persistent id (a storage) too;
    what it meets goes into ``names`` and ``calls``, shared by the readers of one file."""

    def __init__(self, file: IO[bytes], names: set[tuple[str, str]], calls: set[tuple[str, tuple[str, str]]],
                 yamls: list[Any] | None = None):
        super().__init__(file)
        self.names, self.calls = names, calls
        self.yamls: list[Any] = [] if yamls is None else yamls
        self._standins: dict[tuple[str, str], type[_Inert]] = {}

    def _standin(self, ref: tuple[str, str]) -> type[_Inert]:
        if ref not in self._standins:
            self._standins[ref] = type("_Standin", (_Inert,), {"ref": ref, "calls": self.calls, "yamls": self.yamls})
        return self._standins[ref]

    def find_class(self, module: str, name: str) -> Any:
        self.names.add((module, name))
        return self._standin((module, name))

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) > 1 and pid[0] == "module":  # legacy: a model's class, by reference
            return pid[1]  # the stand-in find_class made for it: rebuilt with NEWOBJ as a class
        storage = self._standin(("<storage>", "storage"))
        return storage.__new__(storage)  # built, not called: torch's loader makes it from the id


@dataclass(frozen=True)
class Peek:
    """What a checkpoint holds, read without running it."""

    keys: frozenset[str]  # the top-level dict's keys (empty when the top level is not a dict)
    names: frozenset[tuple[str, str]]  # every (module, name) the pickle refers to
    calls: frozenset[tuple[str, tuple[str, str]]] = frozenset()  # (how, (module, name)) of each call it makes
    legacy: bool = False  # torch's legacy (pre-1.6, non-zip) format: refused, whatever it holds
    yamls: tuple[Any, ...] = ()  # the ``yaml`` of every model object it rebuilds (what the trainer builds the model from)


def peek(path: Path) -> Peek:
    """The keys, referenced names and calls of a torch checkpoint, read as torch reads it (zip or legacy format:
    ``legacy`` says which); ValueError when it is none."""
    names: set[tuple[str, str]] = set()
    calls: set[tuple[str, tuple[str, str]]] = set()
    with open(path, "rb") as f:
        if f.read(len(_ZIP_MAGIC)) != _ZIP_MAGIC:  # what torch.load takes for the legacy format
            f.seek(0)
            if _Reader(f, names, calls).load() != _TORCH_MAGIC:
                raise ValueError("not a torch checkpoint (no torch magic number)")
            _Reader(f, names, calls).load()  # protocol version
            _Reader(f, names, calls).load()  # system info
            top = _Reader(f, names, calls).load()  # then the storage keys, unpickled by torch, never inspected here
            return _peeked_as(top, names, calls, legacy=True)
        _one_central_directory(f)
    with zipfile.ZipFile(path) as archive:
        data = _data_pickle(archive)
        if data.file_size > _MAX_PICKLE:
            raise ValueError("its pickle is too large for a checkpoint")
        yamls: list[Any] = []
        top = _Reader(io.BytesIO(archive.read(data)), names, calls, yamls).load()
    return _peeked_as(top, names, calls, legacy=False, yamls=yamls)


def _peeked_as(top: Any, names: set[tuple[str, str]], calls: set[tuple[str, tuple[str, str]]], legacy: bool,
               yamls: list[Any] | None = None) -> Peek:
    keys = frozenset(k for k in top if isinstance(k, str)) if isinstance(top, dict) else frozenset()
    return Peek(keys=keys, names=frozenset(names), calls=frozenset(calls), legacy=legacy, yamls=tuple(yamls or ()))


def _one_central_directory(f: IO[bytes]) -> None:
    """The archive's central directory ends where its end record says, as torch's writer leaves it: a reader that
    trusts the recorded offset (torch's) and one that trusts the position (Python's) then read the same entries."""
    f.seek(0, io.SEEK_END)
    size = f.tell()
    if size < 22:
        raise ValueError("a truncated zip file")
    f.seek(size - 22)
    end = f.read(22)
    if end[:4] != b"PK\x05\x06" or struct.unpack("<H", end[20:22])[0] != 0:
        raise ValueError("a zip file with a comment or trailing data, which torch never writes")
    cd_size, cd_offset = struct.unpack("<LL", end[12:20])
    stop = size - 22
    if size >= 42:
        f.seek(size - 42)
        locator = f.read(20)
        if locator[:4] == b"PK\x06\x07":  # a zip64 end record (torch writes one): its values count
            stop = struct.unpack("<Q", locator[8:16])[0]
            f.seek(stop)
            record = f.read(56)
            if record[:4] != b"PK\x06\x06":
                raise ValueError("a damaged zip64 end record")
            cd_size, cd_offset = struct.unpack("<QQ", record[40:56])
    if cd_offset + cd_size != stop:
        raise ValueError("a zip file whose central directory is not where its end record says")


def _data_pickle(archive: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The one ``<archive>/data.pkl`` torch unpickles; ValueError for an archive torch would read otherwise (names
    that differ only in case, entries outside one folder) or hand to ``torch.jit.load`` (a ``constants.pkl``)."""
    infos = archive.infolist()
    folders = {i.filename.split("/", 1)[0] for i in infos}
    lowered = [i.filename.lower() for i in infos]
    if len(folders) != 1 or len(set(lowered)) != len(lowered) or any(i.filename.count("/") < 1 for i in infos):
        raise ValueError("a zip file, but not a torch checkpoint (one folder, distinct names)")
    if any(name.split("/", 1)[1] == "constants.pkl" for name in lowered):
        raise ValueError("a TorchScript archive, not a checkpoint (torch.load would run it with torch.jit.load)")
    pickles = [i for i in infos if i.filename.count("/") == 1 and i.filename.lower().endswith("/data.pkl")]
    if len(pickles) != 1:
        raise ValueError("a zip file, but not a torch checkpoint (no single <archive>/data.pkl)")
    return pickles[0]


def refusal(inside: Peek) -> str | None:
    """Why a peeked checkpoint may not be loaded (a name or a call no YOLO checkpoint has), or None."""
    for module, name in sorted(inside.names):
        if (module, name) == ("builtins", "getattr"):
            return (f"refers to {module}.{name}, as Ultralytics segment and pose checkpoints do (not detection ones); "
                    "speedopt measures detection training: give a detection checkpoint (from yolo detect train)")
        if (module, name) not in CALLED and (module, name) not in REBUILT:
            return f"refers to {module}.{name}, which no Ultralytics or yolov5 checkpoint needs"
    for how, (module, name) in sorted(inside.calls):
        if how != "calls" or (module, name) not in CALLED:
            return f"{how} {module}.{name}, which no Ultralytics or yolov5 checkpoint does"
    for model in inside.yamls:  # the same inspection as a model .yaml file: the trainer evaluates these strings too
        problem = yaml_problem(model)
        if problem is not None:
            where, value, form = problem
            return f"holds a model yaml whose {where} = {shown(value)} is not {form} (the trainer would evaluate it as Python)"
    return None


def foreign(names: frozenset[tuple[str, str]]) -> str | None:
    """The first referenced name (``module.name``) that is on neither allowlist, or None."""
    return next((f"{m}.{n}" for m, n in sorted(names) if (m, n) not in CALLED and (m, n) not in REBUILT), None)


def check_checkpoint(path: Path, what: str) -> None:
    """Refuse, with one line naming ``what`` (``--weights x.pt``, ``model x.pt``), a file that is no YOLO
    checkpoint, is in the legacy format, or names or calls code no checkpoint needs: the trainer unpickles it,
    which would run that code. Every checkpoint handed to a trainer passes here first, read inertly
    (:func:`peek`), never loaded."""
    try:
        inside = _peeked(str(path), *_stamp(path))
    except Exception:  # an inert unpickler fails on bad data only, in many ways: none of them is ours
        inside = None
    if inside is None or not ({"model", "ema"} & inside.keys):
        raise UsageError(f"{what} is not a YOLO checkpoint (a torch file with a 'model' entry)")
    why = refusal(inside)
    if why is not None:
        raise UsageError(
            f"{what} {why}: refusing it (loading it would run that code); give a checkpoint saved by the trainer itself"
        )
    if inside.legacy:
        resave = f"import torch; torch.save(torch.load({str(path)!r}, weights_only=False), {str(path)!r})"
        raise UsageError(
            f"{what} is in torch's legacy (pre-1.6, non-zip) format, whose storage keys torch unpickles with no check: "
            f"refusing it; if you trust the file, re-save it in the zip format: python -c {shlex.quote(resave)}"
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
