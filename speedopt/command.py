"""Commands a person can paste, in their trainer's dialect, and the parsers that read them back.

Dialects: the Ultralytics CLI (``yolo detect train ...``) and its Python call
(``YOLO(...).train(...)``), and the classic ultralytics/yolov5 ``python train.py ...`` (under
``torch.distributed.run`` for several GPUs). Every printed form round-trips: parsing it gives back
the same knobs (tested), so a recommendation is exactly what was measured.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt._trainer_args import model_argument, pretrained, train_py_args
from speedopt.engines import DEFAULT as DEFAULT_ENGINE
from speedopt.engines import Dialect, EngineSpec
from speedopt.errors import UsageError
from speedopt.knobs import (
    CACHE_MODES,
    KNOBS,
    MODEL_SCALES,
    CacheMode,
    Knobs,
    parse_amp,
    parse_value,
    yolo_args,
)


@dataclass(frozen=True)
class TrainCommand:
    """What a training command says: the data, the knobs, epochs and devices."""

    data: str
    knobs: Knobs
    epochs: int | None = None
    device: str | None = None
    weights: str | None = None  # ``pretrained=``: the checkpoint the run starts from


def _model_value(text: str) -> str:
    stem = text.removesuffix(".yaml")
    return stem if stem in MODEL_SCALES else text


def _cache_value(value: object) -> CacheMode:
    modes: dict[str, CacheMode] = {"false": "none", "none": "none", "true": "ram", "ram": "ram", "disk": "disk"}
    return modes[str(value).lower()]


def _newer(values: Mapping[Any, Any]) -> dict[str, Any]:
    """The newer knobs a yolo command or call sets (the registry's, read by their parsers); absent ones keep their default."""
    return {k.name: k.parse(values[k.yolo]) for k in KNOBS.values() if k.newer and k.yolo is not None and k.yolo in values}


#: The trainer's own no-eval switch, set for a user's model file or checkpoint as every Ultralytics job of speedopt
#: runs (Ultralytics >= 8.4 then loads checkpoints weights-only with its allowlist and parses a model yaml's
#: activation instead of eval()ing it; older releases ignore it): the printed command runs the file as the trials did.
SAFE_LOAD = "ULTRALYTICS_SAFE_LOAD"


def _safe_load(knobs: Knobs, weights: str | None) -> bool:
    """Whether the run loads a file of the user's (a model .pt or .yaml, or a checkpoint to start from)."""
    return knobs.model not in MODEL_SCALES or pretrained(knobs, weights) is not None


def program_words(words: list[str]) -> list[str]:
    """A shell command's words from its program on: the ``NAME=value`` words before it (the environment it runs in,
    such as :data:`SAFE_LOAD`'s) left out."""
    start = 0
    while start < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[start]):
        start += 1
    return words[start:]


def yolo_train(data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None, weights: str | None = None) -> str:
    """The Ultralytics CLI command (``device=0,1`` runs DDP on several GPUs; ``weights``: ``pretrained=``, the
    checkpoint the run starts from, as the study's quality probes did), after ``ULTRALYTICS_SAFE_LOAD=1`` where it
    loads a file of the user's (:data:`SAFE_LOAD`)."""
    parts = [
        *([f"{SAFE_LOAD}=1"] if _safe_load(knobs, weights) else []),
        "yolo",
        "detect",
        "train",
        f"data={data}",
        f"model={model_argument(knobs.model)}",
        *(f"{k}={v}" for k, v in yolo_args(knobs).items()),  # the registry's yolo keys, newer ones only where set
    ]
    if pretrained(knobs, weights):
        parts.append(f"pretrained={weights}")
    if epochs:
        parts.append(f"epochs={epochs}")
    if device and device != "cpu":
        parts.append(f"device={device}")
    return shlex.join(parts)


def python_train(data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None, weights: str | None = None) -> str:
    """The equivalent ``YOLO(...).train(...)`` call."""
    args = {"data": data, **yolo_args(knobs)}
    if pretrained(knobs, weights):
        args["pretrained"] = weights
    if epochs:
        args["epochs"] = epochs
    if device and device != "cpu":
        args["device"] = device
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    safe = f"import os\n\nos.environ[{SAFE_LOAD!r}] = '1'  # your file loads as the trials loaded it\n\n" if _safe_load(knobs, weights) else ""
    return f"{safe}from ultralytics import YOLO\n\nYOLO({model_argument(knobs.model)!r}).train({inner})"


