"""The speed knobs of a YOLOv5 training run: their values, domains and validation, and the registry.

A :class:`Knobs` value is one training configuration. It crosses module lines (CLI -> trial ->
engine -> study), so it is a frozen dataclass with a plain-dict form for JSON and Optuna attrs.

:data:`KNOBS` declares each knob once (:class:`Knob`): its spellings in the trainers' dialects, its parser and
range form, whether it is in the accuracy signature, the ceilings it acts on, the memory it can bind, whether
it is a one-time cost decided at the end, and whether every trainer has it. Everything that lists knobs
(the signature, the ceilings' and memory fits' keys, the space file, the engines' fixed knobs, the printed
command) reads it: adding a knob is a :class:`Knobs` field, a :data:`KNOBS` entry, the engines that honour it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from speedopt._model_yaml import check_model_yaml
from speedopt.checkpoint import check_checkpoint, check_weights_file
from speedopt.errors import UsageError

MODEL_SCALES = ("yolov5n", "yolov5s", "yolov5m", "yolov5l", "yolov5x")
CacheMode = Literal["none", "ram", "disk"]  # the trainer's image cache: none, in RAM, .npy files on disk
CACHE_MODES: tuple[CacheMode, ...] = get_args(CacheMode)
#: ``original``: the dataset as given; ``resized``: the copy ``speedopt prepare`` made at the trial's imgsz.
DATA_MODES = ("original", "resized")
#: ``amp``: True (AMP in FP16, the trainer's default), False (FP32), or "bf16" (AMP in bfloat16, Ultralytics on a GPU
#: that supports it): the trainer's own spelling (its ``amp=True/'fp16', 'bf16', False/'fp32'``).
Precision = bool | Literal["bf16"]
#: ``compile``: "off" (eager) or a torch.compile mode the installed trainer accepts (Engine.accepted reads them).
COMPILE_OFF = "off"
#: ``channels_last``: "default" leaves it to the trainer (Ultralytics: on for CUDA training), "on" or "off" sets it.
ChannelsLast = Literal["default", "on", "off"]
CHANNELS_LAST: tuple[ChannelsLast, ...] = get_args(ChannelsLast)
STRIDE = 32  # YOLOv5 P5 models: the largest stride, so imgsz must be a multiple of it
MAX_FREEZE = 24  # YOLOv5 has 25 modules (0-9 backbone, 10-23 head, 24 Detect); the Detect layer must train
# Sane maxima: far above any real run, low enough that a typo (or a hostile space file) cannot make
# speedopt enumerate or allocate without bound.
MAX_BATCH = 4096
MAX_IMGSZ = 8192
MAX_GPUS = 64  # one node's GPUs: torch.distributed.run --nproc_per_node


def max_workers() -> int:
    """The most dataloader workers a knob may ask for: 4 per CPU core, at least 64 (the trainers cap
    workers at the core count anyway)."""
    import os

    return max(64, 4 * (os.cpu_count() or 1))


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, so a hostile value cannot flood the one-line error."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Knobs:
    """One training configuration. Defaults are the trainer's own defaults (YOLOv5s, 640, 16, 8 workers)."""

    model: str = "yolov5s"
    imgsz: int = 640
    batch: int = 16
    workers: int = 8
    cache: CacheMode = "none"
    amp: Precision = True
    freeze: int = 0
    data: str = "original"  # DATA_MODES: the images the trainer reads (a resized copy is another data.yaml)
    gpus: int = 1  # DDP ranks on one node; batch stays the total across them, as both trainers read it
    compile: str = COMPILE_OFF  # torch.compile mode, or "off"; a one-time cost per run, measured apart (issue 31)
    channels_last: ChannelsLast = "default"  # the model's memory format on CUDA; "default": the trainer's choice
    #: deterministic algorithms (torch.use_deterministic_algorithms, deterministic cuDNN): run-to-run reproducibility,
    #: not expected accuracy; off lets torch pick non-deterministic kernels (issue 46)
    deterministic: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, the one stored in results and study attrs."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Knobs:
        """Inverse of :meth:`to_dict`; unknown keys are an error, missing ones take the defaults."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise UsageError(f"unknown knob(s) {', '.join(unknown)}; known knobs: {', '.join(sorted(names))}")
        return cls(**data)



def resolve_model(model: str) -> str:
    """Return a built-in scale name (``yolov5s``) or the absolute path of a local ``.pt``/``.yaml`` file.

    Only local files are accepted: speedopt never downloads weights.
    """
    text = model.strip()
    if text.lower() in MODEL_SCALES:
        return text.lower()
    path = Path(text).expanduser()
    if path.suffix in (".pt", ".yaml", ".yml"):
        if not path.is_file():
            raise UsageError(f"model file not found: {text}; give a local .pt/.yaml file or one of {', '.join(MODEL_SCALES)}")
        if path.suffix == ".pt":  # the trainer unpickles it: a crafted file would run its code there
            check_checkpoint(path, f"model {text}")
        else:  # the trainer evaluates strings of it: a crafted yaml would run its code there
            check_model_yaml(path.resolve(), f"model {text}")
        return str(path.resolve())
    raise UsageError(f"unknown model {shown(text)}; use one of {', '.join(MODEL_SCALES)}, or a local .pt/.yaml file")


def check_loads(model: str, weights: str | None = None) -> None:
    """Inspect every file a trainer will unpickle for a job: ``model`` when it is a ``.pt`` file
    (:func:`resolve_model`) and the ``weights`` a probe or a validation pass starts from; UsageError naming
    the one refused. For knobs and weights that come from a stored study, which may be an import from anywhere."""
    resolve_model(model)
    if weights:
        check_weights_file(weights)


def round_imgsz(imgsz: int) -> tuple[int, str | None]:
    """Round imgsz up to a multiple of the model stride, as the trainer does, and say so."""
    if imgsz <= 0:
        raise UsageError(f"imgsz must be a positive multiple of {STRIDE}, got {imgsz}")
    rounded = max(STRIDE, math.ceil(imgsz / STRIDE) * STRIDE)
    if rounded != imgsz:
        return rounded, f"imgsz={imgsz} is not a multiple of {STRIDE}; using imgsz={rounded}, as the trainer would"
    return imgsz, None


def validate(knobs: Knobs) -> tuple[Knobs, list[str]]:
    """Check every knob; return the normalised knobs and notes about what was adjusted.

    Raises :class:`UsageError` with one line naming the bad value and the fix.
    """
    notes: list[str] = []
    if knobs.batch <= 0:
        raise UsageError(f"batch must be a positive integer, got {knobs.batch} (AutoBatch is not a knob; give a size)")
    if knobs.batch > MAX_BATCH:
        raise UsageError(f"batch must be at most {MAX_BATCH}, got {knobs.batch}; give a smaller batch")
    if knobs.workers < 0:
        raise UsageError(f"workers must be 0 or more, got {knobs.workers}")
    if knobs.workers > max_workers():
        raise UsageError(
            f"workers must be at most {max_workers()} (4 per CPU core, at least 64), got {knobs.workers}; "
            "the trainer caps workers at the CPU cores anyway"
        )
    if knobs.imgsz > MAX_IMGSZ:
        raise UsageError(f"imgsz must be at most {MAX_IMGSZ}, got {knobs.imgsz}; give a smaller image size")
    if knobs.amp not in (True, False, "bf16"):
        raise UsageError(f"amp must be on, off (fp32) or bf16, got {shown(knobs.amp)}")
    if knobs.channels_last not in CHANNELS_LAST:
        raise UsageError(f"channels_last must be one of {', '.join(CHANNELS_LAST)}, got {shown(knobs.channels_last)}")
    if not isinstance(knobs.deterministic, bool):
        raise UsageError(f"deterministic must be on or off, got {shown(knobs.deterministic)}")
    if not isinstance(knobs.compile, str) or not _MODE.fullmatch(knobs.compile):
        raise UsageError(f"compile must be off or a torch.compile mode like default, got {shown(knobs.compile)}")
    if knobs.cache not in CACHE_MODES:
        raise UsageError(f"cache must be one of {', '.join(CACHE_MODES)}, got {knobs.cache!r}")
    if knobs.data not in DATA_MODES:
        raise UsageError(f"data must be one of {', '.join(DATA_MODES)}, got {shown(knobs.data)}")
    if not 1 <= knobs.gpus <= MAX_GPUS:
        raise UsageError(f"gpus must be between 1 and {MAX_GPUS} (DDP processes on this node), got {knobs.gpus}")
    if not 0 <= knobs.freeze <= MAX_FREEZE - 1:
        raise UsageError(f"freeze must be between 0 and {MAX_FREEZE - 1} (layers from the input), got {knobs.freeze}")
    imgsz, note = round_imgsz(knobs.imgsz)
    if note:
        notes.append(note)
    model = resolve_model(knobs.model)
    return dataclasses.replace(knobs, imgsz=imgsz, model=model), notes


_MODE = re.compile(r"[a-z][a-z0-9-]{0,39}")


def parse_amp(value: Any) -> Precision:
    """amp as the trainer spells it: on/True/fp16 (AMP in FP16), off/False/fp32, or bf16."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    named: dict[str, Precision] = {"bf16": "bf16", "fp16": True, "fp32": False}
    if text in named:
        return named[text]
    try:
        return parse_bool(text)
    except UsageError:
        raise UsageError(f"amp must be on, off, fp16, fp32 or bf16, got {shown(value)}") from None


