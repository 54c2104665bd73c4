"""The report's section 5: every trial, the feasible ones ranked by images/s and the rest with why they
are not recommended; the trials the pruner stopped and those whose run ended early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from speedopt.knobs import value_text
from speedopt.quality import Feasibility
from speedopt.reporting._gather import rows
from speedopt.reporting._text import cell, fmt, pct
from speedopt.status import Status
from speedopt.study import SearchOutcome, TrialRecord, schema

if TYPE_CHECKING:
    import optuna
    import pandas as pd


def trials_section(table: pd.DataFrame, base: TrialRecord | None) -> list[str]:
    """Section 5: the top ten feasible trials against the baseline, then every other trial and its reason."""
    lines = ["## 5. Trials", "", "Top feasible trials (measured ok, accuracy kept; one measurement each, "
             "with the 90% confidence interval of its mean step time):", "",
             "| # | config | images/s | +/- | steps | vs baseline (one run each) | data wait | mAP50-95 | mAP loss |",
             "|---|---|---|---|---|---|---|---|---|"]
    base_ips = base.images_per_s if base and base.result.ok else None
    feasible = table[(table["status"] == Status.OK.value) & (table["feasibility"] == Feasibility.FEASIBLE.value)]
    for row in rows(feasible.sort_values("images_per_s", ascending=False).head(10)):
        speed = float(row["images_per_s"])
        ratio = f"{speed / base_ips:.2f}x" if base_ips else "-"
        ci = row.get("ci_rel")
        steps = row.get("steps")
        lines.append(f"| {row['number']} | {row['config']} | {speed:.2f} | {pct(ci)} | {'-' if steps is None else int(steps)} | {ratio} | "
                     f"{pct(row['data_wait_fraction'])} | "
                     f"{fmt(row['probe_map50_95'], 4)} | {fmt(row['map_loss'], 4)} |")
    others = table[~table.index.isin(feasible.index)]
    lines += ["", "Not recommended (failed, infeasible, rejected by the mAP constraint, or not probed):", ""]
    if others.empty:
        return lines + ["none", ""]
    lines += ["| # | config | status | reason |", "|---|---|---|---|"]
    for row in rows(others):
        failed = row["status"] != Status.OK.value
        label = row["status"] if failed else row["feasibility"]
        reason = row["message"] if failed else row["quality_reason"]
        lines.append(f"| {row['number']} | {row['config']} | {label} | {cell(str(reason))} |")
    return lines + [""]


def pruned_section(study: optuna.Study) -> list[str]:
    """Trials stopped part-way by the pruner (clearly slower than the best), with the running rate they had."""
    from optuna.trial import TrialState

    pruned = [t for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)) if t.user_attrs.get(schema.PRUNED)]
    if not pruned:
        return []
    lines = ["Pruned part-way (Optuna pruning on the running images/s; not counted as complete trials):", ""]
    lines += [f"- trial {t.number} `{cell(_params_text(t.params))}`: {t.user_attrs[schema.PRUNED]}" for t in pruned]
    return lines + [""]


def _params_text(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in sorted(params.items()))


def ended_early_section(result: SearchOutcome) -> list[str]:
    """Trials whose run ended early (interrupted, killed, lost their worker) and the trial that retried each."""
    if not result.failed:
        return []
    lines = ["Ended early (not measured; each is retried once with the same knobs):", "", "| # | role | why | retried as |", "|---|---|---|---|"]
    for f in result.failed:
        again = f"trial {f.retried_as}" if f.retried_as is not None else "not retried"
        lines.append(f"| {f.number} | {f.role or 'sampled'} | {cell(f.why)} | {again} |")
    return lines + [""]
