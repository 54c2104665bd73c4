"""The report's analysis: section 6 (what limits each trial's speed) and section 7 (which searched knobs
matter for images/s, and the figures that show it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from speedopt.knobs import value_text
from speedopt.reporting import _figures as figures
from speedopt.reporting._bottleneck import bottleneck_of
from speedopt.reporting._images import images_for, prepare_gain
from speedopt.reporting._projection import Projection, project
from speedopt.reporting._text import cell
from speedopt.study import SearchOutcome, StudyProtocol, TrialRecord

if TYPE_CHECKING:
    import optuna
    import pandas as pd


def bottlenecks_section(p: StudyProtocol, done: list[TrialRecord], projections: dict[int, Projection | None], epochs: int) -> list[str]:
    """Section 6: each trial's bottleneck, its evidence and the knob to turn first; the baseline's in words."""
    lines = ["## 6. Bottlenecks", "", "| # | bottleneck | evidence | turn first |", "|---|---|---|---|"]
    for r in done:
        d = bottleneck_of(
            r.result, p.machine, projections.get(r.number) or project(r.result, epochs, None), images_for(p, r.result),
            prepare_gain(done, r.config),
        )
        lines.append(f"| {r.number} | {d.kind} | {cell(d.evidence)} | {d.advice} |")
    base = next((r for r in done if r.is_baseline), None)
    if base is not None:
        d = bottleneck_of(base.result, p.machine, projections.get(base.number), images_for(p, base.result), prepare_gain(done, base.config))
        lines += ["", f"**Baseline:** {d.kind}: {d.evidence}. What to change first: {d.advice}."]
    return lines + [""]


def importance_section(study: optuna.Study, done: list[TrialRecord], outside: dict[int, str]) -> list[str]:
    """Optuna's importance of each searched knob, from the ok trials as they ran; a trial that is no point of
    the space (the baseline on another model, say) is left out and named: it would skew every knob's share."""
    import optuna

    lines = ["## 7. Parameter importance and figures", ""]
    placed = {r.number: r for r in done if r.result.ok and r.number not in outside}
    left_out = [f"trial {r.number} ({outside[r.number]})" for r in done if r.result.ok and r.number in outside]
    note = [f"Left out of the importance: {'; '.join(left_out)}.", ""] if left_out else []
    ok = [t for t in study.get_trials(deepcopy=False) if t.number in placed and t.params]
    if len(ok) < 3:
        return lines + [f"only {len(ok)} trials measured ok in the searched space: too few for parameter importance", ""] + note
    scratch = optuna.create_study(direction="maximize")
    for t in ok:
        as_run = placed[t.number].config.to_dict()  # the knobs as they ran (the trainer may have changed some)
        params = {k: as_run.get(k, v) for k, v in t.params.items()}
        scratch.add_trial(optuna.trial.create_trial(params=params, distributions=t.distributions, value=t.value))
    try:
        imp = optuna.importance.get_param_importances(scratch)
    except (RuntimeError, ValueError) as exc:
        return lines + [f"parameter importance unavailable: {exc}", ""] + note
    return lines + ["Importance of each searched knob for images/s (Optuna's default evaluator, ok trials in the searched "
                    "space, knobs as they ran):", "", "| knob | importance |", "|---|---|"] + [
        f"| {k} | {v:.3f} |" for k, v in imp.items()] + [""] + note


def report_figures(
    table: pd.DataFrame, p: StudyProtocol, result: SearchOutcome, folder: Path, outside: frozenset[int] = frozenset()
) -> list[tuple[str, Path]]:
    """The figures that have something to show, with their titles; a stale one from an earlier report is removed."""
    searched = list(p.space.sampled())
    threshold = None
    if result.probed and result.reference_map50_95 is not None:
        ref, spread = result.reference_map50_95, result.probed[0].spread or 0.0
        threshold = ref - p.quality.limit.allowed(ref) - spread
    labels = {r.number: _label(r, result.baseline) for r in result.trials}
    drawn = {
        "optimisation history": figures.history(table, folder / "history.png"),
        "throughput against each knob": figures.knobs(table, searched, folder / "knobs.png", outside),
        "speed vs mAP50-95": figures.speed_vs_map(table, threshold, folder / "speed_vs_map.png"),
        "finals": figures.finals(result.finals, labels, folder / "finals.png") if result.finals else None,
    }
    for name in ("knobs.png", "speed_vs_map.png", "finals.png"):
        if (folder / name) not in drawn.values():
            (folder / name).unlink(missing_ok=True)
    return [(title, fig) for title, fig in drawn.items() if fig is not None]


def _label(record: TrialRecord, base: TrialRecord | None) -> str:
    """``trial 2\\ncache=disk``: a trial by the knobs it changes from the baseline."""
    if base is None or record.number == base.number:
        return f"trial {record.number}\n(baseline)"
    ours, theirs = record.config.to_dict(), base.config.to_dict()
    changed = [f"{k}={value_text(v)}" for k, v in ours.items() if v != theirs[k]]
    return f"trial {record.number}\n" + ("\n".join(changed) or "same config")
