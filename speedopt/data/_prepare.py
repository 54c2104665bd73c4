"""A pre-resized copy of a YOLO dataset: every image resized once to the training size.

Why: a trainer decodes every image at full size each epoch only to shrink it to ``imgsz``; on large
camera images that decode is most of the dataloader's CPU. Practitioners resize once (long side =
imgsz, aspect kept, never upscaled) and train on the copy; JPEG quality 100 is their compromise,
a lossless PNG (``png``) or PNG plus a decoded ``.npy`` array (``npy``) the alternatives.

How the pixels are made: ``cv2.imread`` (IMREAD_COLOR, which applies EXIF orientation, as the trainers
read), then the very resize the Ultralytics trainer applies in ``BaseDataset.load_image``: long side
to imgsz, sizes ``min(ceil(side * r), imgsz)``, ``cv2.INTER_LINEAR``. A trainer that loads the copy at
that imgsz finds ``r == 1`` and does not resize again, so a lossless copy (png, npy) holds exactly the
pixels it would have computed from the original, and a JPEG copy differs only by the re-encoding.
An image already at or below imgsz is re-encoded at its own size (the trainer upscales both alike).

Layout: each image keeps its path relative to the dataset root under the copy (an image outside the
root goes under ``external/<8 hex of its folder>/``), with the format's suffix; its label file is copied
byte for byte to where the trainers look for it (``/images/`` -> ``/labels/``). The copy's data.yaml
keeps the source's keys with ``path`` = the copy.

Atomic and resumable: every file is written to a temporary name in its folder and renamed, stamped
with its source's mtime (so a rerun reuses an output whose source is unchanged and redoes the rest);
``.speedopt-preparing`` marks a copy in progress and :data:`MANIFEST` is written last, once every
output has been decoded and checked. The source dataset is never written to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from speedopt.data._dataset import Dataset, _size, label_path
from speedopt.data._root import caller_cwd, split_path
from speedopt.data._yamlfile import read_yaml
from speedopt.errors import UsageError
from speedopt.knobs import MAX_IMGSZ, STRIDE
from speedopt.version import __version__

FORMATS = ("jpg", "png", "npy")
MANIFEST = "speedopt-prepared.json"  # written into the copy's root LAST, when the copy is complete and verified
MARKER = ".speedopt-preparing"  # written FIRST: the folder is a copy in progress (and ours to rewrite)
YAML = "data.yaml"
LISTS = {"train": "speedopt-train.txt", "val": "speedopt-val.txt"}  # image lists for splits that were not one folder
_SUFFIX = {"jpg": ".jpg", "png": ".png", "npy": ".png"}
_OURS = frozenset({".jpg", ".png", ".npy", ".txt"})  # what a clean-up may remove from the copy
_TEMP = re.compile(r"^\..+\.tmp-\d+$")
_SAVE_EVERY_S = 2.0  # how often an unfinished run records its elapsed time in the marker

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class PrepareSpec:
    """What copy to make: long side ``imgsz`` (a multiple of the stride), file format, JPEG quality."""

    imgsz: int  # long side; a positive multiple of 32 (speedopt.knobs.STRIDE), at most speedopt.knobs.MAX_IMGSZ
    format: str = "jpg"
    quality: int = 100  # JPEG quality 1..100 (ignored for png/npy: check_spec sets it to 100 there)

    @property
    def tag(self) -> str:
        """The copy's folder name: ``640-jpgq100``, ``640-png``, ``640-npy``."""
        return f"{self.imgsz}-{self.format}" + (f"q{self.quality}" if self.format == "jpg" else "")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrepareSpec:
        return cls(imgsz=int(data["imgsz"]), format=str(data["format"]), quality=int(data["quality"]))


