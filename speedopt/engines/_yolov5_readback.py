"""The knobs a classic trial really ran, read back from train.py's train loader, dataset and model (it caps
workers, batch and image size, and may drop ``cache=ram``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from speedopt.engines._common import frozen_prefix
from speedopt.knobs import MODEL_SCALES, CacheMode, Knobs


def knobs_as_run(asked: Knobs, model: Any, loader: Any, dataset: Any, amp: bool) -> Knobs:
    """Every knob read back from the running trainer: loader, dataset and the model as it trains."""
    model = getattr(model, "module", model)  # DataParallel / DDP
    name = asked.model
    if asked.model in MODEL_SCALES:
        name = Path(getattr(model, "yaml_file", "") or asked.model).stem
    return dataclasses.replace(
        loader_knobs(asked, loader, dataset), model=name, amp=bool(amp), freeze=frozen_prefix(model.named_parameters())
    )


def loader_knobs(asked: Knobs, loader: Any, dataset: Any) -> Knobs:
    """The data knobs read back from train.py's train loader and dataset (the model's as asked)."""
    cache: CacheMode
    if all(im is not None for im in dataset.ims):
        cache = "ram"
    elif asked.cache == "disk" and all(Path(f).exists() for f in dataset.npy_files):
        cache = "disk"
    else:
        cache = "none"
    return Knobs(
        model=asked.model,
        imgsz=int(dataset.img_size),
        batch=int(loader.batch_size),
        workers=int(loader.num_workers),
        cache=cache,
        amp=asked.amp,
        freeze=asked.freeze,
        data=asked.data,  # which data.yaml train.py got; images_read() reports what it read
    )
