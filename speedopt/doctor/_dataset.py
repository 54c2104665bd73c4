"""The dataset side of a pre-flight: the data.yaml loads, how big its images are against imgsz, the loggers."""

from __future__ import annotations

from speedopt import engines
from speedopt.data import Dataset, DatasetFingerprint
from speedopt.doctor._check import Check, Level
from speedopt.reporting import logger_integrations

WASTE = 1.5  # images longer than this x imgsz: decoding costs (ratio^2)x the pixels trained


def dataset(ds: Dataset, fp: DatasetFingerprint) -> Check:
    """What the data.yaml lists."""
    bad = f", {fp.unreadable} unreadable" if fp.unreadable else ""
    return Check("dataset", Level.WARN if fp.unreadable else Level.OK,
                 f"{ds.yaml_path}: {len(ds.train_images)} train and {len(ds.val_images)} val images, {fp.classes} classes{bad}")


def decode_waste(ds: Dataset, fp: DatasetFingerprint, imgsz: int) -> Check:
    """Images much larger than imgsz: every epoch decodes the full image, then throws most pixels away."""
    long_side = max(fp.mean_width, fp.mean_height)
    ratio = long_side / imgsz if imgsz else 1.0
    what = f"images {fp.mean_width}x{fp.mean_height} on average, imgsz={imgsz}"
    if ratio > WASTE:
        return Check(
            "decode", Level.WARN, f"{what}: each decode handles {ratio**2:.1f}x the pixels trained",
            f"speedopt prepare --data {ds.yaml_path} --imgsz {imgsz} (a resized copy), or search with --prepare png",
        )
    return Check("decode", Level.OK, f"{what}: no more than {WASTE}x the long side trained")


def loggers(engine: str) -> Check:
    """Logger integrations on for the trainer here; online ones send during training and can stall it."""
    found = logger_integrations(engine)
    online = [log for log in found if log.online]
    words = engines.words(engine)  # how to turn one off, in the trainer's own terms
    listed = ", ".join(f"{log.name} ({'online' if log.online else 'local'})" for log in found) or "none"
    if online:
        return Check("loggers", Level.WARN, f"on for {engine}: {listed}; online loggers can stall training on a slow network",
                     "; ".join(f"{log.name}: {log.how_off(words)}" for log in online))
    return Check("loggers", Level.OK, f"on for {engine}: {listed}")
