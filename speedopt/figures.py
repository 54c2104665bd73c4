"""The report's figures (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATUS_COLOURS = {"ok": "tab:blue", "oom": "tab:red", "timeout": "tab:orange", "infeasible": "tab:gray", "error": "black"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def history(rows: list[dict[str, Any]], path: Path) -> Path:
    """Images/s of every trial in order, coloured by status, with the best feasible so far."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    best, line = None, []
    for r in rows:
        colour = STATUS_COLOURS.get(r["status"], "black")
        marker = "x" if r.get("feasible") is False else "o"
        ax.scatter(r["number"], r["images_per_s"] or 0.0, c=colour, marker=marker)
        if r["status"] == "ok" and r.get("feasible") is True:
            best = max(best or 0.0, r["images_per_s"])
        line.append(best)
    ax.step([r["number"] for r in rows], [b if b is not None else float("nan") for b in line], where="post", c="tab:green", label="best feasible")
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("trial")
    ax.set_ylabel("images/s (measured)")
    ax.set_title("optimisation history (x: rejected by the mAP constraint; 0: not measured)")
    ax.legend(loc="best")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def knobs(rows: list[dict[str, Any]], names: list[str], path: Path) -> Path:
    """Measured images/s against each searched knob's values (ok trials only)."""
    plt = _pyplot()
    ok = [r for r in rows if r["status"] == "ok"]
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(3.2 * max(1, len(names)), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        values = [str(r["config"][name]) for r in ok]
        order = sorted(set(values), key=lambda v: (0, int(v)) if v.lstrip("-").isdigit() else (1, v))
        ax.scatter([order.index(v) for v in values], [r["images_per_s"] for r in ok], c="tab:blue")
        ax.set_xticks(range(len(order)), order)
        ax.set_xlabel(name)
    axes[0][0].set_ylabel("images/s")
    fig.suptitle("throughput against each searched knob")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def speed_vs_map(rows: list[dict[str, Any]], threshold: float | None, path: Path) -> Path:
    """Images/s against probed mAP50-95, with the feasible region (mAP above the threshold)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    probed = [r for r in rows if r.get("map50_95") is not None]
    for r in probed:
        ax.scatter(r["map50_95"], r["images_per_s"], c="tab:green" if r.get("feasible") is True else "tab:red")
        ax.annotate(str(r["number"]), (r["map50_95"], r["images_per_s"]), textcoords="offset points", xytext=(4, 4))
    if threshold is not None:
        ax.axvline(threshold, c="gray", ls="--")
        ax.axvspan(threshold, max([threshold] + [r["map50_95"] for r in probed]) * 1.1 + 1e-3, color="tab:green", alpha=0.08, label="feasible")
        ax.legend(loc="upper right")
    ax.set_xlabel("mAP50-95 (quality probe)")
    ax.set_ylabel("images/s")
    ax.set_title("speed vs accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
