"""A YOLO-format dataset as the trainer will see it: data.yaml checked, images listed, cache sizes estimated.

Everything here reads; nothing writes into the user's dataset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.data._listing import list_images, shown_path
from speedopt.data._root import resolve_root, split_path
from speedopt.data._yamlfile import read_yaml
from speedopt.errors import UsageError


@dataclass(frozen=True)
class Dataset:
    """A checked data.yaml: absolute path of the yaml, its class names and the image files of each split."""

    yaml_path: Path
    names: tuple[str, ...]
    train_images: tuple[Path, ...]
    val_images: tuple[Path, ...]
    root: Path | None = None  # the folder that relative train/val entries are under (``path:``, resolved)
    left_out: tuple[Path, ...] = ()  # images not listed: their path is not UTF-8 (see speedopt.data._listing)

    @property
    def left_out_note(self) -> str:
        """One line naming the images left out of both splits ("" when none), for a command to print."""
        return _left_out_text(self.left_out) if self.left_out else ""

    @property
    def name(self) -> str:
        """A readable dataset name: the folder that holds data.yaml (or the yaml's stem when generic)."""
        stem = self.yaml_path.stem
        return self.yaml_path.parent.name if stem in ("data", "dataset") else stem

    def ram_cache_bytes(self, imgsz: int, images: tuple[Path, ...] | None = None) -> int:
        """RAM a ``cache=ram`` run needs for ``images`` (default: the train split) at ``imgsz``, estimated as
        the trainers cache (see :func:`estimate_ram_cache_bytes`)."""
        return estimate_ram_cache_bytes(self.train_images if images is None else images, imgsz)


def _read_yaml(path: Path) -> dict[str, Any]:
    data = read_yaml(path, "data.yaml")
    if not isinstance(data, dict):
        raise UsageError(f"data.yaml must be a mapping with train, val and names keys: {path}")
    return data


def _no_download(data: dict[str, Any]) -> str:
    """What to add to a "not found" line when the yaml names a download: speedopt never fetches it."""
    if not data.get("download"):
        return ""
    return "; its 'download:' entry is ignored (speedopt never downloads): fetch the dataset first, then run again"


def _left_out_text(left_out: tuple[Path, ...] | list[Path]) -> str:
    first = ", ".join(shown_path(p) for p in left_out[:2]) + (", ..." if len(left_out) > 2 else "")
    return (
        f"left out {len(left_out)} image(s) whose file name is not UTF-8 ({first}): the trainer reads speedopt's list of "
        "images as UTF-8 text, which cannot name them; rename them to UTF-8 names to train on them"
    )


def _split_images(
    root: Path, entry: object, split: str, yaml_path: Path, hint: str = "", left_out: list[Path] | None = None
) -> tuple[Path, ...]:
    """The images of one split entry (folders listed, ``.txt`` lists read), sorted; images whose path is not
    UTF-8 are added to ``left_out``."""
    entries = entry if isinstance(entry, list) else [entry]
    skipped: list[Path] = []
    images: list[Path] = []
    for item in entries:
        if not isinstance(item, str) or not item:
            raise UsageError(f"'{split}' in {yaml_path} must be a folder, a .txt list of images, or a list of them")
        if "\0" in item:
            raise UsageError(f"'{split}' in {yaml_path} contains a NUL byte; fix the file")
        path = split_path(root, item) if isinstance(entry, str) else root / item
        if path.is_dir():
            images += list_images(path, skipped)
        elif path.is_file() and path.suffix == ".txt":
            for line in path.read_text(errors="replace").splitlines():
                line = line.strip()
                if line and "\0" not in line:  # a NUL byte cannot be in a path: not an image entry
                    p = Path(line) if Path(line).is_absolute() else path.parent / line
                    images.append(p)
        else:
            raise UsageError(
                f"{split} images folder does not exist: {path} (from {yaml_path}); fix '{split}' or 'path'{hint}"
            )
    if not images:
        why = f"; {_left_out_text(skipped)}" if skipped else ""
        raise UsageError(
            f"no images in the {split} split ({', '.join(map(str, entries))} under {shown_path(root)}){why}; "
            f"add images or fix '{split}'"
        )
    if left_out is not None:
        left_out += skipped
    return tuple(sorted(images, key=str))  # as the trainers sort them


def label_path(image: Path) -> Path:
    """The label file the YOLO trainers look for: /images/ -> /labels/, suffix -> .txt."""
    parts = list(image.parts)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            break
    return Path(*parts).with_suffix(".txt")


def _names_of(names: dict[Any, Any], path: Path) -> list[Any]:
    """A ``names:`` mapping as the list of its classes. Its keys must be exactly 0 .. N-1: the trainers
    count N classes and index their heads by the label's class, so a gap ({0: a, 2: c}) fails inside them."""
    try:
        keys = sorted(int(k) for k in names if not isinstance(k, bool) and int(k) == float(k))
    except (TypeError, ValueError, OverflowError):
        keys = []
    if len(keys) != len(names):
        raise UsageError(f"'names' in {path} maps class indices 0, 1, ... to names; its keys must be integers")
    if keys != list(range(len(keys))):
        have = set(keys)
        missing = list(itertools.islice((i for i in range(max(keys) + 1) if i not in have), 6))
        shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise UsageError(
            f"'names' in {path} must number its classes 0, 1, 2, ... without gaps: {len(keys)} classes numbered "
            f"{', '.join(map(str, keys[:5]))}{', ...' if len(keys) > 5 else ''}" + (f", missing {shown}" if missing else "")
            + "; renumber the classes (and their labels) from 0, or list the names in order"
        )
    by_key = {int(k): v for k, v in names.items()}
    return [by_key[k] for k in keys]


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
        names = _names_of(names, path)
    if not isinstance(names, list) or not names:
        raise UsageError(f"'names' in {path} must be a non-empty list or mapping of class names")
    if "\0" in str(data.get("path") or ""):
        raise UsageError(f"'path' in {path} contains a NUL byte; fix the file")
    root, looked = resolve_root(data, path)
    hint = _no_download(data)
    if not root.is_dir():
        where = " nor ".join(str(p) for p in looked)
        raise UsageError(
            f"dataset root 'path: {data.get('path')}' in {path} does not exist: not at {where} (a relative path is read "
            f"against the working directory, then Ultralytics' datasets_dir); make 'path' absolute{hint}"
        )
    left_out: list[Path] = []
    train = _split_images(root, data["train"], "train", path, hint, left_out)
    val = _split_images(root, data["val"], "val", path, hint, left_out)
    if not any(label_path(p).is_file() for p in train[:: max(1, len(train) // 50)] + train[:1]):
        raise UsageError(f"no label files found for the train images (expected {label_path(train[0])}); a detector needs labels")
    return Dataset(
        yaml_path=path, names=tuple(str(n) for n in names), train_images=train, val_images=val, root=root.resolve(),
        left_out=tuple(dict.fromkeys(left_out)),
    )


@dataclass(frozen=True)
class SampledSizes:
    """Image sizes (width, height) read from a random sample's headers, and the sampled files that no
    image reader could open (0-byte, truncated before the header, not an image): the trainers skip
    those as corrupt, so speedopt does too, and says how many."""

    sizes: tuple[tuple[int, int], ...]
    unreadable: tuple[Path, ...]
    tried: int


def image_size(image: Path) -> tuple[int, int] | None:
    """An image's (width, height) from its header, or None when it cannot be read as an image."""
    from PIL import Image

    try:
        with Image.open(image) as im:
            w, h = im.size
    except (OSError, SyntaxError, ValueError, ImportError, Image.DecompressionBombError):
        # ImportError: Ultralytics, once imported, patches Image.open to try a HEIF plug-in on a file
        # PIL cannot identify, and that plug-in may not be installed
        return None
    return (int(w), int(h)) if w > 0 and h > 0 else None


def _draws(count: int, sample: int, seed: int, extra: int) -> Iterator[int]:
    """Indices to try: the ``sample`` that ``random.Random(seed).sample`` picks (so a clean dataset is
    sampled, and fingerprinted, as before), then up to ``extra`` further distinct random ones."""
    rng = random.Random(seed)
    first = rng.sample(range(count), min(sample, count))
    yield from first
    seen = set(first)
    for _ in range(min(extra, count - len(seen))):
        index = rng.randrange(count)
        while index in seen:
            index = rng.randrange(count)
        seen.add(index)
        yield index


def sample_sizes(images: tuple[Path, ...], sample: int = 30, seed: int = 0) -> SampledSizes:
    """Header sizes of up to ``sample`` readable images drawn at random. An unreadable one is skipped and
    another drawn (up to ``3 * sample`` more), so a few corrupt files do not shrink the sample; one line
    when none of them is readable."""
    sizes: list[tuple[int, int]] = []
    bad: list[Path] = []
    for index in _draws(len(images), sample, seed, extra=3 * sample):
        if len(sizes) >= sample:
            break
        size = image_size(images[index])
        if size is None:
            bad.append(images[index])
        else:
            sizes.append(size)
    if not sizes and images:
        raise UsageError(
            f"none of the {len(bad)} train images tried can be read (e.g. {bad[0]}: empty, truncated or not an "
            "image); fix or replace the image files"
        )
    return SampledSizes(tuple(sizes), tuple(bad), len(sizes) + len(bad))


def estimate_ram_cache_bytes(images: tuple[Path, ...], imgsz: int, sample: int = 30, seed: int = 0) -> int:
    """Estimate the RAM a ``cache=ram`` run needs for these images at imgsz, as the trainers do.

    Sample ``sample`` readable images, sum ``h*w*3*ratio**2`` with ``ratio = imgsz / max(h, w)``
    (images are resized so the long side is imgsz before caching), and scale to the share of the
    list that is readable (the trainer caches only images it can read). Reads image headers only
    (PIL opens lazily), so it is fast even on large datasets.
    """
    seen = sample_sizes(images, sample, seed)
    total = 0
    for w, h in seen.sizes:
        ratio = imgsz / max(h, w)
        total += int(h * w * 3 * ratio * ratio)
    return int(total * len(images) / max(1, seen.tried))


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
    unreadable: int = 0  # train images found unreadable (every empty file, and those in the sample)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetFingerprint:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def fingerprint(ds: Dataset, sample: int = 30, seed: int = 0) -> DatasetFingerprint:
    """Counts, mean image size (from ``sample`` readable images' headers) and total bytes of every train
    file; ``unreadable`` counts the empty train files and the sampled ones that are not images (the
    trainer skips both), and is left out of ``id`` (it describes damage, not the dataset)."""
    seen = sample_sizes(ds.train_images, sample, seed)
    sizes = [p.stat().st_size for p in ds.train_images]
    empty = {p for p, size in zip(ds.train_images, sizes) if size == 0}
    figures = {
        "train_images": len(ds.train_images),
        "val_images": len(ds.val_images),
        "classes": len(ds.names),
        "mean_width": round(sum(w for w, _ in seen.sizes) / len(seen.sizes)),
        "mean_height": round(sum(h for _, h in seen.sizes) / len(seen.sizes)),
        "train_bytes": sum(sizes),
    }
    digest = hashlib.sha256(repr(sorted(figures.items())).encode()).hexdigest()[:8]
    return DatasetFingerprint(**figures, id=digest, unreadable=len(empty | set(seen.unreadable)))
