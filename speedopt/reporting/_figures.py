"""The report's figures (PNG, matplotlib's Agg backend: no display needed), drawn from the trial table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedopt.quality import Feasibility
from speedopt.reporting._gather import rows
from speedopt.status import Status

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
    plt = _pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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
        ax.scatter(row["number"], speed, c=STATUS_COLOURS.get(str(row["status"]), "black"), marker=marker)
        if row["feasibility"] == Feasibility.FEASIBLE.value and row["status"] == Status.OK.value:
            best = max(best or 0.0, speed)
        line.append(best if best is not None else float("nan"))
    ax.step(list(table["number"]), line, where="post", c="tab:green", label="best feasible")
    ax.set_xlabel("trial")
    ax.set_ylabel("images/s (measured)")
    ax.set_title("optimisation history (x: rejected by the mAP constraint; 0: not measured)")
    ax.legend(loc="best")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


def knobs(table: pd.DataFrame, names: list[str], path: Path) -> Path:
    """Measured images/s against each searched knob's values (ok trials only)."""
    plt = _pyplot()
    ok = table[table["status"] == Status.OK.value]
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(3.2 * max(1, len(names)), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        values = [str(v) for v in ok[f"config_{name}"]]
        order = sorted(set(values), key=lambda v: (0, int(v)) if v.lstrip("-").isdigit() else (1, v))
        ax.scatter([order.index(v) for v in values], list(ok["images_per_s"]), c="tab:blue")
        ax.set_xticks(range(len(order)), order)
        ax.set_xlabel(name)
    axes[0][0].set_ylabel("images/s")
    fig.suptitle("throughput against each searched knob")
    return _save(fig, path)


def speed_vs_map(table: pd.DataFrame, threshold: float | None, path: Path) -> Path:
    """Images/s against probed mAP50-95, with the feasible region (mAP above the threshold)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    probed = table[table["probe_map50_95"].notna()] if "probe_map50_95" in table.columns else table.iloc[0:0]
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
    ax.set_title("speed vs accuracy")
    return _save(fig, path)
