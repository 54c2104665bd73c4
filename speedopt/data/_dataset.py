"""A YOLO-format dataset as the trainer will see it: data.yaml checked, images listed, cache sizes estimated.

Everything here reads; nothing writes into the user's dataset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from speedopt.errors import UsageError

IMAGE_SUFFIXES = frozenset({"bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm", "heic"})


@dataclass(frozen=True)
class Dataset:
    """A checked data.yaml: absolute path of the yaml, its class names and the image files of each split."""

    yaml_path: Path
    names: tuple[str, ...]
    train_images: tuple[Path, ...]
    val_images: tuple[Path, ...]
    root: Path | None = None  # the folder that relative train/val entries are under (``path:``, resolved)

    @property
    def name(self) -> str:
        """A readable dataset name: the folder that holds data.yaml (or the yaml's stem when generic)."""
        stem = self.yaml_path.stem
        return self.yaml_path.parent.name if stem in ("data", "dataset") else stem


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UsageError(f"data.yaml is not valid YAML{where}: {path}; fix the file or regenerate it") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise UsageError(f"data.yaml must be a mapping with train, val and names keys: {path}")
    return data


def _split_images(root: Path, entry: object, split: str, yaml_path: Path) -> tuple[Path, ...]:
    entries = entry if isinstance(entry, list) else [entry]
    images: list[Path] = []
    for item in entries:
        if not isinstance(item, str) or not item:
            raise UsageError(f"'{split}' in {yaml_path} must be a folder, a .txt list of images, or a list of them")
        path = Path(item) if Path(item).is_absolute() else root / item
        if path.is_dir():
            images += [p for p in path.rglob("*") if p.suffix[1:].lower() in IMAGE_SUFFIXES]
        elif path.is_file() and path.suffix == ".txt":
            for line in path.read_text().splitlines():
                line = line.strip()
                if line:
                    p = Path(line) if Path(line).is_absolute() else path.parent / line
                    images.append(p)
        else:
            raise UsageError(f"{split} images folder does not exist: {path} (from {yaml_path}); fix '{split}' or 'path'")
    if not images:
        raise UsageError(f"no images in the {split} split ({', '.join(map(str, entries))} under {root}); add images or fix '{split}'")
    return tuple(sorted(images))


def label_path(image: Path) -> Path:
    """The label file the YOLO trainers look for: /images/ -> /labels/, suffix -> .txt."""
    parts = list(image.parts)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            break
    return Path(*parts).with_suffix(".txt")


def load(yaml_path: str | os.PathLike[str]) -> Dataset:
    """Read and check a data.yaml: it exists, parses, and both splits hold images with labels beside them."""
    path = Path(yaml_path).expanduser()
    if not path.is_file():
        raise UsageError(f"data.yaml not found: {yaml_path}; pass --data path/to/data.yaml (make one with `speedopt demo-data`)")
    path = path.resolve()
    data = _read_yaml(path)
    missing = [k for k in ("train", "val", "names") if k not in data]
    if missing:
        raise UsageError(f"{path} lacks {', '.join(missing)}; a YOLO data.yaml needs train, val and names")
    names = data["names"]
    if isinstance(names, dict):
        names = [names[k] for k in sorted(names)]
    if not isinstance(names, list) or not names:
        raise UsageError(f"'names' in {path} must be a non-empty list or mapping of class names")
    root = Path(str(data.get("path") or path.parent)).expanduser()
    if not root.is_absolute():
        root = (Path.cwd() / root) if (Path.cwd() / root).is_dir() else (path.parent / root)
    if not root.is_dir():
        raise UsageError(f"dataset root 'path: {data.get('path')}' in {path} does not exist; make it an absolute path")
    train = _split_images(root, data["train"], "train", path)
    val = _split_images(root, data["val"], "val", path)
    if not any(label_path(p).is_file() for p in train[:: max(1, len(train) // 50)] + train[:1]):
        raise UsageError(f"no label files found for the train images (expected {label_path(train[0])}); a detector needs labels")
    return Dataset(yaml_path=path, names=tuple(str(n) for n in names), train_images=train, val_images=val, root=root.resolve())


def estimate_ram_cache_bytes(images: tuple[Path, ...], imgsz: int, sample: int = 30, seed: int = 0) -> int:
    """Estimate the RAM a ``cache=ram`` run needs for these images at imgsz, as the trainers do.

    Sample ``sample`` images, sum ``h*w*3*ratio**2`` with ``ratio = imgsz / max(h, w)`` (images are
    resized so the long side is imgsz before caching), and scale to the whole list. Reads image
    headers only (PIL opens lazily), so it is fast even on large datasets.
    """
    from PIL import Image

    rng = random.Random(seed)
    chosen = rng.sample(list(images), min(sample, len(images)))
    total = 0
    for image in chosen:
        with Image.open(image) as im:
            w, h = im.size
        ratio = imgsz / max(h, w)
        total += int(h * w * 3 * ratio * ratio)
    return int(total * len(images) / max(1, len(chosen)))


@dataclass(frozen=True)
class DatasetFingerprint:
    """What a dataset is, as far as throughput and accuracy care; ``id`` is a short hash of the figures,
    so two copies of one dataset share it (and share quality probes)."""

    train_images: int
    val_images: int
    classes: int
    mean_width: int
    mean_height: int
    train_bytes: int
    id: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetFingerprint:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def fingerprint(ds: Dataset, sample: int = 30, seed: int = 0) -> DatasetFingerprint:
    """Counts, mean image size (from ``sample`` images' headers) and total bytes of every train file."""
    from PIL import Image

    rng = random.Random(seed)
    chosen = rng.sample(list(ds.train_images), min(sample, len(ds.train_images)))
    sizes = []
    for image in chosen:
        with Image.open(image) as im:
            sizes.append(im.size)
    figures = {
        "train_images": len(ds.train_images),
        "val_images": len(ds.val_images),
        "classes": len(ds.names),
        "mean_width": round(sum(w for w, _ in sizes) / len(sizes)),
        "mean_height": round(sum(h for _, h in sizes) / len(sizes)),
        "train_bytes": sum(p.stat().st_size for p in ds.train_images),
    }
    digest = hashlib.sha256(repr(sorted(figures.items())).encode()).hexdigest()[:8]
    return DatasetFingerprint(**figures, id=digest)
