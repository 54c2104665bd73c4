"""What a killed run leaves behind, recorded before it exists and swept at the next start.

A run killed by SIGKILL (the out-of-memory killer, ``kill -9``, a closed container) runs no clean-up:
its private temp folder stays, and so do the ``.npy`` files its ``cache=disk`` trainer wrote beside
the user's images, which the trainers read in *every* cache mode (every later trial would measure a
cache nobody asked for, faster than reality). So both are recorded first, each by a *lease*: a small
JSON file (its owner's pid and what it covers) held under an exclusive ``flock`` by its owner and
shared with the job's child process (:func:`shared_fds`). The kernel releases a flock when the last
process holding it exits, even by SIGKILL, so a free lease means its owner and the children that
could still write are all gone; a pid alone could have been reused.

- a private folder (:func:`private_folder`, prefix ``speedopt-``) holds its lease as ``owner.json``;
- the ``.npy`` files a trial may create (:func:`npy_manifest`) are listed in a lease in the state
  folder (:func:`state_dir`, outside the dataset) before the trainer can write any of them.

:func:`sweep`, at the start of every job (trial, probe, validation pass), removes what free leases
cover, then the lease. It never touches what a held lease covers, a file no lease names (the
user's own ``.npy`` files were there before any manifest), anything but ``.npy`` files in the
dataset, or a folder that is not this user's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from speedopt.isolation._private import NOFOLLOW, owned_dir
from speedopt.offline import cache_dir

STATE_ENV = "SPEEDOPT_STATE_DIR"
FOLDER_PREFIX = "speedopt-"
OWNER = "owner.json"
_MANIFEST_PREFIX = "npy-"
_held: dict[Path, int] = {}  # the leases this process holds: path -> locked descriptor


def state_dir() -> Path:
    """Where speedopt records what running trials may leave behind (``SPEEDOPT_STATE_DIR`` overrides it, read at each use)."""
    override = os.environ.get(STATE_ENV)
    return Path(override) if override else cache_dir() / "state"


# -- leases ----------------------------------------------------------------------------------------


def _take(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path`` and hold it locked until :func:`_drop`.

    Written under a temporary name, locked, then renamed into place: a sweep never sees the lease
    unlocked, nor half written.
    """
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        data = memoryview(json.dumps({"pid": os.getpid(), **record}).encode())
        while data:
            data = data[os.write(fd, data) :]
        os.rename(partial, path)
    except BaseException:
        os.close(fd)
        partial.unlink(missing_ok=True)
        raise
    _held[path] = fd


def _drop(path: Path) -> None:
    """Delete the lease, then release it (in that order: a sweep never finds it free)."""
    fd = _held.pop(path, None)
    path.unlink(missing_ok=True)
    if fd is not None:
        os.close(fd)


def shared_fds() -> tuple[int, ...]:
    """The descriptors of the leases this process holds, for a child process to hold too (``pass_fds``).

    A child that outlives a killed parent for a moment (it notices, then kills its group) keeps the
    leases held until it is gone, so no sweep removes files it may still write.
    """
    for path in [p for p in _held if not p.exists()]:  # removed with their folder by their owner
        os.close(_held.pop(path))
    return tuple(_held.values())


def _claim(path: Path) -> int | None:
    """Lock a lease nobody holds (its owner is dead): the locked descriptor, or None when held or gone."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        same = os.fstat(fd).st_ino == os.lstat(path).st_ino  # another sweep may have removed it meanwhile
    except OSError:
        same = False
    if not same:
        os.close(fd)
        return None
    return fd


def _read(fd: int) -> dict[str, Any]:
    """A lease's record ({} when unreadable: a lease is only ever trusted for ``.npy`` paths it names)."""
    try:
        size = os.fstat(fd).st_size
        data = json.loads(os.pread(fd, size, 0).decode()) if size <= 1 << 30 else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- private folders -------------------------------------------------------------------------------


#: Where a private folder goes when the temp folder's path is too long for a socket in it (see
#: :func:`short_temp_root`); the sweep looks there too.
SHORT_ROOT = Path("/tmp")
#: What multiprocessing adds to ``$TMPDIR`` for the AF_UNIX socket through which a dataloader worker
#: hands a batch's tensors over; a socket path has at most 107 bytes (Linux: 108 with the final NUL).
SOCKET_SUFFIX = "/pymp-XXXXXXXX/listener-XXXXXXXX"
SOCKET_PATH_MAX = 107


def socket_fits(folder: Path | str) -> bool:
    """Whether multiprocessing's sockets fit in ``folder`` used as ``TMPDIR``.

    With a longer ``TMPDIR`` a dataloader worker's feeder thread fails (``OSError: AF_UNIX path too
    long``), drops the batch, and the trainer waits for it forever.
    """
    return len(os.fsencode(str(folder))) + len(SOCKET_SUFFIX) <= SOCKET_PATH_MAX


