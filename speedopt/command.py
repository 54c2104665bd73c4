"""Commands a person can paste: the training command for a config, and the trial that measured it."""

from __future__ import annotations

import shlex

from speedopt.engines.ultralytics import model_argument
from speedopt.knobs import Knobs


def yolo_train(data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None) -> str:
    """The Ultralytics CLI command that trains with these knobs."""
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
    ]
    if knobs.freeze:
        parts.append(f"freeze={knobs.freeze}")
    if device:
        parts.append(f"device={device}")
    if epochs:
        parts.append(f"epochs={epochs}")
    return shlex.join(parts)


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
