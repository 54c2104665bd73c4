"""The copy's folder: locked while a run writes it, marked as a copy in progress (``MARKER``) and taken
over (a folder holding anything prepare did not write refused, a copy at another spec wiped, one of
another dataset refused), cleaned of what no source maps to any more, and given its data.yaml. Only
what the copy's record names is ever removed (:mod:`~speedopt.data._record`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.data._atomic import _read_json, _write_json, _write_text
from speedopt.data._dataset import Dataset
from speedopt.data._manifest import LISTS, MANIFEST, MARKER, YAML, PrepareSpec
from speedopt.data._plan import _Plan, _root
from speedopt.data._record import _Kind, _prune, _read_record, _relative, _remove, _Survey, _write_record
from speedopt.data._root import split_path
from speedopt.data._yamlfile import read_yaml
from speedopt.errors import UsageError
from speedopt.version import __version__


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


def _wipe(out: Path, survey: _Survey) -> None:
    """Remove what prepare wrote into the copy, and the trainers' arrays of its images (a copy at another
    spec is redone from scratch); the marker keeps the folder ours meanwhile, and a label cache stays."""
    _remove(out, survey.files(_Kind.RECORDED, _Kind.TEMP, _Kind.DERIVED))


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


def _planned(out: Path, plan: _Plan, skip: Iterable[int] = ()) -> set[str]:
    """Every file the copy holds once complete (but the items in ``skip``), relative to ``out``."""
    skipped = set(skip)
    paths: list[str | Path | None] = [out / YAML, *(out / name for split, name in LISTS.items() if split not in plan.folders)]
    for item in plan.items:
        if item.index not in skipped:
            paths += [item.output, item.npy, item.label_dst if item.label_src else None]
    return set(_relative(out, paths))


def _begin(ds: Dataset, spec: PrepareSpec, out: Path, plan: _Plan) -> _Prior:
    """Mark ``out`` as a copy in progress and take it over (manifest and data.yaml removed until it is
    complete again). A folder holding anything prepare did not write is refused before anything in it is
    touched (see :mod:`~speedopt.data._record`), and so is a copy of another dataset; a copy at another (or
    an unreadable) spec is wiped, the marker keeping the folder ours meanwhile. What this run will write is
    added to the record before it writes any of it."""
    survey = _Survey(out, _read_record(out))
    survey.check()
    has_marker, has_manifest = (out / MARKER).is_file(), (out / MANIFEST).is_file()
    prior = _Prior()
    recorded = survey.files(_Kind.RECORDED)
    if has_marker or has_manifest:
        state = _read_json(out / (MARKER if has_marker else MANIFEST)) or {}
        source = str(state.get("source_yaml") or "")
        if source and source != str(ds.yaml_path):
            raise UsageError(f"--out {out} holds a prepared copy of another dataset ({source}); choose another --out, or delete it")
        if _spec_of(state) != spec:
            if not has_marker:
                _write_json(out / MARKER, {**state, "seconds": 0.0})
            _wipe(out, survey)
            recorded = []
        elif has_marker:
            prior = _Prior(_number(state.get("seconds")))
        else:
            prior = _Prior(_number(state.get("seconds")), int(_number(state.get("jobs"))) or None)
    _write_json(out / MARKER, _state(ds, spec, prior.seconds))
    _write_record(out, {*recorded, *_planned(out, plan)})
    (out / MANIFEST).unlink(missing_ok=True)
    (out / YAML).unlink(missing_ok=True)
    return prior


def _clean(out: Path, plan: _Plan) -> None:
    """Remove temporary files of killed runs and the outputs no source maps to any more (gone, renamed,
    other format), with the trainers' arrays of their images, then empty folders. Only what the record
    names is touched: a trainer's label cache stays."""
    wanted = _planned(out, plan)
    survey = _Survey(out, _read_record(out))
    _remove(out, [rel for rel in survey.files(_Kind.RECORDED, _Kind.TEMP, _Kind.DERIVED) if not survey.wanted(rel, wanted)])


def _finish(out: Path, plan: _Plan, corrupt: set[int]) -> None:
    """Record exactly the complete copy's files (the corrupt sources' outputs were removed)."""
    _prune(out)
    _write_record(out, _planned(out, plan, skip=corrupt))


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
