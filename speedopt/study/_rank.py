"""How a study's space was ranked by its ceilings, as stored (:func:`~speedopt.study._schema.write_ranking`).

The ranking itself (bounding every config of the space by its ceilings, the highest measured first) is
:mod:`speedopt.search._rank`; the bound it gives the space is one of the search's stop rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from speedopt.knobs import Knobs, knobs_text

RankMode = Literal["auto", "on", "off"]  # --ceiling-rank: rank a space larger than the budget, always, never


@dataclass(frozen=True)
class Ranking:
    """What ranking a study's space by its ceilings did: its bounds, the configs it enqueued, or why it did not run."""

    configs: int  # configs in the space (0: too many to enumerate)
    jobs: int  # ceiling jobs it needs (those measured, when ``ran``: the branch and bound runs fewer)
    ran: bool
    message: str  # one line: what was done, or why not
    enqueued: tuple[tuple[Knobs, float], ...] = ()  # measured first, highest bound first
    space_bound: float | None = None  # the highest bound of any config in the space (None unless every one is bounded)
    wall_s: float = 0.0  # the ceiling jobs' wall time

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["enqueued"] = [{"knobs": k.to_dict(), "bound": b} for k, b in self.enqueued]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ranking:
        enqueued = tuple((Knobs.from_dict(e["knobs"]), float(e["bound"])) for e in data["enqueued"])
        fields = [f.name for f in dataclasses.fields(cls) if f.name != "enqueued"]
        return cls(**{k: data[k] for k in fields}, enqueued=enqueued)

    def lines(self) -> list[str]:
        """What it did, and each enqueued config with its bound."""
        out = [self.message]
        out += [f"  bound {b:.1f} images/s: {knobs_text(k)}" for k, b in self.enqueued]
        return out
