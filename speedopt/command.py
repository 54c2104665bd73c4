"""Commands a person can paste, in their trainer's dialect, and the parsers that read them back.

Every printed form round-trips: parsing it gives back the same knobs (tested), so a report's
recommendation is exactly what was measured.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass

from speedopt.engines.ultralytics import model_argument
from speedopt.errors import UsageError
from speedopt.knobs import MODEL_SCALES, Knobs

DEFAULT_EPOCHS = 100  # the trainer's default


@dataclass(frozen=True)
class TrainCommand:
    """What a training command says: the data, the knobs, epochs and devices."""

    data: str
    knobs: Knobs
    epochs: int | None = None
    device: str | None = None


def _model_value(text: str) -> str:
    stem = text.removesuffix(".yaml")
    return stem if stem in MODEL_SCALES else text


def _cache_value(value: object) -> str:
    text = str(value).lower()
    return {"false": "none", "none": "none", "true": "ram", "ram": "ram", "disk": "disk"}[text]


def _bool_value(value: object) -> bool:
    return str(value).lower() == "true"


def yolo_train(data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None) -> str:
    """The Ultralytics CLI command (``device=0,1`` runs DDP on several GPUs)."""
    parts = [
        "yolo",
        "detect",
        "train",
        f"data={data}",
        f"model={model_argument(knobs.model)}",
        f"imgsz={knobs.imgsz}",
        f"batch={knobs.batch}",
        f"workers={knobs.workers}",
        f"cache={'False' if knobs.cache == 'none' else knobs.cache}",
        f"amp={knobs.amp}",
        f"freeze={knobs.freeze}",
    ]
    if epochs:
        parts.append(f"epochs={epochs}")
    if device and device != "cpu":
        parts.append(f"device={device}")
    return shlex.join(parts)


def python_train(data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None) -> str:
    """The equivalent ``YOLO(...).train(...)`` call."""
    args = {
        "data": data,
        "imgsz": knobs.imgsz,
        "batch": knobs.batch,
        "workers": knobs.workers,
        "cache": False if knobs.cache == "none" else knobs.cache,
        "amp": knobs.amp,
        "freeze": knobs.freeze,
    }
    if epochs:
        args["epochs"] = epochs
    if device and device != "cpu":
        args["device"] = device
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"from ultralytics import YOLO\n\nYOLO({model_argument(knobs.model)!r}).train({inner})"


def parse_yolo_train(command: str) -> TrainCommand:
    """Read a ``yolo detect train key=value ...`` command back into knobs."""
    words = shlex.split(command)
    if words[:3] != ["yolo", "detect", "train"]:
        raise UsageError(f"not a 'yolo detect train' command: {command!r}")
    values = dict(w.split("=", 1) for w in words[3:])
    knobs = Knobs(
        model=_model_value(values["model"]),
        imgsz=int(values["imgsz"]),
        batch=int(values["batch"]),
        workers=int(values["workers"]),
        cache=_cache_value(values["cache"]),
        amp=_bool_value(values["amp"]),
        freeze=int(values.get("freeze", 0)),
    )
    epochs = int(values["epochs"]) if "epochs" in values else None
    return TrainCommand(values["data"], knobs, epochs, values.get("device"))


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
                    amp=kw["amp"],
                    freeze=kw.get("freeze", 0),
                )
                return TrainCommand(kw["data"], knobs, kw.get("epochs"), kw.get("device"))
    raise UsageError("no YOLO(...).train(...) call found")


def speedopt_trial(data: str, knobs: Knobs, device: str, steps: int, warmup: int) -> str:
    """The `speedopt trial` command that measures this config again."""
    return shlex.join(
        [
            "speedopt",
            "trial",
            "--data",
            data,
            "--model",
            knobs.model,
            "--imgsz",
            str(knobs.imgsz),
            "--batch",
            str(knobs.batch),
            "--workers",
            str(knobs.workers),
            "--cache",
            knobs.cache,
            "--amp",
            "on" if knobs.amp else "off",
            "--freeze",
            str(knobs.freeze),
            "--device",
            device,
            "--steps",
            str(steps),
            "--warmup",
            str(warmup),
        ]
    )
