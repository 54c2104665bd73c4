"""The finals: after the search, the top feasible configs and the baseline re-measured in interleaved rounds.

One measurement per config says little on a noisy machine (the same config measured 14% apart in
one search), so the search's leaders are measured again beside the baseline, round by round
(baseline, c1, c2, ..., baseline, c1, ...): drift and neighbours hit every config alike. Every
measurement is stored in the study (:func:`~speedopt.study._schema.write_finals`, after each one, so an
interrupted finals round resumes), and the recommendation follows :func:`speedopt.speedup.decide`. This
is the stored record; :mod:`speedopt.search._finals` measures it, from the finalists
:func:`~speedopt.study._record.finalists` picks.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from speedopt.measure import TrialResult
from speedopt.speedup import Decision, Speedup, decide, paired
from speedopt.status import Status


@dataclass(frozen=True)
class Repeat:
    """One measurement in one interleaved round: the config ``of`` measured again. In the finals ``of`` is the
    search trial whose config it is (stored as ``trial``); on the ablation's path, the config's index there
    (0: the baseline; stored as ``config``)."""

    round: int
    of: int
    status: Status
    images_per_s: float | None
    ci_rel: float | None = None
    steps: int | None = None
    started_at: float | None = None

    @classmethod
    def measured(cls, round_: int, of: int, result: TrialResult) -> Repeat:
        speed = result.images_per_s if result.ok else None
        return cls(round_, of, result.status, speed, result.ci_rel, result.steps, result.measure_started_at)

    def to_attr(self, key: str) -> dict[str, Any]:
        """The stored form, ``of`` under ``key`` (``trial`` in the finals, ``config`` in the ablation)."""
        return {key if k == "of" else k: v for k, v in {**dataclasses.asdict(self), "status": self.status.value}.items()}

    @classmethod
    def from_attr(cls, data: dict[str, Any], key: str) -> Repeat:
        values = {"of" if k == key else k: v for k, v in data.items()}
        return cls(**{**values, "status": Status(values["status"])})


@dataclass(frozen=True)
class Drop:
    """A finalist no longer measured: after round ``after`` (0-based) its decision could not change."""

    trial: int
    after: int
    why: str


@dataclass(frozen=True)
class Finals:
    """The finalists (the baseline's trial first), the rounds asked for, and every measurement so far.

    The rounds are sequential (:mod:`speedopt.search._sequential`): a finalist that can no longer be
    recommended is ``dropped`` after a round, and the finals may ``end`` before ``repeats`` rounds once
    their decision cannot change (``end``: the rounds run; ``end_why`` says why).
    """

    trials: tuple[int, ...]
    repeats: int
    measured: tuple[Repeat, ...] = ()
    min_gain: float = 0.0  # the margin above 1.0 a gain must clear in every round (the study's --min-gain)
    dropped: tuple[Drop, ...] = ()
    end: int | None = None
    end_why: str = ""

    @property
    def baseline(self) -> int:
        return self.trials[0]

    @property
    def rounds(self) -> int:
        """The rounds these finals run: ``repeats``, or fewer where they ended early."""
        return self.repeats if self.end is None else self.end

    def active(self, round_: int) -> tuple[int, ...]:
        """The trials measured in ``round_``: every finalist not dropped before it (the baseline while any other is)."""
        others = tuple(t for t in self.trials[1:] if not any(d.trial == t and d.after < round_ for d in self.dropped))
        return (self.baseline, *others) if others else ()

    def round_done(self, round_: int) -> bool:
        """Every trial of ``round_`` has its measurement."""
        return all(self.has(round_, t) for t in self.active(round_))

    @property
    def complete(self) -> bool:
        return all(self.round_done(r) for r in range(self.rounds))

    def notes(self) -> list[str]:
        """What the sequential rounds saved, one line each (empty when every finalist ran every round)."""
        lines = [f"trial {d.trial} dropped after round {d.after + 1}: {d.why}" for d in self.dropped]
        if self.end is not None and self.end < self.repeats:
            lines.append(f"finals ended after round {self.end} of {self.repeats}: {self.end_why}")
        return lines

    def has(self, round_: int, trial: int) -> bool:
        return any(m.round == round_ and m.of == trial for m in self.measured)

    def series(self, trial: int) -> list[float | None]:
        """Images/s of ``trial`` in each round (None: failed or not measured yet)."""
        by_round = {m.round: m.images_per_s for m in self.measured if m.of == trial}
        return [by_round.get(r) for r in range(self.repeats)]

    def ok_rounds(self, trial: int) -> list[float]:
        """Images/s of ``trial`` in the rounds it measured ok (empty for a trial not in the finals)."""
        return [v for v in self.series(trial) if v is not None]

    def median(self, trial: int) -> tuple[float | None, int]:
        """The median images/s of ``trial`` over its ok rounds, and how many rounds that is."""
        rounds = self.ok_rounds(trial)
        return (statistics.median(rounds) if rounds else None), len(rounds)

    def speedups(self) -> dict[int, Speedup | None]:
        """Each finalist's paired speedup over the baseline (the baseline itself left out)."""
        base = self.series(self.baseline)
        return {t: paired(self.series(t), base) for t in self.trials[1:]}

    def decision(self) -> Decision[int]:
        """Which finalist to recommend (choice None: keep the baseline)."""
        return decide(self.speedups(), self.min_gain)

    def to_attr(self) -> dict[str, Any]:
        return {
            "trials": list(self.trials), "repeats": self.repeats, "min_gain": self.min_gain,
            "measured": [m.to_attr("trial") for m in self.measured],
            "dropped": [dataclasses.asdict(d) for d in self.dropped], "end": self.end, "end_why": self.end_why,
        }

    @classmethod
    def from_attr(cls, data: Any) -> Finals | None:
        if not isinstance(data, dict) or "trials" not in data:
            return None
        measured = tuple(Repeat.from_attr(m, "trial") for m in data["measured"])
        dropped = tuple(Drop(int(d["trial"]), int(d["after"]), str(d["why"])) for d in data.get("dropped", []))
        end = data.get("end")
        return cls(
            tuple(data["trials"]), int(data["repeats"]), measured, float(data["min_gain"]), dropped,
            None if end is None else int(end), str(data.get("end_why", "")),
        )
