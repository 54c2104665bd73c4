"""A search's ceilings: found in its study, or measured now and stored there at once.

Each ceiling is measured once per key (:func:`speedopt.measure.measure_ceilings`) and kept in the study,
so workers, resumes and the report share them. A search measures them for three uses: ranking the
space before the trials (:mod:`speedopt.search._rank`), stopping at the ceiling
(:func:`speedopt.search._stop.stop_at_ceiling`), and, after the finals, the ends: the ceilings of the
baseline and of the recommendation, for the report (:func:`ends`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt import engines
from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, Ceilings, TrialRequest, TrialResult, measure_ceilings
from speedopt.search._objective import Inputs, measure, request_for
from speedopt.search._plan import SearchPlan
from speedopt.search._view import View
from speedopt.study import baseline_trial, best_trial, records, schema

if TYPE_CHECKING:
    import optuna

Prepare = Callable[[Knobs], "TrialRequest | TrialResult"]
Measure = Callable[[TrialRequest], TrialResult]


def found_or_measured(study: optuna.Study, knobs: Knobs, prepare: Prepare, run: Measure) -> Ceilings:
    """The ceilings of ``knobs`` (as run): found in the study, or measured now and stored there at once."""

    def save(name: str, ceiling: Ceiling) -> None:
        schema.write_ceiling(study, name, ceiling)

    return measure_ceilings(knobs, prepare, run, schema.read_ceilings(study), save)


def ceilings_of(plan: SearchPlan, study: optuna.Study, knobs: Knobs, view: View, inputs: Inputs) -> Ceilings | None:
    """The ceilings of ``knobs`` (as run), found in the study or measured now (None: the engine has none, or
    a multi-GPU config: ceilings are measured on one GPU)."""
    p = plan.protocol
    if knobs.gpus > 1 or not engines.get(p.engine, yolov5_dir=p.yolov5_dir).supports_ceilings:
        return None
    return found_or_measured(
        study, knobs, lambda asked: request_for(plan, asked, inputs), lambda request: measure(plan, request, view, inputs)
    )


def ends(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs) -> None:
    """The ceilings of the baseline's and the recommended config, for the report (found, or measured now)."""
    done = records(study)
    base = baseline_trial(done)
    finals = schema.read_finals(study)
    choice = finals.decision().choice if finals is not None and finals.complete else None
    pick = next((r for r in done if r.number == choice), None) if choice is not None else best_trial(done)
    chosen = {r.number: r for r in (base, pick) if r is not None and r.result.ok}
    if not chosen:
        return
    view.note("the data and compute ceilings of the baseline and the recommendation (found, or measured now)")
    for record in chosen.values():
        ceilings_of(plan, study, record.config, view, inputs)
    schema.write_ceilings_for(study, base.number if base else None, pick.number if pick else None)
