"""The report's ceilings: how close the baseline and the recommendation come to what this machine could do.

For each, the two ceilings the study measured (:mod:`speedopt.measure._ceilings`): the data ceiling (the
trainer's train loader alone) and the compute ceiling (the trainer's steps alone, on one batch kept on
the device). A config reaches min(data, compute) only when loading overlaps computing (dataloader
workers); with ``workers=0`` the two run one after the other, so 1 / (1/data + 1/compute) is what it
can reach, which the section gives too. The lower ceiling binds, and names the lever: data speed
(workers, cache, a resized copy) or compute speed (AMP, model, image size, frozen layers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedopt.knobs import knobs_text
from speedopt.measure import Ceiling, Ceilings
from speedopt.search import ceilings_of_config, headroom_of
from speedopt.study import SearchOutcome, TrialRecord, schema

if TYPE_CHECKING:
    import optuna

_LEVER = {
    "data": "data speed binds: more workers, a cache, a resized copy (`speedopt prepare`) raise it",
    "compute": "compute binds: AMP, a smaller model or image size, frozen layers raise it; the data side has room",
}


def _speed(record: TrialRecord, result: SearchOutcome) -> tuple[float | None, str]:
    """The config's images/s: the median of its finals rounds when it was re-measured, else its trial's."""
    if result.finals is not None:
        median, rounds = result.finals.median(record.number)
        if median is not None:
            return median, f"median of {rounds} finals rounds"
    return record.images_per_s, "its trial"


def _cell(ceiling: Ceiling | None) -> str:
    if ceiling is None:
        return "not measured"
    return f"{ceiling.images_per_s:.1f}" if ceiling.ok else ceiling.status.value


def serial(ceilings: Ceilings) -> float | None:
    """1 / (1/data + 1/compute): the most a config without loader workers can reach (loading, then computing)."""
    d, c = ceilings.data, ceilings.compute
    if d is None or c is None or not (d.ok and c.ok) or not d.images_per_s or not c.images_per_s:
        return None
    return 1.0 / (1.0 / d.images_per_s + 1.0 / c.images_per_s)


def bound_section(study: optuna.Study, result: SearchOutcome) -> list[str]:
    """The report's summary of what bounded the search: the recommended config's share of min(its ceilings), its
    trial's share of the device's dense peak, and the levers left (:func:`speedopt.search.headroom_of`)."""
    chosen = result.recommended
    if chosen is None or result.protocol is None:
        return []
    speed, basis = _speed(chosen, result)
    line = headroom_of(result.protocol, chosen.result, speed, ceilings_of_config(study, chosen.config))
    r = chosen.result
    flops = f"{r.gflops_per_image:.3g} GFLOPs, {r.flops_basis}" if r.gflops_per_image else (r.flops_basis or "not recorded")
    peak = (f"the share of the peak is per GPU: its trial's images/s x those FLOPs / {r.peak_basis}" if r.peak_share is not None
            else r.peak_unknown or "its share of the peak not recorded")
    return [
        f"**What bounded the search** (the recommended config, trial {chosen.number}, at {speed or 0:.1f} images/s, {basis}): {line}.", "",
        f"_Model FLOPs per trained image: {flops}; {peak}; GPU busy (NVML) is in the table above._", "",
    ]


def ceilings_section(study: optuna.Study, result: SearchOutcome) -> list[str]:
    """``## Ceilings``: the baseline's and the recommendation's, as % of min(ceilings); nothing when none was measured."""
    ends = schema.read_ceilings_for(study)
    by_number = {r.number: r for r in result.trials}
    rows: list[tuple[str, TrialRecord, Ceilings]] = []
    for role in ("baseline", "recommended"):
        number = ends.get(role)
        record = by_number.get(number) if isinstance(number, int) else None
        if record is None or (role == "recommended" and rows and rows[0][1].number == record.number):
            continue
        rows.append((role, record, ceilings_of_config(study, record.config)))
    ranking = schema.read_ranking(study)
    ranked = [] if ranking is None else [f"- Ceiling ranking: {ranking.message}" + (f" ({ranking.wall_s:.0f} s of ceiling jobs)." if ranking.ran else ".")]
    ranked += [f"  - bound {top:.1f} images/s: `{knobs_text(knobs)}`" for knobs, top in (ranking.enqueued if ranking else ())]
    if not rows:
        return ["## Ceilings", "", *ranked, ""] if ranking is not None and ranking.ran else []
    lines = [
        "## Ceilings: how far from what this machine could do", "",
        "Data ceiling: images/s of the trainer's own train loader alone (same workers, cache, imgsz, batch, augmentation), "
        "no model step. Compute ceiling: images/s of the trainer's own forward, backward and optimizer steps (same model, "
        "imgsz, batch, AMP, freeze) on its first batches kept on the device, no loader. Each is one short job of the real trainer; "
        "a training run cannot beat min(data, compute), and reaches it only when loading overlaps computing.", "",
        "| | config | images/s | data ceiling | compute ceiling | % of min(ceilings) | binds | workers=0 bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for role, record, found in rows:
        speed, basis = _speed(record, result)
        share = found.share(speed)
        one = serial(found)
        lines.append(
            f"| {role} (trial {record.number}) | `{knobs_text(record.config)}` | {speed or 0:.1f} ({basis}) | {_cell(found.data)} | "
            f"{_cell(found.compute)} | {'' if share is None else f'{100 * share:.0f}%'} | {found.binding or ''} | "
            f"{'' if one is None or record.config.workers else f'{one:.1f}'} |"
        )
        fault = found.fault(speed, record.result.ci_rel)
        if fault is not None:
            notes.append(f"- {role}: {fault}.")
        elif found.binding:
            notes.append(f"- {role}: {_LEVER[found.binding]}.")
    spent = [c for c in schema.read_ceilings(study).values() if c.wall_s]
    lines += ["", *notes]
    if spent:
        lines.append(
            f"- The study measured {len(spent)} ceiling(s) ({sum(c.wall_s or 0 for c in spent):.0f} s in all, set-up included); "
            "the workers=0 bound applies where the loader has no workers (loading and computing take turns)."
        )
    lines += ranked
    stopped = result.stopped or ""
    if "min(ceilings)" in stopped or "from their ceilings" in stopped:
        lines.append(f"- The search stopped early: {stopped}.")
    return [*lines, ""]
