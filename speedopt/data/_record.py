"""The record of the files speedopt prepare wrote into a copy's folder (:data:`RECORD`), and what every
other entry there is: a temporary file of a killed run, a trainer's cache of the copy, or someone else's.

prepare removes only what its record names (and the trainers' caches of images it removes or rewrites):
neither a marker nor a manifest makes a folder speedopt's, and a folder holding anything else is refused
before anything in it is touched. A run adds its planned outputs to the record before it writes any of
them, so a killed run leaves nothing unrecorded; a complete copy's record names exactly its files.

The trainers write two kinds of file into a copy, which are neither refused nor recorded: a label cache
beside a label folder (``labels/train.cache``, and its temporary ``.cache.npy``), which they check
against the files themselves and which stays, and, with ``cache=disk``, a decoded ``<image>.npy``
beside an image, which they read in place of the image (classic yolov5 whenever it exists): it goes
with its image, when prepare removes or rewrites that image.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from enum import Enum
from pathlib import Path

from speedopt.data._atomic import _TEMP, _read_json, _write_json
from speedopt.data._manifest import MANIFEST, MARKER
from speedopt.errors import UsageError
from speedopt.knobs import shown
from speedopt.version import __version__

RECORD = ".speedopt-files.json"  # the relative paths of the files prepare wrote into the copy's folder
_OWN = frozenset({MARKER, MANIFEST, RECORD})  # the copy's bookkeeping, at its root
_IMAGES = (".jpg", ".png")  # the image formats a copy holds (a trainer's cache=disk array goes beside them)
_LABEL_CACHES = (".cache", ".cache.npy")  # a trainer's label cache beside a label folder, and its temporary name
_SHOWN = 3  # entries named when a folder is refused
_SHOWN_CHARS = 60  # of each name (quoted: a name cannot break the line)


class _Kind(Enum):
    """What an entry of a copy's folder is."""

    OWN = "own"  # the marker, manifest or record
    RECORDED = "recorded"  # a file (or a folder above one) that the record names
    TEMP = "temp"  # the temporary file of a killed run, for a recorded or own file
    DERIVED = "derived"  # a trainer's cache=disk .npy beside a recorded image: goes with the image
    CACHE = "cache"  # a trainer's label cache beside a recorded folder: stays
    FOREIGN = "foreign"  # anything else: someone else's, never touched


def _read_record(out: Path) -> frozenset[str] | None:
    """The paths (relative to ``out``) the record names; None when there is no readable record."""
    record = _read_json(out / RECORD)
    files = record.get("files") if record is not None else None
    if not isinstance(files, list):
        return None
    return frozenset(f for f in files if isinstance(f, str) and f and not os.path.isabs(f))


def _write_record(out: Path, files: Iterable[str]) -> None:
    """Record ``files`` (paths relative to ``out``) as prepare's, before any of them is written."""
    _write_json(out / RECORD, {"speedopt": __version__, "files": sorted(set(files))})


def _relative(out: Path, paths: Iterable[str | Path | None]) -> Iterator[str]:
    """Each path given (those under ``out``) relative to it, as the record names it."""
    root = str(out)
    for path in paths:
        if path is not None:
            yield os.path.relpath(path, root)


class _Survey:
    """Every entry of a copy's folder, judged against its record."""

    def __init__(self, out: Path, recorded: frozenset[str] | None):
        self.out, self.had_record = out, recorded is not None
        self.recorded = recorded or frozenset()
        self.folders = {parent for rel in self.recorded for parent in _parents(rel)}
        self.entries: dict[str, _Kind] = {}
        self.dirs: set[str] = set()  # the real folders among the entries (a link to one is judged as a file)
        for folder, dirs, files in os.walk(out):  # links to folders are listed, not followed
            for name in files + dirs:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, out)
                if name in dirs and not os.path.islink(path):
                    self.dirs.add(rel)
                    self.entries[rel] = _Kind.RECORDED if rel in self.folders else _Kind.FOREIGN
                else:
                    self.entries[rel] = self.kind(rel)
            ours = [d for d in dirs if self.entries[os.path.relpath(os.path.join(folder, d), out)] is _Kind.RECORDED]
            dirs[:] = [d for d in ours if not os.path.islink(os.path.join(folder, d))]  # a foreign folder counts once

    def kind(self, rel: str) -> _Kind:
        """What the file ``rel`` is (see :class:`_Kind`)."""
        if rel in _OWN:
            return _Kind.OWN
        if rel in self.recorded:
            return _Kind.RECORDED
        folder, name = os.path.split(rel)
        if _TEMP.match(name):
            target = os.path.join(folder, name[1:].rsplit(".tmp-", 1)[0])
            return _Kind.TEMP if target in self.recorded or target in _OWN else _Kind.FOREIGN
        if rel.endswith(".npy") and any(rel[:-4] + suffix in self.recorded for suffix in _IMAGES):
            return _Kind.DERIVED
        for suffix in _LABEL_CACHES:
            if rel.endswith(suffix) and rel[: -len(suffix)] in self.folders:
                return _Kind.CACHE
        return _Kind.FOREIGN

    def files(self, *kinds: _Kind) -> list[str]:
        """The files (not folders) of these kinds, relative to the folder."""
        return [rel for rel, kind in self.entries.items() if kind in kinds and rel not in self.dirs]

    def wanted(self, rel: str, wanted: set[str]) -> bool:
        """Whether the file ``rel`` stays in a copy of the files ``wanted``: one of them, or a trainer's array of one."""
        if rel in wanted:
            return True
        return self.entries.get(rel) is _Kind.DERIVED and any(rel[:-4] + suffix in wanted for suffix in _IMAGES)

    def check(self) -> None:
        """Refuse the folder (UsageError, one line) when it holds anything prepare did not write."""
        foreign = sorted(rel for rel, kind in self.entries.items() if kind is _Kind.FOREIGN)
        if not foreign:
            return
        named = ", ".join(shown(rel, _SHOWN_CHARS) for rel in foreign[:_SHOWN]) + (", ..." if len(foreign) > _SHOWN else "")
        why = "" if self.had_record else " (it has no record of what prepare wrote there: not a copy, or one made by an older speedopt)"
        raise UsageError(
            f"--out {self.out} holds {len(foreign)} file(s) or folder(s) that speedopt prepare did not write ({named}){why}; "
            "move them out of it, or choose another --out"
        )


def _remove(out: Path, files: Iterable[str]) -> None:
    """Unlink each of ``files`` (relative to ``out``; a link itself, never what it points at), then every
    folder left empty."""
    for rel in files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(out / rel)
    _prune(out)


def _prune(out: Path) -> None:
    """Remove the folders under ``out`` that are empty (a user's folder is refused before, never reached)."""
    for folder, dirs, _ in os.walk(out, topdown=False):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(folder, name))  # only succeeds when empty


def _parents(rel: str) -> Iterator[str]:
    folder = os.path.dirname(rel)
    while folder:
        yield folder
        folder = os.path.dirname(folder)
