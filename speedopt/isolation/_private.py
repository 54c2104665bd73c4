"""Folders and files only this user writes: checked before speedopt writes into them.

speedopt keeps a little state outside the user's data: the host lock (in the system temp folder) and
the records of what a running trial may leave behind (:mod:`speedopt.isolation._leftovers`). In a
folder every local user can write to, another user could plant a symbolic link where speedopt will
write, and speedopt would overwrite whatever the link points at. So each such folder must be a real
folder (not a link) owned by the current user and closed to others (mode 0700), and files in it
are opened with ``O_NOFOLLOW`` (a link in place of the file is refused, never written through).
Anything else is refused with one line naming the path and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from speedopt.errors import UsageError

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def owned_dir(path: Path, fix: str) -> Path:
    """``path`` as a folder of this user's, created (mode 0700) when missing; UsageError otherwise.

    ``fix`` is the advice the refusal line ends with (what the user can do instead). A folder of
    the user's with a looser mode is tightened: only a folder someone else controls is refused.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symbolic link" if path.is_symlink() else "not a folder"
            raise UsageError(f"{path} is {kind}, not speedopt's own folder: refusing to write through it; remove it, or {fix}") from None
        raise
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise UsageError(
                f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): refusing to write in it; remove it, or {fix}"
            )
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # ours, but open to others: close it
    finally:
        os.close(fd)
    return path


def open_private(path: Path, flags: int = os.O_RDWR | os.O_CREAT, fix: str = "remove it") -> int:
    """Open the regular file ``path`` without following a link in its place; UsageError when refused.

    Refused: a symbolic link (``O_NOFOLLOW``), anything but a regular file, and a file with more
    than one name (a hard link planted to make speedopt write into another file).
    """
    try:
        fd = os.open(path, flags | NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{path} is a symbolic link: refusing to write through it; {fix}") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        what = "has another name (a hard link)" if stat.S_ISREG(info.st_mode) else "is not a regular file"
        raise UsageError(f"{path} {what}: refusing to write to it; {fix}")
    return fd