@dataclass(frozen=True)
class PreparedCopy:
    """A complete, verified copy as its manifest records it."""

    yaml_path: Path  # the copy's data.yaml (absolute 'path:', train/val relative to it, no 'download:')
    root: Path
    spec: PrepareSpec
    source_yaml: Path
    source_id: str  # fingerprint of the source files when the copy was made (see source_id)
    images: int  # train + val images in the copy
    train_images: int
    bytes: int  # file bytes of the copy's image files (and .npy files)
    source_bytes: int  # file bytes of the source image files
    seconds: float  # wall seconds the runs that made it spent (resumed or updating runs: summed; a rerun that writes nothing adds none)
    jobs: int  # worker processes of the run that completed it
    corrupt: tuple[str, ...] = ()  # source images skipped as unreadable

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's JSON content (paths as strings, plus the speedopt version)."""
        return {
            "speedopt": __version__,
            "spec": self.spec.to_dict(),
            "yaml_path": str(self.yaml_path),
            "source_yaml": str(self.source_yaml),
            "source_id": self.source_id,
            "images": self.images,
            "train_images": self.train_images,
            "bytes": self.bytes,
            "source_bytes": self.source_bytes,
            "seconds": self.seconds,
            "jobs": self.jobs,
            "corrupt": list(self.corrupt),
        }

    @classmethod
    def from_manifest(cls, data: dict[str, Any], root: Path) -> PreparedCopy:
        """Read a manifest (KeyError, TypeError or ValueError when it is not one of ours)."""
        return cls(
            yaml_path=root / YAML,
            root=root,
            spec=PrepareSpec.from_dict(data["spec"]),
            source_yaml=Path(data["source_yaml"]),
            source_id=str(data["source_id"]),
            images=int(data["images"]),
            train_images=int(data["train_images"]),
            bytes=int(data["bytes"]),
            source_bytes=int(data["source_bytes"]),
            seconds=float(data["seconds"]),
            jobs=int(data["jobs"]),
            corrupt=tuple(str(c) for c in data.get("corrupt", ())),
        )


@dataclass(frozen=True)
class PrepareReport:
    """What one prepare run did."""

    copy: PreparedCopy
    written: int  # images written by this run
    reused: int  # images a previous (interrupted) run had already written and that are still current
    seconds: float  # this run's wall time
    images_per_s: float  # written / seconds of the resize phase
    jobs: int


# ---------------------------------------------------------------------------------------------- checks


def check_spec(spec: PrepareSpec) -> PrepareSpec:
    """The spec checked (one line per problem), with ``quality`` set to 100 for the lossless formats, which
    ignore it: two specs that make the same copy compare equal."""
    if spec.format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {spec.format!r}")
    if isinstance(spec.imgsz, bool) or not isinstance(spec.imgsz, int) or spec.imgsz <= 0 or spec.imgsz % STRIDE:
        raise UsageError(f"--imgsz must be a positive multiple of {STRIDE} (the YOLOv5 stride), got {spec.imgsz!r}; e.g. 640")
    if spec.imgsz > MAX_IMGSZ:
        raise UsageError(f"--imgsz must be at most {MAX_IMGSZ}, got {spec.imgsz}; give a smaller image size")
    if isinstance(spec.quality, bool) or not isinstance(spec.quality, int) or not 1 <= spec.quality <= 100:
        raise UsageError(f"--quality must be a JPEG quality from 1 to 100, got {spec.quality!r}; 100 is the usual choice")
    return spec if spec.format == "jpg" else dataclasses.replace(spec, quality=100)


def _check_jobs(jobs: int | None) -> int:
    """Worker processes: the given number, or one per CPU core."""
    if jobs is None:
        return os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs!r}")
    return jobs


