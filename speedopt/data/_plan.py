"""Planning a copy: the source's images and label files stat'ed once (and fingerprinted: :func:`source_id`),
where each image's copy goes (its folder: :func:`default_out` or ``--out``; the layout: see
:mod:`speedopt.data._prepare`), and the checks of ``--out``."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from speedopt.data._dataset import Dataset, label_path
from speedopt.data._listing import shown_path, utf8_name
from speedopt.data._manifest import MANIFEST, MARKER, PrepareSpec, check_spec
from speedopt.data._root import caller_cwd, split_path
from speedopt.data._yamlfile import read_yaml
from speedopt.errors import UsageError

_SUFFIX = {"jpg": ".jpg", "png": ".png", "npy": ".png"}


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
    if not utf8_name(out):
        raise UsageError(
            f"--out {shown_path(out)} is not a UTF-8 path: the trainer reads the copy's data.yaml and image lists as UTF-8 "
            "text; choose an --out with a UTF-8 name"
        )
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