def parse_compile(value: Any) -> str:
    """compile as the trainer spells it: False/off (eager), True (its "default" mode), or a mode name."""
    if isinstance(value, bool):
        return "default" if value else COMPILE_OFF
    text = str(value).strip().lower()
    if text in ("off", "false", "0", "no", "none"):
        return COMPILE_OFF
    if text in ("on", "true", "1", "yes"):
        return "default"
    if not _MODE.fullmatch(text):
        raise UsageError(f"compile must be off or a torch.compile mode like default, got {shown(value)}")
    return text


def parse_channels_last(value: Any) -> ChannelsLast:
    """channels_last: default (the trainer's choice), on or off."""
    if value is None or str(value).strip().lower() in ("default", "none", ""):
        return "default"
    try:
        return "on" if (value if isinstance(value, bool) else parse_bool(str(value))) else "off"
    except UsageError:
        raise UsageError(f"channels_last must be default, on or off, got {shown(value)}") from None


def parse_deterministic(value: Any) -> bool:
    """deterministic: on or off (the trainer's True/False)."""
    if isinstance(value, bool):
        return value
    try:
        return parse_bool(str(value))
    except UsageError:
        raise UsageError(f"deterministic must be on or off, got {shown(value)}") from None


def amp_text(amp: Precision) -> str:
    """on, off or bf16: amp as speedopt prints it."""
    return "bf16" if amp == "bf16" else ("on" if amp else "off")