def _hex8(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def default_out(ds: Dataset, spec: PrepareSpec) -> Path:
    """``<cwd>/prepared/<dataset>-<8 hex of the yaml's path>/<imgsz>-<format>[q<quality>]``: one folder per
    dataset and spec, found again by a search run from the same folder (the user's working directory,
    even inside a trial's process)."""
    spec = check_spec(spec)
    source = ds.yaml_path.resolve()
    return caller_cwd() / "prepared" / f"{ds.name}-{_hex8(str(source))}" / spec.tag


def _out_path(ds: Dataset, spec: PrepareSpec, out: Path | None) -> Path:
    """The copy's folder, absolute: ``out`` (relative to the user's working directory) or the default."""
    if out is None:
        return default_out(ds, spec).resolve()
    out = Path(out).expanduser()
    return (out if out.is_absolute() else caller_cwd() / out).resolve()


# ----------------------------------------------------------------------------------------- the source


@dataclass(frozen=True)
class _Stat:
    size: int
    mtime_ns: int


def _stat(path: Path) -> _Stat | None:
    """Size and mtime of a regular file, or None when there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _Stat(st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


@dataclass(frozen=True)
class _Source:
    """One source image, its label file and their stats (None: missing; a missing label is a background image)."""

    image: Path
    image_stat: _Stat | None
    label: Path
    label_stat: _Stat | None


def _root(ds: Dataset) -> Path:
    return ds.root or ds.yaml_path.parent


def _relative(path: Path, root: Path) -> Path | None:
    """``path`` relative to ``root`` (its ``..`` folded, then its resolved form), or None when it is outside:
    a relative path never climbs out, so its mirror stays inside the copy."""
    rel = _under(Path(os.path.normpath(path)), root)
    if rel is None:
        with contextlib.suppress(OSError):
            rel = _under(path.resolve(), root)
    return rel


def _under(path: Path, root: Path) -> Path | None:
    """``path`` relative to ``root`` lexically, None when outside."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    return rel if ".." not in rel.parts else None


def _sources(ds: Dataset) -> dict[Path, _Source]:
    """Every distinct train/val image (train first, in order) with its label file, stat'ed once."""
    found: dict[Path, _Source] = {}
    for image in ds.train_images + ds.val_images:
        if image not in found:
            label = label_path(image)
            found[image] = _Source(image, _stat(image), label, _stat(label))
    return found


def _fingerprint(ds: Dataset, found: dict[Path, _Source]) -> str:
    """sha256 (16 hex) over each train and val image and its label: relative path, size, mtime_ns."""
    root = _root(ds)
    digest = hashlib.sha256()

    def key(s: _Stat | None) -> str:
        return "-" if s is None else f"{s.size}:{s.mtime_ns}"

    for image in ds.train_images + ds.val_images:
        source = found[image]
        rel = _relative(image, root)
        name = rel.as_posix() if rel is not None else str(image)
        digest.update(f"{name}\0{key(source.image_stat)}\0{key(source.label_stat)}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def source_id(ds: Dataset) -> str:
    """A fingerprint of the source files (sha256, 16 hex, over every train/val image and its label file:
    relative path, size, mtime_ns): it changes when any image or label is added, removed or rewritten."""
    return _fingerprint(ds, _sources(ds))


def _split_folders(ds: Dataset) -> dict[str, Path]:
    """For each of train/val given as one folder (under the root): that folder relative to the root."""
    data = read_yaml(ds.yaml_path, "data.yaml")
    root = _root(ds)
    folders: dict[str, Path] = {}
    for split in ("train", "val"):
        entry = data.get(split) if isinstance(data, dict) else None
        if isinstance(entry, str) and entry:
            path = split_path(root, entry)
            rel = _relative(path, root) if path.is_dir() else None
            if rel is not None:
                folders[split] = rel
    return folders


# ------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class _Item:
    """One source image and where its copy goes: what a worker process needs (paths as strings: small)."""

    index: int
    source: str
    output: str
    npy: str | None  # the .npy beside the output (format npy)
    label_src: str | None  # None: a background image without a label file
    label_dst: str
    mtime_ns: int  # the source's, stamped on its outputs (-1: the source is missing)
    label_mtime_ns: int
    label_size: int
    spec: PrepareSpec


@dataclass(frozen=True)
class _Plan:
    """Every output of the copy, and the source's figures the manifest records."""

    items: tuple[_Item, ...]
    train: tuple[int, ...]  # item index of each train image, in the source's order
    val: tuple[int, ...]
    folders: dict[str, Path]
    source_id: str
    source_bytes: int


def _mirror(image: Path, root: Path, out: Path, suffix: str) -> Path:
    """Where an image's copy goes: its path under the root, mirrored under ``out``, with the format's suffix."""
    rel = _relative(image, root)
    if rel is None:
        rel = Path("external", _hex8(str(image.parent)), image.name)
    return (out / rel).with_suffix(suffix)


def _output_names(images: Iterable[Path], root: Path, out: Path, suffix: str) -> dict[Path, Path]:
    """Each image's output; images that would share one (a.jpg and a.png) keep their suffix in the stem."""
    names = {image: _mirror(image, root, out, suffix) for image in images}
    groups: dict[Path, list[Path]] = {}
    for image, output in names.items():
        groups.setdefault(output, []).append(image)
    for output, clash in groups.items():
        if len(clash) > 1:
            for image in clash:
                names[image] = output.with_name(f"{image.stem}_{image.suffix[1:].lower()}{suffix}")
    seen: dict[Path, Path] = {}
    for image, output in names.items():
        if output in seen:
            raise UsageError(f"{seen[output]} and {image} would both be copied to {output}; rename one of them")
        seen[output] = image
    return names


def _plan(ds: Dataset, spec: PrepareSpec, out: Path) -> _Plan:
    """Stat the source and decide every output path (refusing a layout that would write outside ``out``)."""
    found = _sources(ds)
    root = _root(ds)
    names = _output_names(found, root, out, _SUFFIX[spec.format])
    items: list[_Item] = []
    index: dict[Path, int] = {}
    for image, source in found.items():
        output = names[image]
        label_dst = label_path(output)
        if out not in label_dst.parents:
            raise UsageError(
                f"the label of {image} would be copied to {label_dst}, outside {out} (trainers look for labels by "
                "turning the last /images/ folder into /labels/); choose an --out without an 'images' folder in its path"
            )
        index[image] = len(items)
        items.append(
            _Item(
                index=len(items),
                source=str(image),
                output=str(output),
                npy=str(output.with_suffix(".npy")) if spec.format == "npy" else None,
                label_src=str(source.label) if source.label_stat else None,
                label_dst=str(label_dst),
                mtime_ns=source.image_stat.mtime_ns if source.image_stat else -1,
                label_mtime_ns=source.label_stat.mtime_ns if source.label_stat else -1,
                label_size=source.label_stat.size if source.label_stat else -1,
                spec=spec,
            )
        )
    return _Plan(
        items=tuple(items),
        train=tuple(index[p] for p in ds.train_images),
        val=tuple(index[p] for p in ds.val_images),
        folders=_split_folders(ds),
        source_id=_fingerprint(ds, found),
        source_bytes=sum(s.image_stat.size for s in found.values() if s.image_stat),
    )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _check_out(ds: Dataset, out: Path) -> None:
    """Refuse an ``out`` where the copy would overwrite, or join, the source, or a folder that is not ours."""
    root = _root(ds).resolve()
    if out == root:
        raise UsageError(f"--out {out} is the dataset's own folder; the copy would overwrite its images: choose another --out")
    folder = str(out)
    for image in ds.train_images + ds.val_images:
        if _inside(os.path.normpath(image), folder):
            raise UsageError(f"--out {out} holds the dataset's own files (e.g. {image}); choose another --out")
    if _inside(str(ds.yaml_path), folder):
        raise UsageError(f"--out {out} holds the dataset's {ds.yaml_path}; choose another --out")
    for split, rel in _split_folders(ds).items():
        source = (root / rel).resolve()
        if _inside(folder, str(source)):
            raise UsageError(
                f"--out {out} is inside the {split} folder {source}: the copy would join the source's {split} images; "
                "choose an --out outside it"
            )
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder; choose another --out")
    if out.is_dir() and not (out / MANIFEST).is_file() and not (out / MARKER).is_file() and any(out.iterdir()):
        raise UsageError(f"--out {out} is not empty and not a speedopt prepared copy; choose another --out")


# ------------------------------------------------------------------------------------ files, atomically


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _atomic(path: Path, write: Callable[[IO[bytes]], object], mtime_ns: int | None = None) -> None:
    """Write ``path`` through a temporary file in its folder and rename it: a reader (or a killed run) only
    ever sees the whole file under its final name. ``mtime_ns`` stamps it before the rename."""
    temp = _temp_name(path)
    try:
        with open(temp, "wb") as handle:
            write(handle)
        if mtime_ns is not None and mtime_ns >= 0:
            os.utime(temp, ns=(time.time_ns(), mtime_ns))
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def _write_text(path: Path, text: str) -> None:
    data = text.encode("utf-8", "surrogateescape")
    _atomic(path, lambda handle: handle.write(data))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    _write_text(path, json.dumps(data, indent=2))


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when missing or not readable as one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _copy_label(item: _Item) -> None:
    """Copy the item's label file byte for byte, stamped with the source's mtime (a vanished one: removed)."""
    if item.label_src is None:
        return
    try:
        content = Path(item.label_src).read_bytes()
    except FileNotFoundError:
        Path(item.label_dst).unlink(missing_ok=True)
        return
    Path(item.label_dst).parent.mkdir(parents=True, exist_ok=True)
    _atomic(Path(item.label_dst), lambda handle: handle.write(content), item.label_mtime_ns)


def _label_current(item: _Item) -> bool:
    if item.label_src is None:
        return True
    have = _stat(Path(item.label_dst))
    return have is not None and have == _Stat(item.label_size, item.label_mtime_ns)


def _image_current(item: _Item) -> bool:
    """The output (and its .npy) exist and carry the source's mtime: a previous run wrote them from this source."""
    if item.mtime_ns < 0:
        return False
    for path in (item.output, item.npy):
        if path is not None:
            have = _stat(Path(path))
            if have is None or have.mtime_ns != item.mtime_ns:
                return False
    return True


def _remove_outputs(item: _Item) -> None:
    for path in (item.output, item.npy, item.label_dst):
        if path is not None:
            Path(path).unlink(missing_ok=True)


# -------------------------------------------------------------------------------- the worker processes


def _fit(image: Any, imgsz: int) -> Any:
    """Resize so the long side is imgsz, as Ultralytics' ``load_image`` does; never upscale."""
    import cv2

    h0, w0 = image.shape[:2]
    r = imgsz / max(h0, w0)
    if r >= 1:
        return image
    size = (min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz))
    return cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)


