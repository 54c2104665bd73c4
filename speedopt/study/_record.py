"""One stored trial as a typed record, and the one definition of "the best trial".

A study keeps each trial's measurement and verdict as Optuna user attrs (so the dashboard shows
them; the layout is :mod:`speedopt.study._schema`'s). :class:`TrialRecord` reads them back once, with a
:class:`~speedopt.status.Status` and a :class:`~speedopt.quality.Feasibility`. Every part of speedopt that
asks which trial is best (search, report, ``speedopt best``, the dashboard, warm start) asks
:func:`best_trial` or :func:`ranked`; the finals' finalists are :func:`finalists`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.quality import Feasibility
from speedopt.status import Status
from speedopt.study._schema import CONFIG, FEASIBLE, ROLE, SOURCE_TRIAL, STATUS, flat_attrs

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def _feasibility(result: TrialResult, stored: Any, verdict: Any = None) -> Feasibility:
    """The stored ``feasible`` attr (true, false, "unknown") as a Feasibility; a ``verdict`` of "unknown"
    (the probe budget could not tell signatures apart) is told apart from "unprobed" (studies since 28).

    A trial measured ok without a verdict (its process died between the two) counts as unprobed:
    an unjudged config is never recommended; one stored ok without a throughput (a NaN read as none) is not measured.
    """
    if not result.ok:
        return Feasibility.NOT_MEASURED
    if verdict == Feasibility.UNKNOWN.value and stored == "unknown":
        return Feasibility.UNKNOWN
    if stored is True:
        return Feasibility.FEASIBLE
    if stored is False:
        return Feasibility.REJECTED
    return Feasibility.UNPROBED


def _seconds(stored: Any) -> dict[str, float]:
    """A stored ``probe_seconds`` attr, as far as it is a mapping of names to numbers (older studies: none)."""
    if not isinstance(stored, dict):
        return {}
    return {str(k): float(v) for k, v in stored.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _number(stored: Any) -> float | None:
    """A stored number attr (None when absent or not a number: older studies, or an import)."""
    return float(stored) if isinstance(stored, int | float) and not isinstance(stored, bool) else None


@dataclass(frozen=True)
class TrialRecord:
    """A completed speedopt trial: its measurement, its accuracy verdict and its place in the study."""

    number: int
    result: TrialResult
    feasibility: Feasibility
    role: str | None = None  # "baseline", "prepared", "warm-start", "ceiling-rank" or None (sampled)
    source_trial: int | None = None  # warm start: the source study's trial
    signature: dict[str, Any] | None = None
    probe_map50: float | None = None
    probe_map50_95: float | None = None
    map_loss: float | None = None
    allowed_map_loss: float | None = None
    map_spread: float | None = None
    baseline_map50_95: float | None = None
    baseline_spread: float | None = None  # the baseline seeds' range (map_spread: the loss interval's half-width)
    probe_epochs: int | None = None  # the budget the verdict was judged at (it may have grown from the asked one)
    probe_fraction: float | None = None
    probe_seconds: dict[str, float] = field(default_factory=dict)  # wall time of the probes it ran, by signature
    probe_estimate_s: float | None = None  # what those probes were estimated to cost before they ran
    saving_s: float | None = None  # what its measured speedup would save over the user's run (estimate)
    confirm_risk: float | None = None  # the share of the stated risk its confirmation spent (None: never confirmed)
    run_map_loss: float | None = None  # the loss its confirmation predicts at the run's length
    probes_run: int = 0
    probe_cache_hits: int = 0
    quality_reason: str = ""
    started: dt.datetime | None = None
    completed: dt.datetime | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        return self.result.status

    @property
    def config(self) -> Knobs:
        return self.result.config

    @property
    def images_per_s(self) -> float | None:
        return self.result.images_per_s

    @property
    def ok_and_feasible(self) -> bool:
        """Measured ok and judged to keep accuracy: the only trials that may be recommended."""
        return self.result.ok and self.feasibility is Feasibility.FEASIBLE

    @property
    def is_baseline(self) -> bool:
        return self.role == "baseline"

    @classmethod
    def from_frozen(cls, trial: FrozenTrial) -> TrialRecord | None:
        """The record of a COMPLETE trial that holds a measurement (None for any other trial)."""
        from optuna.trial import TrialState

        attrs = flat_attrs(trial.user_attrs)
        if trial.state != TrialState.COMPLETE or STATUS not in attrs or CONFIG not in attrs:
            return None
        result = TrialResult.from_dict(attrs)
        return cls(
            number=trial.number,
            result=result,
            feasibility=_feasibility(result, attrs.get(FEASIBLE), attrs.get("verdict")),
            role=attrs.get(ROLE),
            source_trial=attrs.get(SOURCE_TRIAL),
            signature=attrs.get("signature"),
            probe_map50=attrs.get("probe_map50"),
            probe_map50_95=attrs.get("probe_map50_95"),
            map_loss=attrs.get("map_loss"),
            allowed_map_loss=attrs.get("allowed_map_loss"),
            map_spread=attrs.get("map_spread"),
            baseline_map50_95=attrs.get("baseline_map50_95"),
            baseline_spread=attrs.get("baseline_spread"),
            probe_epochs=attrs.get("probe_epochs"),
            probe_fraction=attrs.get("probe_fraction"),
            probe_seconds=_seconds(attrs.get("probe_seconds")),
            probe_estimate_s=_number(attrs.get("probe_estimate_s")),
            saving_s=_number(attrs.get("saving_s")),
            confirm_risk=_number(attrs.get("confirm_risk")),
            run_map_loss=_number(attrs.get("run_map_loss")),
            probes_run=int(attrs.get("probes_run") or 0),
            probe_cache_hits=int(attrs.get("probe_cache_hits") or 0),
            quality_reason=str(attrs.get("quality_reason") or ""),
            started=trial.datetime_start,
            completed=trial.datetime_complete,
            params=dict(trial.params),
        )


def measured_pruned(trial: FrozenTrial) -> bool:
    """A trial the pruner stopped part-way: it ran the trainer (it reported steps), so it spent budget. A config
    skipped before it ran (measured before, hopeless, the study full) reported nothing and spent none."""
    from optuna.trial import TrialState

    return trial.state == TrialState.PRUNED and bool(trial.intermediate_values)


def records(study: optuna.Study) -> list[TrialRecord]:
    """Every completed trial of the study that holds a measurement, in trial order."""
    out = [TrialRecord.from_frozen(t) for t in study.get_trials(deepcopy=False)]
    return [r for r in out if r is not None]


def ranked(trials: Iterable[TrialRecord]) -> list[TrialRecord]:
    """The trials that may be recommended (measured ok and feasible), fastest first; ties: earliest."""
    eligible = [r for r in trials if r.ok_and_feasible]
    return sorted(eligible, key=lambda r: (-(r.images_per_s or 0.0), r.number))


def best_trial(trials: Iterable[TrialRecord]) -> TrialRecord | None:
    """THE best trial: the fastest measured ok and judged feasible (None when there is none)."""
    ranking = ranked(trials)
    return ranking[0] if ranking else None


def baseline_trial(trials: Iterable[TrialRecord]) -> TrialRecord | None:
    """The study's baseline (trial 0 in a speedopt study)."""
    return next((r for r in trials if r.is_baseline), None)


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