def gpus_of(device: object) -> int:
    """GPUs a trainer's ``device`` value trains on: ``0,1`` (or ``[0, 1]``) is 2; one index, cpu or none is 1."""
    if isinstance(device, (list, tuple)):
        return max(1, len(device))
    text = str(device or "").strip().lower()
    return len([d for d in text.split(",") if d.strip()]) if text and text != "cpu" else 1


def parse_yolo_train(command: str) -> TrainCommand:
    """Read a ``yolo detect train key=value ...`` command back into knobs."""
    words = program_words(shlex.split(command.split(OPTIONAL)[0]))  # a printed command may end in a comment
    if words[:3] != ["yolo", "detect", "train"]:
        raise UsageError(f"not a 'yolo detect train' command: {command!r}")
    values = dict(w.split("=", 1) for w in words[3:])
    knobs = Knobs(
        model=_model_value(values["model"]),
        imgsz=int(values["imgsz"]),
        batch=int(values["batch"]),
        workers=int(values["workers"]),
        cache=_cache_value(values["cache"]),
        amp=parse_amp(values["amp"]),
        freeze=int(values.get("freeze", 0)),
        gpus=gpus_of(values.get("device")),
        **_newer(values),
    )
    epochs = int(values["epochs"]) if "epochs" in values else None
    return TrainCommand(values["data"], knobs, epochs, values.get("device"), values.get("pretrained"))