def _encoded(image: Any, spec: PrepareSpec) -> bytes:
    """The image encoded in the copy's format: JPEG at ``quality``, or lossless PNG."""
    import cv2

    if spec.format == "jpg":
        ok, buffer = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, spec.quality])
    else:
        ok, buffer = cv2.imencode(".png", image)
    if not ok:
        raise OSError(f"OpenCV could not encode a {image.shape[1]}x{image.shape[0]} image as {spec.format}")
    return bytes(buffer)


def _resize_one(item: _Item) -> tuple[int, bool]:
    """Read, resize and write one image (and its .npy and label); ``(index, False)`` when the source is corrupt."""
    import cv2
    import numpy as np

    image = cv2.imread(item.source, cv2.IMREAD_COLOR)
    if image is None or image.size == 0:
        return item.index, False
    image = _fit(image, item.spec.imgsz)
    output = Path(item.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    data = _encoded(image, item.spec)
    _atomic(output, lambda handle: handle.write(data), item.mtime_ns)
    if item.npy is not None:
        _atomic(Path(item.npy), lambda handle: np.save(handle, np.ascontiguousarray(image), allow_pickle=False), item.mtime_ns)
    _copy_label(item)
    return item.index, True


def _source_long_side(source: str) -> int | None:
    """The source's long side from its header (orientation does not change it), else from a full decode."""
    size = _size(Path(source))
    if size is not None:
        return max(size)
    import cv2

    image = cv2.imread(source, cv2.IMREAD_COLOR)
    return None if image is None else int(max(image.shape[:2]))


def _check_one(item: _Item) -> tuple[int, str | None]:
    """Decode one output in full and check it: ``(index, problem)``, problem None when it is right."""
    import cv2
    import numpy as np

    if not Path(item.output).is_file():
        return item.index, "is missing"
    image = cv2.imread(item.output, cv2.IMREAD_COLOR)
    if image is None:
        return item.index, "does not decode"
    long_side = _source_long_side(item.source)
    if long_side is None:
        return item.index, f"its source {item.source} no longer reads as an image"
    want, got = min(item.spec.imgsz, long_side), int(max(image.shape[:2]))
    if got != want:
        return item.index, f"has long side {got}, expected {want}"
    if item.npy is not None:
        try:
            array = np.load(item.npy, allow_pickle=False)
        except (OSError, ValueError):
            return item.index, f"has no readable {Path(item.npy).name} beside it"
        if array.dtype != np.uint8 or array.shape != image.shape or not np.array_equal(array, image):
            return item.index, f"differs from the array in {Path(item.npy).name}"
    if item.label_src is not None and _stat(Path(item.label_dst)) != _Stat(item.label_size, item.label_mtime_ns):
        return item.index, f"has no current label copy at {item.label_dst}"
    return item.index, None


def _init_worker() -> None:
    """A worker ignores Ctrl-C (the parent stops it) and runs OpenCV on one thread (the pool is the parallelism)."""
    import signal

    import cv2

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cv2.setNumThreads(1)


def _apply(fn: Callable[[_T], _R], chunk: Sequence[_T]) -> list[_R]:
    """``fn`` over one chunk of items, in a worker process."""
    return [fn(item) for item in chunk]


class _Workers:
    """Up to ``jobs`` worker processes, started on first use (none for one job) and always stopped on the way
    out. Spawned, not forked: a fork of a process whose OpenCV thread pool has run hangs in the child's first
    resize. A pool, unlike ``multiprocessing.Pool``, fails (instead of hanging) when a worker dies."""

    def __init__(self, jobs: int, most: int):
        self.size = max(1, min(jobs, most))
        self.pool: Any = None

    def map(self, fn: Callable[[_T], _R], items: Sequence[_T]) -> Iterator[_R]:
        """``fn`` over ``items``, results as they finish."""
        if self.size == 1 or len(items) <= 1:
            yield from map(fn, items)
            return
        import functools
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.size, mp_context=context, initializer=_init_worker)
        chunk = max(1, min(16, len(items) // (self.size * 4)))
        work = functools.partial(_apply, fn)
        futures = [self.pool.submit(work, items[i : i + chunk]) for i in range(0, len(items), chunk)]
        try:
            for future in as_completed(futures):
                yield from future.result()
        except BrokenProcessPool:
            raise UsageError(
                "a worker process of speedopt prepare died (out of memory, or an image that crashes the decoder?); "
                "run again with fewer --jobs (from Python: call it under `if __name__ == '__main__':`, or jobs=1)"
            ) from None

    def close(self, abort: bool) -> None:
        """Stop the workers: let them finish (the work is done) or, on an error or Ctrl-C, terminate them."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values()) if abort else []  # no public handle before 3.14
        pool.shutdown(wait=not abort, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=10)


@contextlib.contextmanager
def _workers(jobs: int, most: int) -> Iterator[_Workers]:
    workers = _Workers(jobs, most)
    try:
        yield workers
    except BaseException:
        workers.close(abort=True)
        raise
    workers.close(abort=False)


# ------------------------------------------------------------------------------------------ the folder


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on the copy's folder: two prepares of one copy would delete each other's files."""
    import fcntl

    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another speedopt prepare is writing {out}; wait for it to finish, or choose another --out") from None
        yield
    finally:
        os.close(fd)


def _state(ds: Dataset, spec: PrepareSpec, seconds: float) -> dict[str, Any]:
    return {"speedopt": __version__, "spec": spec.to_dict(), "source_yaml": str(ds.yaml_path), "seconds": seconds}


def _spec_of(state: dict[str, Any] | None) -> PrepareSpec | None:
    try:
        return PrepareSpec.from_dict(state["spec"]) if state else None
    except (KeyError, TypeError, ValueError):
        return None


def _wipe(out: Path) -> None:
    """Remove everything in the copy but the marker (a copy at another spec is redone from scratch)."""
    for folder, dirs, files in os.walk(out, topdown=False):
        for name in files:
            if not (folder == str(out) and name == MARKER):
                os.unlink(os.path.join(folder, name))
        for name in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(folder, name))


@dataclass(frozen=True)
class _Prior:
    """What earlier runs left of this copy: the seconds they spent making it, and the jobs of the run that
    completed it (None unless the copy was complete: a rerun that writes nothing keeps both)."""

    seconds: float = 0.0
    jobs: int | None = None


def _number(value: object) -> float:
    try:
        return max(0.0, float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _begin(ds: Dataset, spec: PrepareSpec, out: Path) -> _Prior:
    """Mark ``out`` as a copy in progress and take it over (manifest and data.yaml removed until it is
    complete again). A copy at another (or an unreadable) spec is wiped first, the marker keeping the folder
    ours meanwhile; a copy of another dataset is refused."""
    has_marker, has_manifest = (out / MARKER).is_file(), (out / MANIFEST).is_file()
    prior = _Prior()
    if has_marker or has_manifest:
        state = _read_json(out / (MARKER if has_marker else MANIFEST)) or {}
        source = str(state.get("source_yaml") or "")
        if source and source != str(ds.yaml_path):
            raise UsageError(f"--out {out} holds a prepared copy of another dataset ({source}); choose another --out, or delete it")
        if _spec_of(state) != spec:
            if not has_marker:
                _write_json(out / MARKER, {**state, "seconds": 0.0})
            _wipe(out)
        elif has_marker:
            prior = _Prior(_number(state.get("seconds")))
        else:
            prior = _Prior(_number(state.get("seconds")), int(_number(state.get("jobs"))) or None)
    _write_json(out / MARKER, _state(ds, spec, prior.seconds))
    (out / MANIFEST).unlink(missing_ok=True)
    (out / YAML).unlink(missing_ok=True)
    return prior


def _clean(out: Path, plan: _Plan) -> None:
    """Remove temporary files of killed runs and outputs no source maps to any more (gone, renamed, other
    format), then empty folders. Only image, array and text files are touched: a trainer's caches stay."""
    lists = {name for split, name in LISTS.items() if split not in plan.folders}
    keep: dict[str, set[str]] = {str(out): {MARKER, MANIFEST, YAML, *lists}}
    for item in plan.items:
        for path in (item.output, item.npy, item.label_dst if item.label_src else None):
            if path is not None:
                folder, name = os.path.split(path)
                keep.setdefault(folder, set()).add(name)
    for folder, dirs, files in os.walk(out, topdown=False):
        wanted = keep.get(folder, set())
        for name in files:
            if name not in wanted and (_TEMP.match(name) or os.path.splitext(name)[1].lower() in _OURS):
                os.unlink(os.path.join(folder, name))
        for name in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(folder, name))  # only succeeds when empty


def _write_yaml(ds: Dataset, out: Path, plan: _Plan, corrupt: set[int]) -> Path:
    """The copy's data.yaml: the source's keys, ``path`` = the copy, train/val in it, no ``download:``."""
    import yaml

    data = read_yaml(ds.yaml_path, "data.yaml")
    copy = {k: v for k, v in data.items() if k != "download"}
    copy["path"] = str(out)
    for split, indices in (("train", plan.train), ("val", plan.val)):
        folder = plan.folders.get(split)
        if folder is not None:
            copy[split] = folder.as_posix()
        else:
            lines = "".join(f"{plan.items[i].output}\n" for i in indices if i not in corrupt)
            _write_text(out / LISTS[split], lines)
            copy[split] = LISTS[split]
    root = _root(ds)
    for split in ("test", "minival"):  # not copied: point at the source's, absolute
        entry = data.get(split)
        if isinstance(entry, str) and entry:
            copy[split] = str(split_path(root, entry).resolve())
        elif isinstance(entry, list):
            copy[split] = [str((root / str(e)).resolve()) for e in entry]
    _write_text(out / YAML, yaml.safe_dump(copy, sort_keys=False, allow_unicode=True))
    return out / YAML


# -------------------------------------------------------------------------------------------- prepare


class _Clock:
    """Elapsed time of this run, saved in the marker every few seconds (a killed run's time still counts)."""

    def __init__(self, ds: Dataset, spec: PrepareSpec, out: Path, prior: _Prior, started: float):
        self.ds, self.spec, self.out, self.prior = ds, spec, out, prior
        self.carried = prior.seconds
        self.started = started  # when this run began (its checks and the stat pass count too)
        self.saved = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.saved >= _SAVE_EVERY_S:
            self.saved = now
            _write_json(self.out / MARKER, _state(self.ds, self.spec, self.carried + self.elapsed()))


def _resize(
    workers: _Workers, todo: list[_Item], clock: _Clock, progress: Callable[[int, int], None] | None
) -> set[int]:
    """Resize every item in ``todo``; returns the indices of the corrupt sources (their old outputs removed)."""
    corrupt: set[int] = set()
    if progress:
        progress(0, len(todo))
    for done, (index, ok) in enumerate(workers.map(_resize_one, todo), 1):
        if not ok:
            corrupt.add(index)
        if progress:
            progress(done, len(todo))
        clock.tick()
    return corrupt


def _verify(
    workers: _Workers, plan: _Plan, corrupt: set[int], progress: Callable[[int, int], None] | None
) -> None:
    """Decode every output in full and check its size (and .npy, and label): UsageError on the first bad one,
    which is removed so that a rerun redoes it."""
    items = [item for item in plan.items if item.index not in corrupt]
    problems: dict[int, str] = {}
    for done, (index, problem) in enumerate(workers.map(_check_one, items), 1):
        if problem is not None:
            problems[index] = problem
        if progress:
            progress(done, len(items))
    if problems:
        first = plan.items[min(problems)]
        _remove_outputs(first)
        raise UsageError(
            f"prepared copy failed verification: {first.output} {problems[min(problems)]} ({len(problems)} bad file(s)); "
            "it was removed, run the same command again to redo it"
        )


def _bytes(items: Iterable[_Item]) -> int:
    total = 0
    for item in items:
        for path in (item.output, item.npy):
            if path is not None:
                total += os.stat(path).st_size
    return total


def prepare(
    ds: Dataset,
    spec: PrepareSpec,
    out: Path | None = None,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    verify_progress: Callable[[int, int], None] | None = None,
) -> PrepareReport:
    """Make, finish or update the resized copy of ``ds`` at ``out`` (default :func:`default_out`).

    Formats: ``jpg`` (JPEG at ``spec.quality``), ``png`` (lossless), ``npy`` (lossless PNG plus a ``.npy``
    beside it with the decoded BGR uint8 array, same stem and mtime: both trainers read that array in place
    of the image whenever it exists, Ultralytics ``BaseDataset.load_image`` when it is not older than the
    image, classic yolov5 ``LoadImagesAndLabels.load_image`` always; no decode at all, many times the disk).

    ``jobs`` worker processes (default: one per CPU core) resize; ``progress(done, total)`` is called in
    this process as images are written (``total``: the images this run writes, not those it reuses), and
    ``verify_progress(done, total)`` as the copy is decoded and checked. Outputs a previous run wrote
    from an unchanged source are reused; outputs whose source is gone are removed. Corrupt sources are
    skipped and listed. The manifest is written last, once every output has decoded at the right size.
    With more than one job the workers are spawned processes: a script that calls this needs the usual
    ``if __name__ == "__main__":`` guard.
    """
    started = time.monotonic()
    spec = check_spec(spec)
    jobs = _check_jobs(jobs)
    out = _out_path(ds, spec, out)
    _check_out(ds, out)
    plan = _plan(ds, spec, out)
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out):
        clock = _Clock(ds, spec, out, _begin(ds, spec, out), started)
        try:
            return _run(ds, spec, out, plan, jobs, clock, progress, verify_progress)
        finally:
            if (out / MARKER).exists():  # unfinished: record the time spent so far
                with contextlib.suppress(OSError):
                    clock.tick(force=True)


