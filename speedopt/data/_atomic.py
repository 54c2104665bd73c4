"""Files written atomically: through a temporary name in their folder, then renamed, so that a reader (or
a killed run) only ever sees a whole file under its final name; and JSON read back leniently."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

_TEMP = re.compile(r"^\..+\.tmp-\d+$")


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
