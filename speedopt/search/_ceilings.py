"""A search's ceilings: found in its study, or measured now and stored there at once.

Each ceiling is measured once per key (:func:`speedopt.measure.measure_ceilings`) and kept in the study,
so workers, resumes and the report share them (:func:`of_config` reads them back: the report's ceilings). A
search measures them for three uses: ranking the
space before the trials (:mod:`speedopt.search._rank`), stopping at the ceiling
(:func:`speedopt.search._ceiling_stop.stop_at_ceiling`), and, after the finals, the ends: the ceilings of the
baseline and of the recommendation, for the report (:func:`speedopt.search._ends.ends`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, Ceilings, TrialRequest, TrialResult, measure_ceilings, measure_mosaic_off
from speedopt.search._objective import Inputs, measure, request_for
from speedopt.search._plan import SearchPlan
from speedopt.search._rank import Kind
from speedopt.search._view import View
from speedopt.study import schema

if TYPE_CHECKING:
    import optuna

Prepare = Callable[[Knobs], "TrialRequest | TrialResult"]
Measure = Callable[[TrialRequest], TrialResult]


def of_config(study: optuna.Study, knobs: Knobs) -> Ceilings:
    """The stored ceilings of ``knobs`` (as run); either may be None when not measured."""
    found = schema.read_ceilings(study)
    return Ceilings(found.get(Ceiling.name_for("data", knobs)), found.get(Ceiling.name_for("compute", knobs)))


def found_or_measured(
    study: optuna.Study, knobs: Knobs, prepare: Prepare, run: Measure, kinds: tuple[Kind, ...] | None = None, fresh: bool = False
) -> Ceilings:
    """The ceilings of ``knobs`` (as run; both, or ``kinds``): found in the study, or measured now and stored there at
    once (``fresh``: measured now whatever the study holds, and stored in its place)."""

    def save(name: str, ceiling: Ceiling) -> None:
        schema.write_ceiling(study, name, ceiling)

    return measure_ceilings(knobs, prepare, run, {} if fresh else schema.read_ceilings(study), save, kinds)


def ceilings_of(
    plan: SearchPlan, study: optuna.Study, knobs: Knobs, view: View, inputs: Inputs, kinds: tuple[Kind, ...] | None = None,
    fresh: bool = False,
) -> Ceilings | None:
    """The ceilings of ``knobs`` (as run; both, or ``kinds``), found in the study or measured now (``fresh``: now
    whatever it holds) (None: the engine has none, or a multi-GPU config: ceilings are measured on one GPU)."""
    p = plan.protocol
    if knobs.gpus > 1 or not p.engine_spec.engine.supports_ceilings:
        return None
    return found_or_measured(
        study, knobs, lambda asked: request_for(plan, asked, inputs), lambda request: measure(plan, request, view, inputs), kinds,
        fresh,
    )


def mosaic_off_of(plan: SearchPlan, study: optuna.Study, knobs: Knobs, view: View, inputs: Inputs) -> Ceiling | None:
    """The loader of ``knobs`` (as run) with mosaic off, for the projection of the run's last epochs: found in the
    study or measured now and stored there (None: the engine turns mosaic off in no epoch, or has no ceilings)."""
    p = plan.protocol
    engine = p.engine_spec.engine
    if knobs.gpus > 1 or not engine.supports_ceilings or not engine.mosaic_off_epochs(p.epochs):
        return None

    def save(name: str, ceiling: Ceiling) -> None:
        schema.write_ceiling(study, name, ceiling)

    return measure_mosaic_off(
        knobs, lambda asked: request_for(plan, asked, inputs), lambda request: measure(plan, request, view, inputs),
        schema.read_ceilings(study), save,
    )
