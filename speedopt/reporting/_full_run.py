"""The report's section 3: the projected full run of the baseline and the recommended trial (an estimate,
with its inputs), each projection with a timed validation pass and checkpoint save where the engine can."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import MOSAIC_OFF, Ceiling, ValidationTime
from speedopt.reporting._projection import MosaicOff, Projection, label_build_for, prepare_s_for, project
from speedopt.reporting._text import duration, pct
from speedopt.search import validation_time
from speedopt.study import SearchOutcome, TrialRecord, schema

if TYPE_CHECKING:
    import optuna


def projections(
    study: optuna.Study, result: SearchOutcome, pair: tuple[TrialRecord | None, ...], epochs: int, measure_validation: bool
) -> tuple[dict[int, Projection | None], list[str]]:
    """The full-run estimate of the baseline and the recommended trial, each with a timed validation pass."""
    p = result.protocol
    assert p is not None
    out: dict[int, Projection | None] = {}
    notes = []
    engine = p.engine_spec.engine
    if measure_validation and not engine.supports_validation_timing:
        notes.append(f"the {p.engine} engine cannot time a validation pass: validation is left out of the totals")
        measure_validation = False
    finals = result.finals
    off = engine.mosaic_off_epochs(epochs)
    for r in pair:
        if r is None or not r.result.ok or r.number in out:
            continue
        median, rounds = finals.median(r.number) if finals else (None, 0)
        run, rounds_of = r.result, "finals"
        decision, mode = result.compile, result.compiled
        if decision is not None and mode is not None and r.number == decision.trial:  # it trains compiled: those rounds
            median, rounds = decision.median(decision.modes.index(mode) + 1)
            run, rounds_of = replace(run, config=replace(run.config, compile=mode), compile_s=decision.cost(mode)), "compiled"
        val_s = save_s = None
        if measure_validation:
            timed = validation_time(study, p, r.config)
            if isinstance(timed, ValidationTime):
                val_s, save_s = timed.seconds, timed.save_s
            else:
                notes.append(f"validation for trial {r.number} could not be timed: {timed.status.value}: {timed.message}")
        out[r.number] = project(
            run, epochs, val_s, median, rounds, rounds_of=rounds_of, labels=label_build_for(study, p, r.config),
            prepare_s=prepare_s_for(p, r.config), save_s=save_s, mosaic=mosaic_off_of(study, r.config, off), mosaic_epochs=off,
            warmup=engine.warmup_steps(run.images_total or 0, run.config.batch, epochs) if run.images_total else None,
        )
    return out, notes


def mosaic_off_of(study: optuna.Study, knobs: Knobs, epochs: int) -> MosaicOff | None:
    """The loader of ``knobs`` measured with mosaic on (its data ceiling) and off, where the study holds both ok."""
    if not epochs:
        return None
    known = schema.read_ceilings(study)
    on, off = known.get(Ceiling.name_for("data", knobs)), known.get(Ceiling.name_for(MOSAIC_OFF, knobs))
    if on is None or off is None or not (on.ok and off.ok) or not on.images_per_s or not off.images_per_s:
        return None
    return MosaicOff(epochs, on.images_per_s, off.images_per_s)


def projection_section(epochs: int, pb: Projection | None, pr: Projection | None, notes: list[str], certain: bool) -> list[str]:
    """Section 3: the two projections side by side, the time saved (claimed only when ``certain``), their inputs."""
    lines = [f"## 3. Projected full run ({epochs} epochs, full train set) — an estimate", ""]
    lines += ["| estimate | baseline | recommended |", "|---|---|---|"]

    def row(label: str, get: Callable[[Projection], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(get(p) if p else "-" for p in (pb, pr)) + " |")

    row("one-time dataset build (prepare + scan + cache)", lambda p: duration(p.build_s))
    if any(p and p.compile_s for p in (pb, pr)):
        row("torch.compile, once per run (measured in the trial)", lambda p: duration(p.compile_s))
    row("train time per epoch", lambda p: duration(p.epoch_train_s))
    if any(p and p.epoch_train_off_s is not None for p in (pb, pr)):
        row("train time per mosaic-off epoch (the last close_mosaic, an estimate)",
            lambda p: duration(p.epoch_train_off_s) if p.epoch_train_off_s is not None else "-")
    row("validation per epoch", lambda p: duration(p.val_s))
    row("checkpoint saves per epoch (last.pt + best.pt, upper bound)", lambda p: "-" if p.save_s is None else f"{p.save_s:.2f} s")
    row(f"total for {epochs} epochs", lambda p: duration(p.total_s))
    row("share of the run in validation", lambda p: pct(p.share("validation")) if p.val_s is not None else "-")
    row("share of the run in checkpoint saves", lambda p: pct(p.share("checkpoint saves")) if p.save_s is not None else "-")
    if pb and pr and certain:
        lines.append(f"| time saved | | {duration(pb.total_s - pr.total_s)} ({100 * (1 - pr.total_s / pb.total_s):.0f}%) |")
    elif pb and pr:
        lines.append("| time saved | | not claimed: no speedup certified by the finals |")
    lines.append("")
    for label, p in (("baseline", pb), ("recommended", pr)):
        if p:
            lines.append(f"Inputs ({label}): " + "; ".join(p.basis) + ".")
    advice = sorted({n for p in (pb, pr) if p for n in p.notes})
    return lines + [f"- {n}" for n in notes + advice] + [""]
