"""The speed knobs of a YOLOv5 training run: their values, domains and validation.

A :class:`Knobs` value is one training configuration. It crosses module lines (CLI -> trial ->
engine -> study), so it is a frozen dataclass with a plain-dict form for JSON and Optuna attrs.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
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


KNOB_NAMES = tuple(f.name for f in dataclasses.fields(Knobs))


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


def knobs_text(knobs: Knobs) -> str:
    """Compact one-line config: model imgsz batch workers cache amp freeze (and data=resized on a copy)."""
    data = " data=resized" if knobs.data == "resized" else ""
    gpus = f" gpus={knobs.gpus}" if knobs.gpus > 1 else ""
    compiled = f" compile={knobs.compile}" if knobs.compile != COMPILE_OFF else ""
    nhwc = f" channels_last={knobs.channels_last}" if knobs.channels_last != "default" else ""
    return (
        f"{knobs.model} {knobs.imgsz}px b{knobs.batch} w{knobs.workers} cache={knobs.cache} amp={amp_text(knobs.amp)} "
        f"freeze={knobs.freeze}{data}{gpus}{compiled}{nhwc}"
    )


def value_text(value: Any) -> str:
    """A knob value as the trainer's command line writes it (amp=on, not amp=True)."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def parse_value(knob: str, value: Any) -> Any:
    """One knob value from YAML or the command line, checked like a trial's knob."""
    if knob not in KNOB_NAMES:
        raise UsageError(f"unknown knob {shown(knob)}; knobs are {', '.join(KNOB_NAMES)}")
    text = str(value).strip()
    if knob == "amp":
        return parse_amp(value)
    if knob == "compile":
        return parse_compile(value)
    if knob == "channels_last":
        return parse_channels_last(value)
    if knob == "cache":
        if isinstance(value, bool):  # the trainer's own spelling: cache=True means ram
            return "ram" if value else "none"
        text = {"true": "ram", "false": "none"}.get(text.lower(), text.lower())
        if text not in CACHE_MODES:
            raise UsageError(f"cache must be one of {', '.join(CACHE_MODES)}, got {shown(value)}")
        return text
    if knob == "data":
        if text.lower() not in DATA_MODES:
            raise UsageError(
                f"data must be one of {', '.join(DATA_MODES)}, got {shown(value)} (resized: the copy `speedopt prepare` makes)"
            )
        return text.lower()
    if knob == "model":
        stem = Path(text).stem.lower()
        if stem in MODEL_SCALES and not Path(text).is_file():  # yolov5s.pt / yolov5s.yaml: same architecture
            return stem
        return validate(Knobs(model=text))[0].model
    try:
        number = int(text)
    except ValueError:
        raise UsageError(f"{knob} must be an integer, got {shown(value)}") from None
    values: dict[str, Any] = {knob: number}
    checked, _ = validate(dataclasses.replace(Knobs(), **values))
    if knob == "imgsz" and checked.imgsz != number:
        raise UsageError(f"imgsz values must be multiples of {STRIDE}, got {number}")
    return number
