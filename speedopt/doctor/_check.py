"""One pre-flight finding (:class:`Check`) and the whole screen of them (:class:`Diagnosis`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Level(str, enum.Enum):
    """How bad a finding is: ``fail`` stops a run (or makes it silently wrong), ``warn`` slows it."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


_RANK = {Level.OK: 0, Level.WARN: 1, Level.FAIL: 2}


@dataclass(frozen=True)
class Check:
    """One check: its name, verdict, what was found (with the measured figures) and what to do."""

    name: str
    level: Level
    detail: str
    fix: str = ""

    def line(self) -> str:
        """``warn shm: ...; fix`` as the doctor prints it, and as ``speedopt search`` refuses with it."""
        return f"{self.level.value:<4} {self.name}: {self.detail}" + (f"; {self.fix}" if self.fix else "")

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.name, "level": self.level.value, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Diagnosis:
    """Every check of one doctor run, in the order they ran."""

    checks: tuple[Check, ...]

    @property
    def worst(self) -> Level:
        return max((c.level for c in self.checks), key=_RANK.__getitem__, default=Level.OK)

    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.level is Level.FAIL)

    def to_dict(self) -> dict[str, Any]:
        return {"worst": self.worst.value, "checks": [c.to_dict() for c in self.checks]}
