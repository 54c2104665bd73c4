"""The report's cell text: numbers, shares and durations as a table cell shows them ("-" when unknown)."""

from __future__ import annotations

from typing import Any


def fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    """``value`` with ``digits`` decimals (a float) and ``unit``; yes/no for a bool; "-" for None or NaN."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def pct(value: float | None) -> str:
    """A fraction as a percentage with one decimal; "-" for None or NaN."""
    return "-" if value is None or value != value else f"{100 * value:.1f}%"


def duration(seconds: float | None) -> str:
    """``1 h 05 min`` or ``4 min 07 s``; "-" for None."""
    if seconds is None:
        return "-"
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def cell(text: str) -> str:
    """``text`` safe inside a markdown table cell (no column separator)."""
    return text.replace("|", "/")
