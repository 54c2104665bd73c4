"""An engine resolved once: :class:`EngineSpec`, the trainer a command runs and the checkout its code comes from.

Made at the edge (the CLI's flags and the Python API's keyword arguments, through
:class:`~speedopt.measure.TrialOptions` and :class:`~speedopt.search.SearchConfig`; a stored study's protocol; a
job's JSON in its child process) and carried whole from there. Stored records, job JSON and the Python API keep
their two names, ``engine`` and ``yolov5_dir`` (:meth:`EngineSpec.record`), so a study written before it reads the
same. A checkout is code: the one a stored study names is the one this user gave its search, since an imported
study names none (:mod:`speedopt.study._transfer`; verify runs the one the user names on its own command line).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol, TypedDict

from speedopt.engines._base import Dialect, Engine
from speedopt.engines._registry import DEFAULT, EngineName, engine_class, get, words
from speedopt.engines._words import Words


class SpecRecord(TypedDict):
    """An :class:`EngineSpec` as records, job JSON and the Python API's keyword arguments spell it."""

    engine: EngineName
    yolov5_dir: str | None


class Recorded(Protocol):
    """A record that stores an engine spec as its two fields (a study's protocol, a job)."""

    @property
    def engine(self) -> EngineName: ...

    @property
    def yolov5_dir(self) -> str | None: ...


@dataclass(frozen=True)
class EngineSpec:
    """Which engine runs, and from which checkout of its trainer's code (None: the installed package)."""

    name: EngineName = DEFAULT
    checkout: str | None = None  # as given (``--yolov5-dir``, a record); :meth:`resolved` makes it absolute

    @classmethod
    def of(cls, record: Recorded) -> EngineSpec:
        """The spec a record stores (the inverse of :meth:`record`)."""
        return cls(record.engine, record.yolov5_dir)

    @cached_property
    def engine(self) -> Engine:
        """The engine, built on first use (its checkout checked then: UsageError, one line, when it is not one)."""
        return get(self.name, self.checkout)

    @property
    def dialect(self) -> Dialect:
        """What the user types to this trainer (read from the engine's class: no checkout checked)."""
        return engine_class(self.name).dialect

    @property
    def words(self) -> Words:
        """The words of :attr:`dialect`."""
        return words(self.name)

    def resolved(self) -> EngineSpec:
        """The same engine with its checkout as an absolute path (what a request and a study record)."""
        return EngineSpec(self.name, str(Path(self.checkout).expanduser().resolve()) if self.checkout else None)

    def record(self) -> SpecRecord:
        """This spec under the names a record's fields have (a study's protocol, a job, the API's keywords)."""
        return {"engine": self.name, "yolov5_dir": self.checkout}


class RecordsEngine:
    """Mixed into a record that stores an engine spec as its fields ``engine`` and ``yolov5_dir`` (a study's protocol,
    a job, the trial options): :attr:`engine_spec` reads the spec back, one way for every such record."""

    @cached_property
    def engine_spec(self: Recorded) -> EngineSpec:
        """The engine the record names, from the checkout it records as given (:meth:`EngineSpec.resolved`: absolute);
        one spec per record, so its engine is built once for the record's life (records are frozen)."""
        return EngineSpec.of(self)
