"""One stored trial as a typed record, and the one definition of "the best trial".

A study keeps each trial's measurement and verdict as Optuna user attrs (so the dashboard shows
them): the few a person reads first under their own names (:data:`SHOWN`), the rest in two JSON attrs
(``measurement``, ``accuracy``); :func:`flat_attrs` spreads them again. :class:`TrialRecord` reads them back once, with a :class:`~speedopt.status.Status` and a
:class:`~speedopt.quality.Feasibility`. Every part of speedopt that asks which trial is best (search,
report, ``speedopt best``, the dashboard, warm start) asks :func:`best_trial` or :func:`ranked`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.quality import Feasibility
from speedopt.status import Status

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


SHOWN = ("status", "images_per_s", "data_wait_fraction", "config", "feasible", "map_loss")
MEASUREMENT = "measurement"  # the rest of the trial's TrialResult, one JSON attr
ACCURACY = "accuracy"  # the rest of its accuracy verdict


def _long(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict)) or (isinstance(value, str) and len(value) > 80)


def _split(values: Mapping[str, Any], rest: str) -> dict[str, Any]:
    """``values`` as stored: the :data:`SHOWN` keys under their names, every other key inside ``rest``,
    its figures before its lists and long texts (the dashboard shows the first 1,024 characters)."""
    inside = sorted(((k, v) for k, v in values.items() if k not in SHOWN), key=lambda kv: _long(kv[1]))
    return {**{k: v for k, v in values.items() if k in SHOWN}, rest: dict(inside)}


def measurement_attrs(measured: Mapping[str, Any]) -> dict[str, Any]:
    """The user attrs that store a trial's measurement (a :meth:`TrialResult.to_dict`)."""
    return _split(measured, MEASUREMENT)


def verdict_attrs(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The user attrs that store a trial's accuracy verdict (a :meth:`Verdict.attrs`)."""
    return _split(verdict, ACCURACY)


def flat_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's user attrs with ``measurement`` and ``accuracy`` spread into one flat dict (the form of
    the trial table and of studies written before those two attrs existed, which read the same)."""
    nested = {**(attrs.get(MEASUREMENT) or {}), **(attrs.get(ACCURACY) or {})}
    return {**nested, **{k: v for k, v in attrs.items() if k not in (MEASUREMENT, ACCURACY)}}


def _feasibility(status: Status, stored: Any) -> Feasibility:
    """The stored ``feasible`` attr (true, false, "unknown") as a Feasibility.

    A trial measured ok without a verdict (its process died between the two) counts as unprobed:
    an unjudged config is never recommended.
    """
    if status is not Status.OK:
        return Feasibility.NOT_MEASURED
    if stored is True:
        return Feasibility.FEASIBLE
    if stored is False:
        return Feasibility.REJECTED
    return Feasibility.UNPROBED


@dataclass(frozen=True)
class TrialRecord:
    """A completed speedopt trial: its measurement, its accuracy verdict and its place in the study."""

    number: int
    result: TrialResult
    feasibility: Feasibility
    role: str | None = None  # "baseline", "warm-start" or None (sampled)
    source_trial: int | None = None  # warm start: the source study's trial
    signature: dict[str, Any] | None = None
    probe_map50: float | None = None
    probe_map50_95: float | None = None
    map_loss: float | None = None
    allowed_map_loss: float | None = None
    map_spread: float | None = None
    baseline_map50_95: float | None = None
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
        if trial.state != TrialState.COMPLETE or "status" not in attrs or "config" not in attrs:
            return None
        result = TrialResult.from_dict(attrs)
        return cls(
            number=trial.number,
            result=result,
            feasibility=_feasibility(result.status, attrs.get("feasible")),
            role=attrs.get("role"),
            source_trial=attrs.get("source_trial"),
            signature=attrs.get("signature"),
            probe_map50=attrs.get("probe_map50"),
            probe_map50_95=attrs.get("probe_map50_95"),
            map_loss=attrs.get("map_loss"),
            allowed_map_loss=attrs.get("allowed_map_loss"),
            map_spread=attrs.get("map_spread"),
            baseline_map50_95=attrs.get("baseline_map50_95"),
            probes_run=int(attrs.get("probes_run") or 0),
            probe_cache_hits=int(attrs.get("probe_cache_hits") or 0),
            quality_reason=str(attrs.get("quality_reason") or ""),
            started=trial.datetime_start,
            completed=trial.datetime_complete,
            params=dict(trial.params),
        )


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
