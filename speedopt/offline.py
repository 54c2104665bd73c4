"""Offline by design: a trial process may not reach the network, and needs no download to run.

:func:`forbid_network` installs an audit hook that refuses DNS look-ups and connections to anything
but loopback, and records each attempt so the trial can report it. A trainer that tries to
download (weights, fonts, an AMP check model) fails fast instead of hanging on a dead network, and
the attempt is visible in the result. :func:`place_font` gives trainers that want Arial.ttf a local
TrueType font (matplotlib's DejaVu Sans) so they never try to fetch one.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

_LOCAL_HOSTS = {"localhost", "::1", "0.0.0.0", ""}


def _is_local(host: object) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    text = str(host)
    return text in _LOCAL_HOSTS or text.startswith("127.")


def forbid_network(attempts: list[str]) -> None:
    """Refuse non-loopback DNS and connects in this process (and processes it forks); log them in ``attempts``."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.getaddrinfo":
            host = args[0]
        elif event == "socket.connect":
            address = args[1]
            if not isinstance(address, tuple):  # AF_UNIX path: local by definition
                return
            host = address[0]
        else:
            return
        if not _is_local(host):
            attempts.append(f"{event} {host}")
            raise ConnectionRefusedError(f"speedopt trials run offline; refused {event} to {host}")

    sys.addaudithook(hook)


def place_font(folder: Path, names: tuple[str, ...] = ("Arial.ttf", "Arial.Unicode.ttf")) -> None:
    """Put a local TrueType font under each of ``names`` in ``folder`` (no-op where present: every job
    calls this, and importing matplotlib to find its font costs a job 0.26 s)."""
    missing = [folder / name for name in names if not (folder / name).exists()]
    if not missing:
        return
    import matplotlib

    source = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    folder.mkdir(parents=True, exist_ok=True)
    for target in missing:
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)


def cache_dir() -> Path:
    """speedopt's own cache folder (local fonts, private trainer settings), never the user's."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "speedopt"
