"""The finals: after the search, the top feasible configs and the baseline re-measured in interleaved rounds.

One measurement per config says little on a noisy machine (the same config measured 14% apart in
one search), so the search's leaders are measured again beside the baseline, round by round
(baseline, c1, c2, ..., baseline, c1, ...): drift and neighbours hit every config alike. Every
measurement is stored in the study (user attr ``finals``, written after each one, so an interrupted
finals round resumes), and the recommendation follows :func:`speedopt.speedup.decide`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.speedup import Decision, Speedup, decide, paired
from speedopt.study._record import TrialRecord, baseline_trial, ranked

if TYPE_CHECKING:
    import optuna

ATTR = "finals"
PREVIOUS = "finals_previous"  # earlier finals of other finalists, kept when the study grew



@dataclass(frozen=True)
class Repeat:
    """One measurement of a finalist in one round."""

    round: int
    trial: int  # the search trial whose config was measured again
    status: str
    images_per_s: float | None
    ci_rel: float | None = None
    steps: int | None = None
    started_at: float | None = None

    @classmethod
    def of(cls, round_: int, trial: int, result: TrialResult) -> Repeat:
        speed = result.images_per_s if result.ok else None
        return cls(round_, trial, result.status.value, speed, result.ci_rel, result.steps, result.measure_started_at)


@dataclass(frozen=True)
class Finals:
    """The finalists (the baseline's trial first), the rounds asked for, and every measurement so far."""

    trials: tuple[int, ...]
    repeats: int
    measured: tuple[Repeat, ...] = ()
    min_gain: float = 0.0  # the margin above 1.0 a gain must clear in every round (the study's --min-gain)

    @property
    def baseline(self) -> int:
        return self.trials[0]

    @property
    def complete(self) -> bool:
        return len(self.measured) >= self.repeats * len(self.trials)

    def has(self, round_: int, trial: int) -> bool:
        return any(m.round == round_ and m.trial == trial for m in self.measured)

    def series(self, trial: int) -> list[float | None]:
        """Images/s of ``trial`` in each round (None: failed or not measured yet)."""
        by_round = {m.round: m.images_per_s for m in self.measured if m.trial == trial}
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
            "measured": [vars(m) for m in self.measured],
        }

    @classmethod
    def from_attr(cls, data: Any) -> Finals | None:
        if not isinstance(data, dict) or "trials" not in data:
            return None
        measured = tuple(Repeat(**m) for m in data.get("measured", ()))
        return cls(tuple(data["trials"]), int(data["repeats"]), measured, float(data.get("min_gain", 0.0)))


def finalists(done: Iterable[TrialRecord], count: int) -> tuple[int, ...]:
    """The baseline's trial and the ``count`` fastest feasible trials with other configs than it and each other."""
    trials = list(done)
    base = baseline_trial(trials)
    if base is None or not base.result.ok:
        return ()
    picked: list[TrialRecord] = []
    for r in ranked(trials):
        if r.config != base.config and all(r.config != p.config for p in picked):
            picked.append(r)
    return (base.number, *(r.number for r in picked[:count])) if picked else ()


def stored(study: optuna.Study) -> Finals | None:
    """The finals stored in the study (None before any)."""
    return Finals.from_attr(study.user_attrs.get(ATTR))


Measure = Callable[[Knobs], TrialResult]


def run(
    study: optuna.Study,
    done: list[TrialRecord],
    count: int,
    repeats: int,
    measure: Measure,
    min_gain: float = 0.0,
    begin: Callable[[tuple[int, ...], int], None] = lambda chosen, repeats: None,
    started: Callable[[int, int, TrialRecord], None] = lambda round_, of, record: None,
    finished: Callable[[int, TrialRecord, TrialResult], None] = lambda round_, record, result: None,
) -> Finals | None:
    """Measure the finalists in ``repeats`` interleaved rounds; resumes stored finals of the same finalists.

    None when there is nothing to compare (no baseline measured ok, or no other feasible config).
    ``begin`` hears the finalists before the first measurement still missing (not at all when none is).
    """
    chosen = finalists(done, count)
    if repeats < 2 or not chosen:
        return None
    finals = stored(study)
    if finals is None or finals.trials != chosen or finals.repeats != repeats:
        if finals is not None and finals.measured:  # other finalists now (the study grew): keep what was measured
            study.set_user_attr(PREVIOUS, [*study.user_attrs.get(PREVIOUS, []), finals.to_attr()])
        finals = Finals(chosen, repeats, min_gain=min_gain)
    elif finals.min_gain != min_gain:  # the bar changed, not the measurements
        finals = replace(finals, min_gain=min_gain)
        study.set_user_attr(ATTR, finals.to_attr())

    by_number = {r.number: r for r in done}
    if not finals.complete:
        begin(chosen, repeats)
    for round_ in range(repeats):

        for number in chosen:
            if finals.has(round_, number):
                continue
            record = by_number[number]
            started(round_, repeats, record)
            result = measure(record.result.requested)
            finals = replace(finals, measured=(*finals.measured, Repeat.of(round_, number, result)))
            study.set_user_attr(ATTR, finals.to_attr())
            finished(round_, record, result)
    return finals