def _run(
    ds: Dataset,
    spec: PrepareSpec,
    out: Path,
    plan: _Plan,
    jobs: int,
    clock: _Clock,
    progress: Callable[[int, int], None] | None,
    verify_progress: Callable[[int, int], None] | None,
) -> PrepareReport:
    """The body of :func:`prepare` once the folder is ours and locked."""
    _clean(out, plan)
    todo = [item for item in plan.items if not _image_current(item)]
    reused = len(plan.items) - len(todo)
    redo = {item.index for item in todo}
    for item in plan.items:
        if item.index not in redo and not _label_current(item):
            _copy_label(item)
    with _workers(jobs, len(plan.items)) as workers:
        started = time.monotonic()
        corrupt = _resize(workers, todo, clock, progress)
        resize_seconds = time.monotonic() - started
        for index in corrupt:
            _remove_outputs(plan.items[index])
        _verify(workers, plan, corrupt, verify_progress)
    yaml_path = _write_yaml(ds, out, plan, corrupt)
    kept = [item for item in plan.items if item.index not in corrupt]
    written = len(todo) - len(corrupt)
    seconds = clock.elapsed()
    kept_prior = written == 0 and clock.prior.jobs is not None  # a rerun that changed nothing: the copy's cost stands
    copy = PreparedCopy(
        yaml_path=yaml_path,
        root=out,
        spec=spec,
        source_yaml=ds.yaml_path,
        source_id=plan.source_id,
        images=sum(1 for i in plan.train + plan.val if i not in corrupt),
        train_images=sum(1 for i in plan.train if i not in corrupt),
        bytes=_bytes(kept),
        source_bytes=plan.source_bytes,
        seconds=round(clock.carried + (0.0 if kept_prior else seconds), 3),
        jobs=clock.prior.jobs if kept_prior and clock.prior.jobs else jobs,
        corrupt=tuple(plan.items[i].source for i in sorted(corrupt)),
    )
    _write_json(out / MANIFEST, copy.to_manifest())
    (out / MARKER).unlink(missing_ok=True)
    return PrepareReport(
        copy=copy,
        written=written,
        reused=reused,
        seconds=seconds,
        images_per_s=written / resize_seconds if written and resize_seconds > 0 else 0.0,
        jobs=jobs,
    )