def parse_python_train(code: str) -> TrainCommand:
    """Read a ``YOLO(model).train(**kwargs)`` call back into knobs."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "train":
            inner = node.func.value
            if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "YOLO":
                model = ast.literal_eval(inner.args[0])
                kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                knobs = Knobs(
                    model=_model_value(model),
                    imgsz=kw["imgsz"],
                    batch=kw["batch"],
                    workers=kw["workers"],
                    cache=_cache_value(kw["cache"]),
                    amp=parse_amp(kw["amp"]),
                    freeze=kw.get("freeze", 0),
                    gpus=gpus_of(kw.get("device")),
                    **_newer(kw),
                )
                return TrainCommand(kw["data"], knobs, kw.get("epochs"), kw.get("device"), kw.get("pretrained"))
    raise UsageError("no YOLO(...).train(...) call found")


def train_py(data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None, weights: str | None = None) -> str:
    """The classic YOLOv5 command; with several GPUs (``device="0,1"``) under ``torch.distributed.run``."""
    gpus = len(device.split(",")) if device and device != "cpu" else 1
    launcher = ["python", "train.py"]
    if gpus > 1:
        launcher = ["python", "-m", "torch.distributed.run", "--nproc_per_node", str(gpus), "train.py"]
    return shlex.join(launcher + train_py_args(data, knobs, device=device, epochs=epochs, weights=weights))


_FORMS = {"yolo": yolo_train, "train.py": train_py}

#: How a printed training command ends when the recommendation carries changes that bought nothing measurable: a
#: shell comment (bash ignores it; a word of the command itself is quoted by shlex.join when it holds a "#")
OPTIONAL = "  # optional, no measurable gain in the ablation: "


def with_optional(line: str, optional: tuple[str, ...]) -> str:
    """``line`` with the changes in ``optional`` marked optional in a comment on the same line."""
    return f"{line}{OPTIONAL}{'; '.join(optional)}" if optional else line


def train_command(
    dialect: Dialect, data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None, weights: str | None = None
) -> str:
    """The training command in ``dialect``: ``yolo detect train ...`` or ``python train.py ...``."""
    return _FORMS[dialect](data, knobs, device=device, epochs=epochs, weights=weights)


@dataclass(frozen=True)
class ClassicCommand:
    """A classic ``train.py`` command read back: its knobs and the flags around them."""

    knobs: Knobs
    data: str | None
    device: str | None
    epochs: int | None
    gpus: int = 1
    weights: str | None = None  # --weights FILE.pt beside a --cfg: the checkpoint the cfg's model starts from


class _Flags(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"cannot read the train.py command: {message}")


def _flags() -> argparse.ArgumentParser:
    """The subset of train.py's own argparse flags that carry knobs (same names, defaults, aliases), each knob's
    flag its registry entry's :attr:`~speedopt.knobs.Knob.train_py`, read into the knob's name."""
    flag = {k.name: k.train_py for k in KNOBS.values() if k.train_py is not None}
    parser = _Flags(add_help=False)  # abbreviations as train.py allows them: --batch is --batch-size
    parser.add_argument("--weights", default="yolov5s.pt")
    parser.add_argument("--cfg", default="")
    parser.add_argument("--data", default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument(flag["batch"], dest="batch", type=int, default=16)
    parser.add_argument("--imgsz", flag["imgsz"], "--img-size", dest="imgsz", type=int, default=640)  # train.py's three
    parser.add_argument(flag["cache"], dest="cache", nargs="?", const="ram", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument(flag["workers"], dest="workers", type=int, default=8)
    parser.add_argument(flag["freeze"], dest="freeze", nargs="+", type=int, default=[0])
    return parser


def _split_launcher(words: list[str]) -> tuple[int, list[str]]:
    """GPUs and the train.py flags of ``python [-m torch.distributed.run --nproc_per_node G ...] train.py ...``."""
    script = next((i for i, w in enumerate(words) if Path(w).name == "train.py" or w == "yolov5.train"), None)
    if script is None:
        raise UsageError("not a classic YOLOv5 command: no train.py in it")
    before = words[:script]
    gpus = 1
    for i, word in enumerate(before):
        if word.startswith("--nproc_per_node") or word.startswith("--nproc-per-node"):
            value = word.partition("=")[2] or (before[i + 1] if i + 1 < len(before) else "")
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"cannot read the train.py command: --nproc_per_node {value!r} is not a GPU count")
            gpus = int(value)
    return gpus, words[script + 1 :]


def _model(weights: str, cfg: str) -> str:
    if cfg and weights.endswith(".pt"):
        return str(parse_value("model", cfg))  # train.py builds the cfg and loads the checkpoint into it
    if weights.endswith(".pt"):
        return str(parse_value("model", weights))  # yolov5s.pt (not a local file) is the yolov5s architecture
    if not cfg:
        raise UsageError("cannot read the train.py command: it has neither --cfg nor --weights FILE.pt")
    return str(parse_value("model", cfg))


def _freeze(layers: list[int]) -> int:
    if len(layers) == 1:
        return layers[0]
    if layers != list(range(len(layers))):
        raise UsageError(f"--freeze {' '.join(map(str, layers))}: speedopt's freeze knob is the first N layers (0 1 ... N-1)")
    return len(layers)


def parse_train_py(command: str) -> ClassicCommand:
    """Read a classic ``python train.py ...`` command (or its DDP form) back into knobs.

    AMP is not a train.py flag: it is on exactly when training runs on CUDA (``--device cpu`` turns it off).
    Flags that are not knobs (``--hyp``, ``--name`` ...) are ignored.
    """
    try:
        words = shlex.split(command.split(OPTIONAL)[0])
    except ValueError as exc:
        raise UsageError(f"cannot read the train.py command: {exc}") from None
    gpus, rest = _split_launcher(words)
    opt, _ = _flags().parse_known_args(rest)
    cache: CacheMode = opt.cache or "none"
    if cache not in CACHE_MODES:
        raise UsageError(f"cannot read the train.py command: --cache {opt.cache!r} (expected ram or disk)")
    knobs = Knobs(
        model=_model(opt.weights, opt.cfg),
        imgsz=opt.imgsz,
        batch=opt.batch,
        workers=opt.workers,
        cache=cache,
        amp=(opt.device or "").strip().lower() != "cpu",
        freeze=_freeze(opt.freeze),
        gpus=gpus,
    )
    start = opt.weights if opt.cfg and opt.weights.endswith(".pt") else None
    return ClassicCommand(knobs=knobs, data=opt.data, device=opt.device, epochs=opt.epochs, gpus=gpus, weights=start)


def speedopt_trial(
    data: str,
    knobs: Knobs,
    device: str,
    steps: int,
    warmup: int,
    engine_spec: EngineSpec | None = None,
    max_steps: int | None = None,
) -> str:
    """The `speedopt trial` command that measures this config again (``engine_spec``: the engine that measured it,
    with its checkout; default: the command's default engine)."""
    spec = engine_spec or EngineSpec()
    values = knobs.to_dict()
    flags = [
        word
        for k in KNOBS.values()
        if k.flag is not None and (k.flag_always or values[k.name] != k.default)  # the registry's flags, in knob order
        for word in (k.flag.name, k.flag.text(values[k.name]))
    ]
    parts = [
        "speedopt",
        "trial",
        "--data",
        data,
        *flags,
        "--device",
        device,
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
    ]
    if max_steps is not None:
        parts += ["--max-steps", str(max_steps)]
    if spec.name != DEFAULT_ENGINE:  # the command's default engine needs no flag
        parts += ["--engine", spec.name]
    if spec.checkout:
        parts += ["--yolov5-dir", spec.checkout]
    return shlex.join(parts)