def parse_bool(text: str) -> bool:
    """Parse on/off style flags (on, off, true, false, 1, 0, yes, no)."""
    value = text.strip().lower()
    if value in ("on", "true", "1", "yes"):
        return True
    if value in ("off", "false", "0", "no"):
        return False
    raise UsageError(f"expected on or off, got {shown(text)}")


_TEXT_HEAD = ("model", "imgsz", "batch", "workers", "cache", "amp", "freeze")  # always shown, in knobs_text's form


def knobs_text(knobs: Knobs) -> str:
    """Compact one-line config: model imgsz batch workers cache amp freeze, then each other knob of the registry
    that differs from its default (data=resized on a copy, gpus=2, compile=default, ...)."""
    values = knobs.to_dict()
    rest = "".join(f" {k.name}={value_text(values[k.name])}" for k in KNOBS.values()
                   if k.name not in _TEXT_HEAD and values[k.name] != k.default)
    return (
        f"{knobs.model} {knobs.imgsz}px b{knobs.batch} w{knobs.workers} cache={knobs.cache} amp={amp_text(knobs.amp)} "
        f"freeze={knobs.freeze}{rest}"
    )


def value_text(value: Any) -> str:
    """A knob value as the trainer's command line writes it (amp=on, not amp=True)."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _parse_cache(value: Any) -> CacheMode:
    if isinstance(value, bool):  # the trainer's own spelling: cache=True means ram
        return "ram" if value else "none"
    text = str(value).strip()
    text = {"true": "ram", "false": "none"}.get(text.lower(), text.lower())
    if text not in CACHE_MODES:
        raise UsageError(f"cache must be one of {', '.join(CACHE_MODES)}, got {shown(value)}")
    return text


def _parse_data(value: Any) -> str:
    text = str(value).strip()
    if text.lower() not in DATA_MODES:
        raise UsageError(
            f"data must be one of {', '.join(DATA_MODES)}, got {shown(value)} (resized: the copy `speedopt prepare` makes)"
        )
    return text.lower()


def _parse_model(value: Any) -> str:
    text = str(value).strip()
    stem = Path(text).stem.lower()
    if stem in MODEL_SCALES and not Path(text).is_file():  # yolov5s.pt / yolov5s.yaml: same architecture
        return stem
    return validate(Knobs(model=text))[0].model


def _integer(knob: str) -> Callable[[Any], int]:
    """The parser of an integer knob: an int, checked by :func:`validate` (imgsz: a multiple of the stride)."""

    def parse(value: Any) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise UsageError(f"{knob} must be an integer, got {shown(value)}") from None
        values: dict[str, Any] = {knob: number}
        checked, _ = validate(dataclasses.replace(Knobs(), **values))
        if knob == "imgsz" and checked.imgsz != number:
            raise UsageError(f"imgsz values must be multiples of {STRIDE}, got {number}")
        return number

    return parse


def _yolo_cache(value: Any) -> Any:
    return False if value == "none" else value


def _yolo_compile(value: Any) -> Any:
    return False if value == COMPILE_OFF else True if value == "default" else value


def _yolo_channels_last(value: Any) -> Any:
    return None if value == "default" else value == "on"  # None: the trainer's own choice


def _same(value: Any) -> Any:
    return value


def _amp_flag(value: Any) -> Any:
    return True if value is None else parse_amp(value)  # not given: the trainer's default, AMP on


def _on_off(value: Any) -> str:
    return "on" if value else "off"


Side = Literal["data", "compute"]  # the ceiling a knob acts on: the loader alone, the model's steps alone
MemoryKind = Literal["gpu", "ram"]  # peak GPU memory, peak host RAM (with workers) on the CPU


@dataclass(frozen=True)
class Flag:
    """A knob's option on speedopt's own command line (``speedopt trial``, ``speedopt ceilings``): the CLI defines
    it from this (:func:`speedopt.cli`'s ``add_knobs``), :func:`speedopt.command.speedopt_trial` writes it."""

    name: str  # --imgsz
    help: str
    default: Any  # as argparse gives it when the flag is not given (``read`` turns it into the knob's value)
    choices: tuple[str, ...] | None = None  # the words it takes; None: any (checked by ``low``/``high`` or ``listed``)
    low: int | None = None  # an integer flag's range: from low ...
    high: int | Callable[[], int] | None = None  # ... to high (a callable: known when the parser is built)
    listed: bool = False  # its values are the modes the installed trainer lists (Engine.accepted), read at parse time
    common: bool = True  # every knob command has it; False: ``speedopt trial``'s own (--gpus)
    text: Callable[[Any], str] = str  # the knob's value as the flag takes it (amp on/off/bf16)
    read: Callable[[Any], Any] = _same  # the flag's parsed value as the knob's


@dataclass(frozen=True)
class Knob:
    """One knob, declared once: how it is spelled and parsed, and what it changes. Its default is the
    :class:`Knobs` field's (:attr:`default`)."""

    name: str
    parse: Callable[[Any], Any]  # one value from YAML or the command line, checked like a trial's knob
    #: its key in the Ultralytics dialect (``yolo detect train KEY=...``, ``YOLO(...).train(KEY=...)``); None: no key
    #: of its own (``gpus`` is ``device=0,1``; ``data`` is another data.yaml)
    yolo: str | None = None
    yolo_value: Callable[[Any], Any] = _same  # the value as that key takes it (cache none -> False)
    #: its flag in classic ``train.py`` (the first one printed); None: train.py has none (AMP is on exactly on CUDA)
    train_py: str | None = None
    aliases: tuple[str, ...] = ()  # other keys a trainer's key=value baseline may spell it with (batch_size)
    step: int | None = None  # an integer knob a --space file may give as {low, high, step}: its default step
    signature: int = 0  # its place in the accuracy signature as printed (1 first); 0: it never changes the trained model
    sides: tuple[Side, ...] = ()  # the ceilings it acts on (their stored keys hold it)
    memory: tuple[MemoryKind, ...] = ()  # the memory whose peak it changes at a given batch (memory-fit keys hold it)
    at_end: bool = False  # a one-time cost per run (a cold torch.compile), measured apart from the steady images/s
    #: where not every trainer has it: the option's name in "the X trainer has no OPTION option"; an engine lists
    #: the knob in :attr:`speedopt.engines.Engine.honours` to run it, others fix it at its default
    option: str | None = None
    cuda_only: bool = False  # the trainer ignores it off CUDA: engines fix it at its default on the CPU
    #: a key the yolo dialect writes only where the value differs from the default (older trainers read the command)
    newer: bool = False
    #: its flag on speedopt's own command line (``speedopt trial``, ``speedopt ceilings``), which the CLI defines and
    #: reads into the knob and :func:`speedopt.command.speedopt_trial` writes; None: none (``data`` is the data.yaml given)
    flag: Flag | None = None

    @property
    def flag_always(self) -> bool:
        """``speedopt trial``'s command writes its flag always (a knob every trainer spells), else only where set."""
        return self.yolo is not None and not self.newer

    @property
    def default(self) -> Any:
        """The trainer's own default (the :class:`Knobs` field's)."""
        return getattr(Knobs(), self.name)

    @property
    def ranged(self) -> bool:
        """A --space file may give it as ``{low, high, step}``."""
        return self.step is not None


def _declare(*entries: Knob) -> Mapping[str, Knob]:
    return MappingProxyType({k.name: k for k in entries})  # read-only: the one declaration


#: The registry: every knob, in :class:`Knobs` field order.
KNOBS: Mapping[str, Knob] = _declare(
    Knob("model", _parse_model, yolo="model", aliases=("weights",), signature=1, sides=("compute",), memory=("gpu", "ram"),
         flag=Flag("--model", "yolov5n|s|m|l|x (built from the architecture yaml) or a local .pt/.yaml", "yolov5s")),
    Knob("imgsz", _integer("imgsz"), yolo="imgsz", train_py="--img", aliases=("img",), step=STRIDE, signature=2,
         sides=("data", "compute"), memory=("gpu", "ram"),
         flag=Flag("--imgsz", "train image size, multiple of 32 (default 640)", 640, low=1, high=MAX_IMGSZ)),
    Knob("batch", _integer("batch"), yolo="batch", train_py="--batch-size", aliases=("batch_size",), step=1, signature=4,
         sides=("data", "compute"), flag=Flag("--batch", "batch size (default 16)", 16, low=1, high=MAX_BATCH)),
    Knob("workers", _integer("workers"), yolo="workers", train_py="--workers", step=1, sides=("data",), memory=("ram",),
         flag=Flag("--workers", "dataloader workers (default 8; the trainer caps at CPU cores)", 8, low=0, high=max_workers)),
    Knob("cache", _parse_cache, yolo="cache", yolo_value=_yolo_cache, train_py="--cache", sides=("data",),
         flag=Flag("--cache", "image cache (default none)", "none", choices=CACHE_MODES)),
    Knob("amp", parse_amp, yolo="amp", signature=5, sides=("compute",), memory=("gpu",),
         flag=Flag("--amp", "precision: on/fp16 (AMP, the default with CUDA), off/fp32 (the CPU's), bf16 (Ultralytics, on a "
                    "GPU that has it)", None, choices=("on", "off", "fp16", "fp32", "bf16"), text=amp_text, read=_amp_flag)),
    Knob("freeze", _integer("freeze"), yolo="freeze", train_py="--freeze", step=1, signature=3, sides=("compute",),
         memory=("gpu", "ram"), flag=Flag("--freeze", "freeze the first N layers (default 0)", 0, low=0, high=MAX_FREEZE)),
    Knob("data", _parse_data, signature=6, sides=("data",), memory=("ram",)),
    Knob("gpus", _integer("gpus"), step=1, memory=("gpu",),
         flag=Flag("--gpus", "DDP processes under torch.distributed.run, on the first N GPUs of --device (default 1); --batch "
                    "is the total across them, as in both trainers", 1, low=1, high=MAX_GPUS, common=False)),
    Knob("compile", parse_compile, yolo="compile", yolo_value=_yolo_compile, sides=("compute",),
         at_end=True, option="torch.compile", newer=True,  # no memory: a memory fit never compiles
         flag=Flag("--compile", "torch.compile mode (Ultralytics only): off (default), default, reduce-overhead, ... as the "
                    "installed trainer accepts; its one-time compile is measured apart from the steady images/s", COMPILE_OFF,
                    listed=True)),
    Knob("channels_last", parse_channels_last, yolo="channels_last", yolo_value=_yolo_channels_last, sides=("compute",),
         memory=("gpu",), option="channels_last", cuda_only=True, newer=True,
         flag=Flag("--channels-last", "the model's memory format on CUDA (Ultralytics only); default: the trainer's choice (on "
                    "for CUDA)", "default", choices=CHANNELS_LAST, read=parse_channels_last)),
    # Not CUDA-only: torch.use_deterministic_algorithms acts on the CPU too (a few ops), though it is a GPU lever.
    Knob("deterministic", parse_deterministic, yolo="deterministic", sides=("compute",), option="deterministic", newer=True,
         flag=Flag("--deterministic", "deterministic algorithms (Ultralytics only; the classic train.py always runs on): on "
                    "(default); off gives up bit-identical reruns with the same seed, not expected accuracy", "on",
                    choices=("on", "off"), text=_on_off, read=parse_deterministic)),
)
KNOB_NAMES = tuple(KNOBS)


def knob(name: str) -> Knob:
    """The registry's entry for ``name``; UsageError naming the knobs for any other name."""
    if name not in KNOBS:
        raise UsageError(f"unknown knob {shown(name)}; knobs are {', '.join(KNOB_NAMES)}")
    return KNOBS[name]


def knob_names(where: Callable[[Knob], object]) -> tuple[str, ...]:
    """The knobs whose entry satisfies ``where``, in :class:`Knobs` field order (``knob_names(lambda k: k.ranged)``)."""
    return tuple(k.name for k in KNOBS.values() if where(k))


def parse_value(knob_name: str, value: Any) -> Any:
    """One knob value from YAML or the command line, checked like a trial's knob."""
    return knob(knob_name).parse(value)


def yolo_args(knobs: Knobs, newer: Literal["where set", "all", "none"] = "where set") -> dict[str, Any]:
    """The knobs as Ultralytics keyword arguments, in knob order, less the model (its argument is the engine's to
    write). ``newer``: which of the newer keys (:attr:`Knob.newer`) are written: those not at their default (a
    printed command, so an older trainer reads it), all (a trial tells the installed trainer every knob) or none (a
    quality probe, whose model is the accuracy signature's)."""
    values = knobs.to_dict()
    return {
        k.yolo: k.yolo_value(values[k.name])
        for k in KNOBS.values()
        if k.yolo and k.name != "model" and (not k.newer or newer == "all" or (newer == "where set" and values[k.name] != k.default))
    }
