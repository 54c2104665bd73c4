"""What a job's runner and its child process exchange through the child's work folder.

The runner writes ``request.json`` and passes its own pid (:data:`speedopt.isolation.PARENT_ENV`, which the
child watches); the child writes ``progress.json`` as it goes and ``result.json`` at the end (under DDP,
rank R > 0 writes ``result.rank<R>.json``: :func:`result_name`). Every file is written atomically,
so a reader never sees half of one; the child's output goes to a log whose tail explains a failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def result_name(rank: int) -> str:
    """The result file of DDP rank ``rank`` (``result.json`` for rank 0 and single-process jobs)."""
    return "result.json" if rank == 0 else f"result.rank{rank}.json"


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file written atomically by the other side, or None if absent or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (temp file + rename), so a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)
