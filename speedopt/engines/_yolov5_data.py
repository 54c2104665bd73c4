"""The data a classic trial hands train.py: its data.yaml, the training subset and the subset's label cache.

Label caches: a trial's subset is a list file in its private folder (``train-subset.txt``), so train.py
names the subset's label cache after it (``train-subset.cache``) and the user's ``labels/train.cache``
is never written by a subset. Before train.py runs, that file is written from the full split's cache
which the study's labels job built (:meth:`~speedopt.engines.yolov5.Yolov5Engine.build_label_cache`), when
the file still holds the recorded hash and cache version and has every subset image: train.py then finds a
valid cache for the subset and scans nothing. The subset's image paths come with the trial
(``TrainRun.train_subset``): a trial lists no image folder itself.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import yaml

from speedopt.data import load, write_trainer_yaml
from speedopt.engines._base import ProbeRun, SplitLabels, TrainRun
from speedopt.engines._common import built_split, subset_entries, trainer_paths


def probe_train_run(run: ProbeRun, images: int | None = None) -> TrainRun:
    """A probe as a training run on a leading subset: ``images``, else its fraction of the train set (a count
    when above 1), at least one batch. The train set is listed once, here: a probe job carries no listing."""
    train = load(run.data_yaml).train_images
    if images is None:
        count = int(run.fraction) if run.fraction > 1 else round(len(train) * run.fraction)
        images = max(count, run.knobs.batch)
    images = min(len(train), images)
    subset = tuple(map(str, train[:images])) if images < len(train) else ()
    return TrainRun(
        run.data_yaml, run.knobs, run.device, images, len(train), run.epochs, run.workdir, run.seed, train_subset=subset,
        weights=run.weights,
    )


def trial_data(run: TrainRun, dataloaders: Any) -> str:
    """The data.yaml train.py reads: the user's with every path absolute (:func:`speedopt.data.write_trainer_yaml`:
    train.py resolves a relative ``path`` against its own folder, speedopt as Ultralytics does) and, for a
    subset, ``train`` a list of the subset's images in the trial folder, with its label cache seeded from
    the full split's where the study built one (see the module docstring)."""
    out = write_trainer_yaml(run.data_yaml, run.workdir)
    if not run.train_subset:
        return str(out)
    data = yaml.safe_load(out.read_text())
    subset = run.workdir / "train-subset.txt"
    subset.write_text("".join(f"{p}\n" for p in trainer_paths(run.train_subset)))
    data["train"] = str(subset)
    full = built_split(run.label_caches, "train")
    if full is not None:
        _seed_subset_cache(subset, full, dataloaders)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


def label_dataset(dataset_class: Any, path: Any, prefix: str) -> Any:
    """The checkout's ``LoadImagesAndLabels`` on a full split, with the arguments that decide its label cache
    (path; no image cache), as that checkout's signature takes them: the pip package has ``workers``
    (the scan's pool), upstream master ``rank`` and ``seed`` instead, and an older clone neither."""
    wanted: dict[str, Any] = dict(img_size=640, batch_size=16, augment=False, cache_images=False, stride=32, prefix=prefix, workers=8)
    params = inspect.signature(dataset_class.__init__).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        wanted = {k: v for k, v in wanted.items() if k in params}
    return dataset_class(path, **wanted)


def cache_file(split: str | list[str], first_label: str) -> Path:
    """Where LoadImagesAndLabels keeps a split's label cache: beside a list file, else beside the label folder."""
    last = Path(split[-1] if isinstance(split, list) else split)
    return (last if last.is_file() else Path(first_label).parent).with_suffix(".cache")


def _seed_subset_cache(subset: Path, full: SplitLabels, dataloaders: Any) -> bool:
    """Write the subset list's label cache from the full split's (a file train.py then finds valid); False,
    writing nothing, when the full file is not the one the study built or lacks a subset image."""
    import numpy as np

    version = dataloaders.LoadImagesAndLabels.cache_version
    try:
        cache = np.load(full.cache, allow_pickle=True).item()
    except Exception:  # missing, truncated, not a cache
        return False
    if cache.get("version") != version or str(cache.get("version")) != full.version or cache.get("hash") != full.hash:
        return False
    # The subset's files as LoadImagesAndLabels lists a list file: its lines, sorted, images only.
    lines = subset.read_text().strip().splitlines()
    images = sorted(x.replace("/", os.sep) for x in lines if x.split(".")[-1].lower() in dataloaders.IMG_FORMATS)
    entries = {k: v for k, v in cache.items() if k not in ("hash", "results", "msgs", "version")}
    picked = subset_entries(entries, images, cache.get("msgs") or ())
    if picked is None:
        return False
    found, corrupt = picked
    seeded: dict[str, Any] = dict(found)
    labelled = sum(len(entry[0]) > 0 for _, entry in found)
    seeded["hash"] = dataloaders.get_hash(dataloaders.img2label_paths(images) + images)
    seeded["results"] = (labelled, 0, len(found) - labelled, corrupt, len(images))  # found, missing, empty, corrupt, total
    seeded["msgs"] = []
    seeded["version"] = version
    with open(subset.with_suffix(".cache"), "wb") as file:
        np.save(file, np.array(seeded, dtype=object), allow_pickle=True)
    return True
