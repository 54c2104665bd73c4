"""The ends of a search: after the finals, what its report reads, measured while the search's warm worker runs.

The report places the baseline and the recommended config against their ceilings and projects each one's
full run with a timed validation pass (and the checkpoint save after it). Measured here, inside the
search, each job forks from the warm worker that already imported the trainer; measured by the report
afterwards, each would start a fresh Python (about 6 s of imports here). Both are stored in the study,
so the report, a resume and a second report find them (:func:`validation_time` times one only when the
study has none).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt import defaults
from speedopt.data import load
from speedopt.knobs import Knobs
from speedopt.measure import Ceilings, JobOutcome, ValidateJob, ValidationTime, no_new_npy, run_job
from speedopt.offline import cache_dir
from speedopt.search._ceilings import ceilings_of, mosaic_off_of
from speedopt.search._claim import Claim
from speedopt.search._objective import Inputs
from speedopt.search._plan import SearchPlan
from speedopt.search._rank import Kind
from speedopt.search._stage import SearchContext, Stage
from speedopt.search._view import View
from speedopt.study import StudyProtocol, best_trial, records, schema
from speedopt.study.record_types import baseline_trial

if TYPE_CHECKING:
    import optuna


def ends(plan: SearchPlan, study: optuna.Study, view: View, inputs: Inputs) -> None:
    """The ceilings and a timed validation pass of the baseline's and the recommended config (found, or measured now)."""
    done = records(study)
    base = baseline_trial(done)
    finals = schema.read_finals(study)
    choice = finals.decision().choice if finals is not None and finals.complete else None
    pick = next((r for r in done if r.number == choice), None) if choice is not None else best_trial(done)
    chosen = {r.number: r for r in (base, pick) if r is not None and r.result.ok}
    if not chosen:
        return
    p = plan.protocol
    view.note("the data and compute ceilings of the baseline and the recommendation (found, or measured now)")
    for record in chosen.values():
        found = ceilings_of(plan, study, record.config, view, inputs)
        speed = finals.median(record.number)[0] if finals is not None and record.number in finals.trials else None
        again = beaten(found, speed or record.images_per_s, record.result.ci_rel)
        if found is not None and again:
            view.note(
                f"trial {record.number} measured {speed or record.images_per_s or 0:.1f} images/s, above its {again[0]} ceiling "
                f"{found.bound or 0:.1f} images/s beyond both intervals: that ceiling is measured again now, beside the finals "
                "(a ceiling is one short job at one moment; on a shared machine the load moves between jobs)"
            )
            ceilings_of(plan, study, record.config, view, inputs, kinds=again, fresh=True)
    engine = p.engine_spec.engine
    off = engine.mosaic_off_epochs(p.epochs)
    if off:
        view.note(f"the loader with mosaic off, as the trainer runs the last {off} epochs (found, or measured now), for the projection")
        for record in chosen.values():
            mosaic_off_of(plan, study, record.config, view, inputs)
    schema.write_ceilings_for(study, base.number if base else None, pick.number if pick else None)
    if engine.supports_validation_timing:
        view.note("timing one validation pass for the baseline and the recommendation, for the report's projection")
        for record in chosen.values():
            validation_time(study, p, record.config, run=inputs.runner.job)  # a failure is stored nowhere: the report says why


def beaten(found: Ceilings | None, images_per_s: float | None, ci_rel: float | None) -> tuple[Kind, ...]:
    """The ceiling (its kind) that a config's figure lies above beyond both intervals (:meth:`Ceilings.fault`): it
    was measured at another moment than the figure (the ranking's or the stop rule's job, minutes before the finals),
    so the ends measure it again beside the finals. Empty: the ceilings hold (or were not both measured)."""
    if found is None or found.binding is None or found.fault(images_per_s, ci_rel) is None:
        return ()
    return (found.binding,)


def _val_digest(protocol: StudyProtocol, knobs: Knobs) -> str:
    parts: list[object] = [protocol.dataset.id, protocol.device, knobs.model, knobs.imgsz, knobs.batch, knobs.amp, knobs.cache]
    if knobs.data == "resized":  # validation on the copy: its own images
        parts.append(protocol.data_yaml(knobs))
    material = json.dumps(parts)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


class EndsStage(Stage):
    """The ceilings and a timed validation pass of the baseline's and the recommended config, where the plan asks."""

    name = "ends"

    def wanted(self, ctx: SearchContext) -> bool:
        return ctx.plan.ends

    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        ends(ctx.plan, ctx.study, ctx.view, ctx.inputs)


def validation_time(
    study: optuna.Study, protocol: StudyProtocol, knobs: Knobs, timeout_s: float = defaults.VALIDATION_TIMEOUT_S,
    run: Callable[[ValidateJob, str], JobOutcome] = run_job,
) -> JobOutcome | ValidationTime:
    """One validation pass (and the checkpoint save after it) for these knobs on this machine: from the
    study attrs, else timed now.

    Timed with the config's cache mode: the trainer caches the val split too, and a cached val set
    validates faster (1920x1080 PNGs: 3.5 s uncached for a pass the real run made in about half that).
    Stored in the study's user attrs, so a report is cheap the second time. Returns the time, or the
    job's outcome when it could not be timed (its status and message say why). ``run`` runs the job (a search's
    :meth:`~speedopt.search.Runner.job`).
    """
    digest = _val_digest(protocol, knobs)
    stored = schema.read_val_time(study, digest)
    if stored is not None:
        return ValidationTime(stored["val_s"], stored["val_images"], stored["save_s"])
    job = ValidateJob(
        **protocol.engine_spec.record(),
        data_yaml=protocol.data_yaml(knobs),
        knobs=knobs,
        device=protocol.device,
        timeout_s=timeout_s,
        cache_dir=str(cache_dir()),
        weights=protocol.quality.weights,
    )
    images = []
    if knobs.cache == "disk":  # the timing run trains one batch first: its train images get .npy files too
        ds = load(protocol.data_yaml(knobs))
        images = [*ds.train_images, *ds.val_images]
    with no_new_npy(images):
        outcome = run(job, study.study_name)

    timed = outcome.validation()
    if timed is None:
        return outcome
    schema.write_val_time(
        study, digest, {"status": outcome.status.value, "val_s": timed.seconds, "val_images": timed.images, "save_s": timed.save_s}
    )
    return timed
