"""The one listing of an image folder, used by every part of speedopt that lists a dataset's images (load,
so prepare, doctor and the search's plan) and handed to the trainer in a trial (the Ultralytics engine
lists a split folder with it), so that all of them see the same files.

It lists what the trainers' own ``glob("**/*.*")`` lists (image suffixes, hidden names skipped, sorted as
strings, links to folders outside followed) with one difference: a link to a folder back inside the tree
(``images/train/loopdir -> ../train``) or above it is not followed. ``glob`` follows it until the kernel's
link limit, so a 64-image folder listed 2624 images, and a trial's leading subset held only copies under
``loopdir/.../`` whose labels do not exist ("No labels found").

A second difference: an image whose path is not UTF-8 (``x_\\xff.jpg``, a surrogate-escaped ``str`` here) is
left out and handed back apart (``left_out``). The trainers get speedopt's listing as a list file, which they
read as UTF-8 text (Ultralytics' ``get_img_files``; classic YOLOv5 hashes the names with ``str.encode()``):
no line of it can name such a file, and writing one failed every trial.
"""

from __future__ import annotations

import os
from pathlib import Path

IMAGE_SUFFIXES = frozenset({"bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm", "heic"})


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def utf8_name(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is UTF-8 (no byte that ``os.fsdecode`` had to escape): what a list file can name."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` printable: a byte that is not UTF-8 as ``\\xff``."""
    return os.fspath(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def list_images(folder: str | os.PathLike[str], left_out: list[Path] | None = None) -> tuple[Path, ...]:
    """The image files under ``folder`` (its path kept as given, not resolved), sorted as strings, as the
    trainers sort them. A link to a folder is followed only when its target lies outside the tree and
    neither holds the tree nor was walked already: no loop, no image listed twice through a link. An image
    whose path is not UTF-8 is not listed but added to ``left_out`` (see the module docstring)."""
    top = os.fspath(folder)
    real_top = os.path.realpath(top)
    walked: set[str] = set()  # the real path of every folder walked
    found: list[str] = []
    for here, dirs, files in os.walk(top, followlinks=True):
        walked.add(os.path.realpath(here))
        keep = []
        for name in sorted(dirs):
            if name.startswith("."):
                continue
            path = os.path.join(here, name)
            if os.path.islink(path):
                real = os.path.realpath(path)
                if real in walked or _inside(real, real_top) or _inside(real_top, real):
                    continue
                walked.add(real)  # a second link to it is not followed either
            keep.append(name)
        dirs[:] = keep
        found += [
            os.path.join(here, name) for name in files
            if not name.startswith(".") and os.path.splitext(name)[1][1:].lower() in IMAGE_SUFFIXES
        ]
    if left_out is not None:
        left_out += [Path(p) for p in sorted(found) if not utf8_name(p)]
    return tuple(Path(p) for p in sorted(found) if utf8_name(p))
