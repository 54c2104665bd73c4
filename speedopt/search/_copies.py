"""Finding and making the prepared copies a study's ``data=resized`` trials train on (see :class:`~speedopt.study.DataCopy`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, get_args

from speedopt.data import PrepareFormat
from speedopt.errors import UsageError
from speedopt.study.record_types import DataCopy

#: Copy formats a search looks for, in order of preference (lossless first under quality off: see ``LOSSLESS``).
COPY_FORMATS: tuple[PrepareFormat, ...] = get_args(PrepareFormat)

if TYPE_CHECKING:
    from speedopt.data import Dataset, PrepareSpec


def spec_for(imgsz: int, fmt: PrepareFormat) -> PrepareSpec:
    """The copy spec a study uses: JPEG at quality 100 (the practitioners' choice), or a lossless format."""
    from speedopt.data import PrepareSpec

    return PrepareSpec(imgsz=imgsz, format=fmt, quality=100)


def find_copies(ds: Dataset, sizes: Sequence[int], formats: Sequence[PrepareFormat] = COPY_FORMATS) -> tuple[DataCopy, ...]:
    """Complete, current copies for every size in ``sizes``, in the first format of ``formats`` that has
    them all; () when none has. A stale copy (the source changed since) raises UsageError."""
    from speedopt.data import MANIFEST, default_out, find_copy, source_id

    if not any((default_out(ds, spec_for(size, fmt)) / MANIFEST).is_file() for fmt in formats for size in sizes):
        return ()  # no copy at all: the source is not fingerprinted (a stat of every file) for nothing
    source = source_id(ds)  # once, not once per copy
    for fmt in formats:
        found = [find_copy(ds, spec_for(size, fmt), source=source) for size in sizes]
        if all(c is not None for c in found):
            return tuple(DataCopy.of(c) for c in found if c is not None)
    return ()


def make_copies(
    ds: Dataset, sizes: Sequence[int], fmt: PrepareFormat, progress: Callable[[int, int, int], None] | None = None
) -> tuple[DataCopy, ...]:
    """Make (or finish, or update) the copy at each size; ``progress(imgsz, done, total)`` as images are written."""
    from speedopt.data import prepare as prepare_copy

    if fmt not in COPY_FORMATS:
        raise UsageError(f"--prepare must be one of {', '.join(COPY_FORMATS)}, got {fmt!r}")
    made = []
    for size in sizes:
        report = prepare_copy(ds, spec_for(size, fmt), progress=None if progress is None else _at(progress, size))
        made.append(DataCopy.of(report.copy))
    return tuple(made)


def _at(progress: Callable[[int, int, int], None], size: int) -> Callable[[int, int], None]:
    return lambda done, total: progress(size, done, total)
