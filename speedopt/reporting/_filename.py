"""Files named after something speedopt did not name: a study (``--study``, or one arriving in an
imported export) becomes ``reports/<study>.md``, ``<study>.csv`` and the figure folder ``<study>/``.

Such a name may hold ``../``, be absolute, hold a NUL byte or be thousands of characters long, so it
never becomes a path as it is: :func:`safe_name` maps it to one plain file name (a name that had to
change gets a short hash, so two studies never share files), and :func:`inside` refuses a path that
resolves outside its folder (a symbolic link planted where a report goes). :func:`report_files`
applies both, and checks the folder can be written before a report spends minutes timing anything.
:func:`write_inside` writes every file of a report (markdown, CSV, figures) the same way: checked inside its
folder, then written whole under a fresh temporary name and renamed over its own name, so a link planted
there is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from speedopt.errors import UsageError

MAX_STEM = 80  # characters kept of a name; well under any filesystem's 255-byte limit, with the hash
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """``name`` as one file name: ASCII letters, digits, ``.``, ``_`` and ``-``, no leading dot or dash, at
    most :data:`MAX_STEM` characters. A name that is already one is kept as it is; any other gets its
    slug plus ``-`` and 8 hex digits of its SHA-256 (``../escape/x`` -> ``escape-x-1b2c3d4e``)."""
    slug = _UNSAFE.sub("-", name).strip(".-")[:MAX_STEM].strip(".-")
    if slug and slug == name:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug or 'study'}-{digest}"


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, after checking that it resolves to an entry of ``folder`` itself (``name`` is one
    plain file name, and no symbolic link there leads elsewhere); UsageError otherwise."""
    path = folder / name
    try:
        real, home = path.resolve(), folder.resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        raise UsageError(f"refusing to write {path}: it is a loop of links; remove that link or pass another --out") from None
    if os.sep in name or (os.altsep and os.altsep in name) or name in ("", ".", "..") or real.parent != home:
        raise UsageError(
            f"refusing to write {path}: it resolves to {real}, outside {home}; remove that link or pass another --out"
        )
    return path


def write_inside(path: Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Write ``path`` whole and never through a link: :func:`inside` its folder, ``write`` fills a fresh temporary
    file there (``O_EXCL | O_NOFOLLOW``: nothing already at that name is opened), renamed over ``path``, so a link
    planted at ``path`` is replaced and what it led to is left as it was. Returns ``path``."""
    inside(path.parent, path.name)
    temp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        with os.fdopen(os.open(temp, flags, 0o666), "wb") as handle:
            write(handle)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return path


def _no_link_out(figures: Path) -> None:
    """UsageError when a link in the figure folder leads out of it (a figure would be written there): said
    before the report times anything, as for the markdown."""
    with os.scandir(figures) as entries:
        for entry in entries:
            if entry.is_symlink():
                inside(figures, entry.name)


@dataclass(frozen=True)
class ReportFiles:
    """Where one study's report goes: the markdown, the trial table, the figure folder, and the folder's
    name as the markdown links to it."""

    markdown: Path
    csv: Path
    figures: Path
    link: str


def _writable(folder: Path) -> Path:
    """``folder``, created if missing, after proving a file can be written in it (UsageError otherwise)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".speedopt-write-check-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(
            f"cannot write the report in {folder}: {exc.strerror or exc}; "
            "pass --out to a folder you can write (speedopt report --out DIR)"
        ) from None
    return folder


def _real_folders(out_dir: Path) -> None:
    """UsageError when a folder on the way to a relative ``out_dir`` (the default ``reports/``), from the working folder
    down, is a link: a cloned repository can ship ``reports -> elsewhere/``, and the report would be written there.
    A folder the user names by its absolute path is theirs to choose."""
    if out_dir.is_absolute():
        return
    here = Path.cwd()
    for part in out_dir.parts:
        here = here / part
        if part not in ("", ".") and here.is_symlink():
            raise UsageError(
                f"refusing to write the report in {out_dir}: {here} is a link (to {os.readlink(here)}), not a folder of "
                "this working folder; remove that link or pass --out to a real folder"
            )


def report_files(out_dir: Path, study_name: str) -> ReportFiles:
    """The report's files for ``study_name`` in ``out_dir`` (checked writable, each folder on the way a real one),
    each named safely and inside ``out_dir``; the figure folder is created."""
    stem = safe_name(study_name)
    _real_folders(out_dir)
    folder = _writable(out_dir)
    figures = inside(folder, stem)
    files = ReportFiles(inside(folder, f"{stem}.md"), inside(folder, f"{stem}.csv"), figures, stem)
    try:
        figures.mkdir(exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot write the report's figures in {figures}: {exc.strerror or exc}; pass --out to a folder you can write"
        ) from None
    _no_link_out(figures)
    return files
