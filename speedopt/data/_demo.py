"""A synthetic detection dataset in YOLO format: coloured shapes on noisy backgrounds.

Deterministic for a seed (each image draws from its own generator seeded by (seed, split, index)),
small enough to train on a CPU, and real enough that the trainer learns something (mAP rises).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from speedopt.errors import UsageError

CLASSES = ("circle", "square", "triangle")
MARKER = ".speedopt-demo"  # marks a folder this module wrote, so it may be rewritten
FORMATS = ("jpg", "png")
MAX_SIDE = 8192  # the largest imgsz a knob may take: a larger demo image only wastes memory and disk
MAX_IMAGES = 1_000_000  # per split: a demo set, not a benchmark of the disk



@dataclass(frozen=True)
class DemoSpec:
    """What to generate: image counts per split, image size, and the seed."""

    train: int = 256
    val: int = 64
    width: int = 640
    height: int = 480
    seed: int = 0
    format: str = "jpg"  # jpg, or png: lossless and slow to decode, as large camera images are
    quality: int = 90  # JPEG quality (a camera writes about 95)


#: ``speedopt demo-data --photos``: what a camera writes, the decode-heavy case a pre-resized copy fixes.
PHOTOS = DemoSpec(train=96, val=16, width=1920, height=1080, quality=95)


def parse_size(text: str) -> tuple[int, int]:
    """Parse ``WxH`` (e.g. ``640x480``)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size must look like 640x480, got {text!r}") from None
    if w < 32 or h < 32:
        raise UsageError(f"--size must be at least 32x32, got {text!r}")
    if w > MAX_SIDE or h > MAX_SIDE:
        raise UsageError(f"--size must be at most {MAX_SIDE}x{MAX_SIDE}, got {text!r}; give a smaller size")
    return w, h


def _background(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    base = rng.integers(40, 200, size=3)
    gradient = np.linspace(-30, 30, w)[None, :, None] * rng.uniform(-1, 1, size=3)
    noise = rng.normal(0, 18, size=(h, w, 3))
    return np.clip(base + gradient + noise, 0, 255).astype(np.uint8)


def _draw_image(rng: np.random.Generator, w: int, h: int) -> tuple[Any, list[str]]:
    """One image and its YOLO label lines (class cx cy bw bh, normalised)."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(_background(rng, w, h))
    draw = ImageDraw.Draw(image)
    lines = []
    for _ in range(int(rng.integers(1, 5))):
        cls = int(rng.integers(len(CLASSES)))
        size = int(rng.integers(min(w, h) // 10, min(w, h) // 3))
        x0 = int(rng.integers(0, w - size))
        y0 = int(rng.integers(0, h - size))
        box = (x0, y0, x0 + size, y0 + size)
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        if CLASSES[cls] == "circle":
            draw.ellipse(box, fill=colour)
        elif CLASSES[cls] == "square":
            draw.rectangle(box, fill=colour)
        else:
            draw.polygon([(x0 + size / 2, y0), (x0, y0 + size), (x0 + size, y0 + size)], fill=colour)
        cx, cy = (x0 + size / 2) / w, (y0 + size / 2) / h
        lines.append(f"{cls} {cx:.6f} {cy:.6f} {size / w:.6f} {size / h:.6f}")
    return image, lines


def _prepare_folder(root: Path) -> None:
    """Refuse to write into a folder the user owns; clear one that an earlier demo-data run wrote."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} exists and is not a folder; choose another DIR")
    if root.is_dir() and any(root.iterdir()):
        if not (root / MARKER).is_file():
            raise UsageError(f"{root} is not empty and was not made by speedopt demo-data; choose an empty or new DIR")
        for child in ("images", "labels"):
            shutil.rmtree(root / child, ignore_errors=True)
        for stale in ("data.yaml",):
            (root / stale).unlink(missing_ok=True)


def generate(root: str | Path, spec: DemoSpec = DemoSpec()) -> Path:
    """Write the dataset under ``root`` and return the absolute path of its data.yaml.

    A folder that cannot be written (no permission, read-only, full disk) is one line naming it and the fix.
    """
    if spec.train < 1 or spec.val < 1:
        raise UsageError(f"--train and --val must be at least 1, got {spec.train} and {spec.val}")
    if spec.train > MAX_IMAGES or spec.val > MAX_IMAGES:
        raise UsageError(f"--train and --val must be at most {MAX_IMAGES:,}, got {spec.train} and {spec.val}")
    if not 1 <= spec.quality <= 100:
        raise UsageError(f"JPEG quality must be between 1 and 100, got {spec.quality}")
    if spec.format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {spec.format!r}")
    parse_size(f"{spec.width}x{spec.height}")
    root = Path(root).expanduser().resolve()
    fresh = not root.exists()
    try:
        return _write(root, spec)
    except OSError as exc:
        if fresh:  # a half-written set that this call started is not left behind
            shutil.rmtree(root, ignore_errors=True)
        where = exc.filename or root
        raise UsageError(
            f"cannot write the demo dataset at {where}: {exc.strerror or exc}; "
            "give a folder you can write: speedopt demo-data PATH"
        ) from None


def _write(root: Path, spec: DemoSpec) -> Path:
    """Write every image, label and the data.yaml under ``root`` (checked by :func:`generate`)."""
    _prepare_folder(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("written by speedopt demo-data; safe to delete or regenerate\n")
    for split_id, (split, count) in enumerate((("train", spec.train), ("val", spec.val))):
        images, labels = root / "images" / split, root / "labels" / split
        images.mkdir(parents=True)
        labels.mkdir(parents=True)
        for index in range(count):
            rng = np.random.default_rng([spec.seed, split_id, index])
            image, lines = _draw_image(rng, spec.width, spec.height)
            name = images / f"{split}_{index:05d}.{spec.format}"
            if spec.format == "jpg":
                image.save(name, quality=spec.quality)
            else:
                image.save(name)
            (labels / f"{split}_{index:05d}.txt").write_text("\n".join(lines) + "\n")
    data = {
        "path": str(root),
        "train": "images/train",
        "val": "images/val",
        "names": dict(enumerate(CLASSES)),
    }
    yaml_path = root / "data.yaml"
    yaml_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return yaml_path
