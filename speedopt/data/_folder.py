"""The copy's folder: locked while a run writes it, marked as a copy in progress (``MARKER``) and taken
over (a copy at another spec wiped, one of another dataset refused), cleaned of what no source maps to
any more, and given its data.yaml."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.data._atomic import _TEMP, _read_json, _write_json, _write_text
from speedopt.data._dataset import Dataset
from speedopt.data._manifest import LISTS, MANIFEST, MARKER, YAML, PrepareSpec
from speedopt.data._plan import _Plan, _root
from speedopt.data._root import split_path
from speedopt.data._yamlfile import read_yaml
from speedopt.errors import UsageError
from speedopt.version import __version__

_OURS = frozenset({".jpg", ".png", ".npy", ".txt"})  # what a clean-up may remove from the copy


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
