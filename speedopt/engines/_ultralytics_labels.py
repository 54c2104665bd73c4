"""The Ultralytics engine's dataset patches: the split listing and the label cache (see
:mod:`speedopt.engines.ultralytics`' docstring), applied inside a job process only."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from speedopt.data import list_images
from speedopt.engines._base import SplitLabels
from speedopt.engines._common import built_cache, built_split, subset_entries


def _is_subset(dataset: Any) -> bool:
    """Whether the trainer built this dataset on part of its split (``fraction`` below all of it)."""
    return getattr(dataset, "fraction", 1.0) != 1.0


def patch_labels(workdir: Path, known: tuple[SplitLabels, ...], scans: list[float]) -> None:
    """The listing and label-cache patches of the dataset class (see the module docstring); ``scans`` gets
    each scan's seconds. Applied once per job process: the originals are kept on the class."""
    from ultralytics.data.dataset import YOLODataset

    originals = YOLODataset.__dict__.get("_speedopt_originals")
    if originals is None:
        originals = (YOLODataset.cache_labels, getattr(YOLODataset, "_load_or_scan_cache", None), YOLODataset.get_img_files)
        YOLODataset._speedopt_originals = originals
    scan, load_or_scan, get_img_files = originals

    def listed(self: Any, img_path: str | list[str]) -> list[str]:
        entries = [_listing(p, workdir) for p in (img_path if isinstance(img_path, list) else [img_path])]
        given = entries if isinstance(img_path, list) else entries[0]
        kept = _kept(built_split(known, "train")) if isinstance(self.fraction, int) and not isinstance(self.fraction, bool) else None
        if kept is None:
            files: list[str] = get_img_files(self, given)
            return files
        count, self.fraction = self.fraction, 1.0  # the whole listing, then the first ``count`` its label check keeps
        try:
            everything: list[str] = get_img_files(self, given)
        finally:
            self.fraction = count
        return [f for f in everything if f in kept][:count] or everything[:count]

    YOLODataset.get_img_files = listed

    def cache_labels(self: Any, path: Path = Path("./labels.cache")) -> Any:
        if _is_subset(self):  # never the user's full cache: a subset's goes in the job's folder
            path = workdir / f"{Path(path).stem}-subset.cache"
        started = time.perf_counter()
        try:
            return scan(self, path)
        finally:
            scans.append(time.perf_counter() - started)

    YOLODataset.cache_labels = cache_labels
    if load_or_scan is None:  # an Ultralytics without the hook: subsets scan (in the private folder)
        return

    def from_full_cache(self: Any, cache_path: Path, cache_hash: str) -> tuple[dict[str, Any], bool]:
        full = built_cache(known, cache_path) if _is_subset(self) else None
        if full is not None:
            cache = _subset_cache(full, list(self.im_files), cache_hash)
            if cache is not None:
                return cache, True
        own: tuple[dict[str, Any], bool] = load_or_scan(self, cache_path, cache_hash)
        return own

    YOLODataset._load_or_scan_cache = from_full_cache


def _kept(full: SplitLabels | None) -> set[str] | None:
    """The train images the trainer's label check keeps, from the full split's cache the study built (its labels job):
    a trial's subset (``fraction=<count>``) is drawn from them, never from images the check drops. None when there is
    no such cache, or the file is no longer the one built."""
    cache = None if full is None else _built(full)
    return None if cache is None else {str(label["im_file"]) for label in cache.get("labels") or ()}


def _built(full: SplitLabels) -> dict[str, Any] | None:
    """The full split's cache file, read with the trainer's own loader, while it is still the one the study built
    (same trainer cache version, same stored hash); None otherwise."""
    from ultralytics.data.dataset import DATASET_CACHE_VERSION
    from ultralytics.data.utils import load_dataset_cache_file

    try:
        cache: dict[str, Any] = load_dataset_cache_file(Path(full.cache))
    except Exception:  # missing, truncated, not a cache
        return None
    if cache.get("version") != DATASET_CACHE_VERSION or str(cache.get("version")) != full.version or cache.get("hash") != full.hash:
        return None
    return cache


def _listing(entry: str, workdir: Path) -> str:
    """A split entry as the trainer should read it: a folder becomes a list file of speedopt's listing of it
    (:func:`speedopt.data.list_images`, which follows no link back into the tree) in the job's folder; the
    trainer then filters, sorts and takes its fraction of it as of its own listing. Anything else as given."""
    if not Path(entry).is_dir():
        return entry
    images = list_images(entry)
    target = workdir / f"listing-{hashlib.sha256(str(entry).encode()).hexdigest()[:12]}.txt"
    target.write_text("".join(f"{image}\n" for image in images if "\n" not in str(image)), encoding="utf-8")  # as it reads
    return str(target)


def _subset_cache(full: SplitLabels, im_files: list[str], cache_hash: str) -> dict[str, Any] | None:
    """The subset's label cache taken from the full split's (see :func:`patch_labels`), in the form
    ``get_labels`` reads; None when the file is not the one the study built or lacks a subset image."""
    cache = _built(full)
    if cache is None:
        return None
    subset = subset_entries({lb["im_file"]: lb for lb in cache["labels"]}, im_files, cache.get("msgs") or ())
    if subset is None:
        return None
    picked, corrupt = subset
    labels = [label for _, label in picked]
    found = sum(len(label["cls"]) > 0 for label in labels)
    results = (found, 0, len(labels) - found, corrupt, len(im_files))  # found, missing, empty, corrupt, total
    return {"labels": labels, "hash": cache_hash, "version": cache["version"], "msgs": [], "results": results}