def _command(ds: Dataset, spec: PrepareSpec, root: Path, out: Path | None) -> str:
    """The prepare command that (re)makes this copy."""
    parts = [f"speedopt prepare --data {ds.yaml_path} --imgsz {spec.imgsz}"]
    if spec.format != "jpg":
        parts.append(f"--format {spec.format}")
    elif spec.quality != 100:
        parts.append(f"--quality {spec.quality}")
    if out is not None:
        parts.append(f"--out {root}")
    return " ".join(parts)


def find_copy(ds: Dataset, spec: PrepareSpec, out: Path | None = None, source: str | None = None) -> PreparedCopy | None:
    """The complete copy of ``ds`` at ``spec`` in ``out`` (default :func:`default_out`), or None when there is
    none (missing, unfinished, or a copy of another dataset or spec). A complete copy made before the source
    changed is a UsageError: training on it would silently use old images or labels. ``source``: the
    source's :func:`source_id` when the caller already has it (it stats every image and label file)."""
    spec = check_spec(spec)
    root = _out_path(ds, spec, out)
    manifest = _read_json(root / MANIFEST)
    if manifest is None:
        return None
    try:
        copy = PreparedCopy.from_manifest(manifest, root)
    except (KeyError, TypeError, ValueError):
        return None
    if copy.spec != spec or copy.source_yaml != ds.yaml_path or not copy.yaml_path.is_file():
        return None
    if manifest.get("yaml_path") != str(copy.yaml_path):  # moved since: its data.yaml names the old folder
        return None
    if copy.source_id != (source or source_id(ds)):
        raise UsageError(
            f"prepared copy {root} is stale: {ds.yaml_path} changed since it was made; "
            f"run `{_command(ds, spec, root, out)}` again to update it"
        )
    return copy
