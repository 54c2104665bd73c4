"""A warm start as a study stores it: the source study, and each config taken from it as measured there and
as it runs here (:mod:`speedopt.study._source` plans it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speedopt.knobs import Knobs
from speedopt.machine import MachineKey


@dataclass(frozen=True)
class WarmConfig:
    """One source config, as measured there and as it runs here."""

    source_trial: int
    source_images_per_s: float
    source_config: Knobs
    knobs: Knobs
    changes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_trial": self.source_trial,
            "source_images_per_s": self.source_images_per_s,
            "source_config": self.source_config.to_dict(),
            "knobs": self.knobs.to_dict(),
            "changes": list(self.changes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WarmConfig:
        return cls(
            int(data["source_trial"]),
            float(data["source_images_per_s"]),
            Knobs.from_dict(data["source_config"]),
            Knobs.from_dict(data["knobs"]),
            tuple(data["changes"]),
        )


@dataclass(frozen=True)
class WarmStart:
    """What was taken from the source study and how it was adapted."""

    source: str
    study: str
    machine: MachineKey
    same_dataset: bool
    configs: tuple[WarmConfig, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "study": self.study,
            "machine": self.machine.to_dict(),
            "same_dataset": self.same_dataset,
            "configs": [c.to_dict() for c in self.configs],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WarmStart:
        configs = tuple(WarmConfig.from_dict(c) for c in data["configs"])
        return cls(data["source"], data["study"], MachineKey.from_dict(data["machine"]), bool(data["same_dataset"]), configs)
