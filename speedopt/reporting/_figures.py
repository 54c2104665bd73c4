"""The report's figures (PNG, matplotlib's Agg backend: no display needed), drawn from the trial table.

Throughput axes start at 0 (a bar from 9.7 to 11.0 images/s must not look like a doubling), each
measurement carries its spread (the 90% CI of its mean step time; for the finals, the min-max of the
rounds), and a figure with nothing to show is not drawn (its function returns None).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedopt.quality import Feasibility
from speedopt.reporting._filename import write_inside
from speedopt.reporting._gather import rows
from speedopt.status import Status
from speedopt.study import Finals

if TYPE_CHECKING:
    import pandas as pd

STATUS_COLOURS = {
    Status.OK.value: "tab:blue",
    Status.OOM.value: "tab:red",
    Status.TIMEOUT.value: "tab:orange",
    Status.INFEASIBLE.value: "tab:gray",
    Status.ERROR.value: "black",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    """``fig`` as the PNG ``path``, written as every report file is (:func:`write_inside`: never through a link)."""
    plt = _pyplot()
    fig.tight_layout()
    try:
        return write_inside(path, lambda handle: fig.savefig(handle, dpi=100, format="png"))
    finally:
        plt.close(fig)


def history(table: pd.DataFrame, path: Path) -> Path:
    """Images/s of every trial in order, coloured by status, with the best feasible so far."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    best: float | None = None
    line = []
    for row in rows(table):
        speed = float(row["images_per_s"] or 0.0)
        marker = "x" if row["feasibility"] == Feasibility.REJECTED.value else "o"
        colour = STATUS_COLOURS.get(str(row["status"]), "black")
        spread = speed * float(row.get("ci_rel") or 0.0)
        ax.errorbar(row["number"], speed, yerr=spread, fmt=marker, c=colour, capsize=3)
        if row["feasibility"] == Feasibility.FEASIBLE.value and row["status"] == Status.OK.value:
            best = max(best or 0.0, speed)
        line.append(best if best is not None else float("nan"))
    ax.step(list(table["number"]), line, where="post", c="tab:green", label="best feasible")
    ax.set_xlabel("trial")
    ax.set_ylabel("images/s (bars: 90% CI)")
    ax.set_ylim(bottom=0)
    ax.set_title("optimisation history (x: rejected by the mAP constraint; 0: not measured)")
    ax.legend(loc="best")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


def knobs(table: pd.DataFrame, names: list[str], path: Path, outside: frozenset[int] = frozenset()) -> Path | None:
    """Measured images/s against each searched knob's values (ok trials only; None: nothing searched or measured).

    ``outside``: trials that are no point of the searched space (the baseline on another model, say): drawn
    apart, grey, so they do not read as a value of the knob they share with the searched trials.
    """
    ok = table[table["status"] == Status.OK.value]
    if not names or ok.empty:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(3.2 * max(1, len(names)), 3.2), squeeze=False)
    apart = ok["number"].isin(list(outside))
    for ax, name in zip(axes[0], names):
        values = [str(v) for v in ok[f"config_{name}"]]
        order = sorted(set(values), key=lambda v: (0, int(v)) if v.lstrip("-").isdigit() else (1, v))
        speeds = [float(v) for v in ok["images_per_s"]]
        spreads = [s * float(c) if c == c and c is not None else 0.0 for s, c in zip(speeds, ok.get("ci_rel", [0.0] * len(speeds)))]
        for mask, style in ((~apart, {"fmt": "o", "c": "tab:blue"}), (apart, {"fmt": "x", "c": "tab:gray", "label": "not in the searched space"})):
            picked = [i for i, m in enumerate(mask) if m]
            if picked:
                ax.errorbar([order.index(values[i]) for i in picked], [speeds[i] for i in picked],
                            yerr=[spreads[i] for i in picked], capsize=3, **style)
        ax.set_xticks(range(len(order)), order)
        ax.set_xlabel(name)
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("images/s")
    if apart.any():
        axes[0][0].legend(loc="lower right", fontsize="small")
    fig.suptitle("throughput against each searched knob")
    return _save(fig, path)


def speed_vs_map(table: pd.DataFrame, threshold: float | None, path: Path) -> Path | None:
    """Images/s against probed mAP50-95, with the feasible region (None: nothing was probed)."""
    probed = table[table["probe_map50_95"].notna()] if "probe_map50_95" in table.columns else table.iloc[0:0]
    if probed.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for row in rows(probed):
        point = (row["probe_map50_95"], row["images_per_s"])
        ax.scatter(*point, c="tab:green" if row["feasibility"] == Feasibility.FEASIBLE.value else "tab:red")
        ax.annotate(str(row["number"]), point, textcoords="offset points", xytext=(4, 4))
    if threshold is not None:
        top = max([threshold, *[float(v) for v in probed["probe_map50_95"]]])
        ax.axvline(threshold, c="gray", ls="--")
        ax.axvspan(threshold, top * 1.1 + 1e-3, color="tab:green", alpha=0.08, label="feasible")
        ax.legend(loc="upper right")
    ax.set_xlabel("mAP50-95 (quality probe)")
    ax.set_ylabel("images/s")
    ax.set_ylim(bottom=0)
    ax.set_title("speed vs accuracy")
    return _save(fig, path)


def finals(finals: Finals, labels: dict[int, str], path: Path) -> Path | None:
    """Each finalist's images/s in every round (dots), median (bar) and min-max (whisker); None: no round measured."""
    series = {t: finals.ok_rounds(t) for t in finals.trials}
    if not any(series.values()):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(finals.trials)), 4))
    for x, (number, values) in enumerate(series.items()):
        if not values:
            continue
        median = statistics.median(values)
        colour = "tab:gray" if number == finals.baseline else "tab:blue"
        ax.bar(x, median, color=colour, alpha=0.35)
        ax.errorbar(x, median, yerr=[[median - min(values)], [max(values) - median]], fmt="none", c="black", capsize=5)
        ax.scatter([x] * len(values), values, c=colour, zorder=3)
    ax.set_xticks(range(len(series)), [labels.get(t, str(t)) for t in series], fontsize=8)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("images/s per round")
    ax.set_title(f"finals: {finals.repeats} interleaved rounds (bar: median, whisker: min-max)", fontsize=10)

    return _save(fig, path)