def private_folder(prefix: str = FOLDER_PREFIX, short: bool = False) -> Path:
    """A new private folder in the system temp folder (``short``: in :data:`SHORT_ROOT`), with this
    process's lease in it.

    A drop-in for ``tempfile.mkdtemp(prefix=...)``; remove it with :func:`remove_private_folder`
    (or ``shutil.rmtree``: the lease then lapses). Should this process die first, the next sweep
    removes it. ``prefix`` must start with ``speedopt-``.
    """
    if not prefix.startswith(FOLDER_PREFIX):
        raise ValueError(f"a private folder's prefix starts with {FOLDER_PREFIX!r}, got {prefix!r}")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=SHORT_ROOT if short else None))
    _take(folder / OWNER, {"kind": "folder"})
    return folder


def remove_private_folder(folder: Path) -> None:
    """Remove a folder made by :func:`private_folder`, and release its lease."""
    shutil.rmtree(folder, ignore_errors=True)
    _drop(folder / OWNER)


# -- disk-cache manifests --------------------------------------------------------------------------


def manifest_dir() -> Path:
    """The state folder, checked to be this user's (created when missing); UsageError otherwise."""
    return owned_dir(state_dir(), f"set {STATE_ENV} to a folder of yours")


@contextlib.contextmanager
def npy_manifest(files: Sequence[Path]) -> Iterator[None]:
    """Record ``files`` (the ``.npy`` files a trial may create) as this process's until the block ends.

    The record is in place before the block runs, so before a trainer can write any of them.
    """
    if not files:
        yield
        return
    path = manifest_dir() / f"{_MANIFEST_PREFIX}{os.getpid()}-{secrets.token_hex(4)}.json"
    _take(path, {"kind": "npy", "files": [str(p) for p in files]})
    try:
        yield
    finally:
        _drop(path)


def _ours(path: Path, kind: int) -> bool:
    """Whether ``path`` is a file or folder (``kind``: stat.S_IFREG / S_IFDIR) of this user's, not a link."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_IFMT(info.st_mode) == kind and info.st_uid == os.getuid()


def _manifests() -> list[Path]:
    """The manifests in the state folder: only files of this user's, in a folder of this user's."""
    folder = state_dir()
    if not _ours(folder, stat.S_IFDIR):
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    paths = [folder / n for n in names if n.startswith(_MANIFEST_PREFIX) and n.endswith(".json")]
    return [p for p in paths if _ours(p, stat.S_IFREG)]


def _listed(manifests: Iterable[Path]) -> set[Path]:
    listed: set[Path] = set()
    for path in manifests:
        try:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        except OSError:
            continue
        try:
            listed.update(_npy_files(_read(fd)))
        finally:
            os.close(fd)
    return listed


def recorded_npy() -> set[Path]:
    """Every ``.npy`` file some manifest lists, held or not: a trial's, never the user's own."""
    return _listed(_manifests())


def _npy_files(record: dict[str, Any]) -> set[Path]:
    files = record.get("files")
    if not isinstance(files, list):
        return set()
    return {Path(f) for f in files if isinstance(f, str) and f.endswith(".npy") and os.path.isabs(f)}


def _remove_npy(paths: Iterable[Path]) -> int:
    """Unlink each ``.npy`` file or link (never a folder, never what a link points at)."""
    removed = 0
    for path in paths:
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                continue
            path.unlink()
            removed += 1
        except OSError:
            continue
    return removed


# -- the sweep -------------------------------------------------------------------------------------


def sweep() -> tuple[int, int]:
    """Remove what dead runs left: their private folders and the ``.npy`` files their manifests list.

    Returns (folders, files) removed. Best effort: what cannot be removed now stays for the next sweep.
    """
    return _sweep_folders(), _sweep_npy()


def _sweep_folders() -> int:
    roots = dict.fromkeys([Path(tempfile.gettempdir()), SHORT_ROOT])  # the socket folders are in SHORT_ROOT
    removed = 0
    for root in roots:
        try:
            names = [n for n in os.listdir(root) if n.startswith(FOLDER_PREFIX)]
        except OSError:
            continue
        removed += sum(_sweep_folder(root / name) for name in names)
    return removed


def _sweep_folder(folder: Path) -> int:
    """1 if ``folder`` was a dead run's private folder and is removed now, else 0."""
    try:
        info = os.lstat(folder)
    except OSError:
        return 0
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return 0  # a link, a file, or another user's: not ours to judge
    fd = _claim(folder / OWNER)
    if fd is None:
        return 0  # alive, or made by an older speedopt that recorded no owner
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)
    return 1


def _sweep_npy() -> int:
    manifests = _manifests()
    dead: list[tuple[Path, int]] = []
    for path in manifests:
        fd = _claim(path)
        if fd is not None:
            dead.append((path, fd))
    if not dead:
        return 0
    try:
        live = _listed(set(manifests) - {path for path, _ in dead})  # a live trial's files stay, whoever else lists them
        removed = 0
        for path, fd in dead:
            removed += _remove_npy(sorted(_npy_files(_read(fd)) - live))
            path.unlink(missing_ok=True)
        return removed
    finally:
        for _, fd in dead:
            os.close(fd)
