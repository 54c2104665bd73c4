"""The ``data`` knob's other value: prepared copies of the dataset, one per imgsz the space holds.

``data=resized`` trains on the copy ``speedopt prepare`` made at the trial's imgsz (long side = imgsz,
the decode-at-full-size work done once). A study offers the knob only where a complete, current
copy exists for every imgsz value in its space, all in one format, or where ``--prepare FORMAT``
makes them first. The study records each copy (:class:`DataCopy`), so every worker, report and
printed command names the same file, and the prepare time is a one-time cost the report amortises.

A lossless copy (png, npy) resized exactly as the Ultralytics trainer resizes (see
:mod:`speedopt.data._prepare`) holds the very pixels that trainer would compute from the original:
it cannot change the trained model. A JPEG copy can, slightly, so ``data`` is an accuracy knob.
Finding and making the copies is the search's (:mod:`speedopt.search._copies`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from speedopt.data import PrepareFormat
from speedopt.errors import UsageError

if TYPE_CHECKING:
    from speedopt.data import PreparedCopy

#: The lossless copy formats, in the order a search under quality off prefers them.
LOSSLESS: tuple[PrepareFormat, ...] = ("png", "npy")


@dataclass(frozen=True)
class DataCopy:
    """One prepared copy a study's ``data=resized`` trials train on: the copy at ``imgsz``."""

    imgsz: int
    yaml: str  # the copy's data.yaml (absolute)
    format: PrepareFormat
    quality: int
    seconds: float  # wall time the prepare that made it took (a one-time cost of the run)
    bytes: int  # the copy's image bytes on disk
    source_bytes: int
    jobs: int = 1
    images: int = 0

    @property
    def lossless(self) -> bool:
        """The copy holds the pixels the trainer would compute itself (see the module docstring)."""
        return self.format in LOSSLESS

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataCopy:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["format"] = one_of(PrepareFormat, data.get("format"), "copy format")
        return cls(**values)

    @classmethod
    def of(cls, copy: PreparedCopy) -> DataCopy:
        spec = copy.spec
        return cls(
            imgsz=spec.imgsz, yaml=str(copy.yaml_path), format=spec.format, quality=spec.quality,
            seconds=round(copy.seconds, 3), bytes=copy.bytes, source_bytes=copy.source_bytes, jobs=copy.jobs,
            images=copy.images,
        )


def one_of(kind: Any, value: object, what: str, study_name: str = "") -> Any:
    """``value`` when it is one of the ``Literal`` ``kind``'s strings; UsageError for one a study may not hold."""
    if value in get_args(kind):
        return value
    where = f"study {study_name!r}" if study_name else "the study"
    raise UsageError(f"{where} stores {what} {value!r}, not one of {', '.join(get_args(kind))}: it was not made by this speedopt")


def copy_for(copies: Sequence[DataCopy], imgsz: int) -> DataCopy:
    """The copy at ``imgsz``; UsageError when the study has none (a space without that copy)."""
    for copy in copies:
        if copy.imgsz == imgsz:
            return copy
    raise UsageError(
        f"no prepared copy at imgsz={imgsz} in this study; run `speedopt prepare --imgsz {imgsz}` or search with --prepare"
    )
