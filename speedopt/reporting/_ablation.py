"""The report's "Which change bought what": the ablation's path from the baseline to the recommendation.

A table (each step's change, the images/s after it, its speedup with the interval of its paired rounds,
the cumulative speedup, and whether it bought anything measurable), the line that says the steps
multiply to the full change, and a waterfall figure: the baseline's images/s, each step a floating bar
from the config before it to the config after it, and the recommendation's total.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from speedopt.reporting._figures import _pyplot, _save
from speedopt.speedup import METHOD, paired
from speedopt.study import Ablation, SearchOutcome, schema

if TYPE_CHECKING:
    import optuna

TITLE = "## Which change bought what"
FIGURE = "ablation.png"


def _why_not(result: SearchOutcome, ablation: Ablation | None) -> str | None:
    """Why there is no table ("": nothing to say, the finals section already does), None when there is one."""
    decision = result.decision
    if result.finals is None or decision is None:
        return ""
    if decision.choice is None:
        return "the finals found no measurable gain, so the baseline is kept: no change to explain"
    if ablation is not None and (ablation.baseline, ablation.recommended) == (result.finals.baseline, decision.choice):
        return None if ablation.complete else "incomplete: rerun the search command to finish it"
    if result.protocol is not None and not result.protocol.ablate:
        return "turned off (--no-ablation)"
    return "not run yet: rerun the search command to run it"


def _speed(ablation: Ablation, config: int) -> str:
    """``28.1 (27.5-28.9)``: the median of the config's ok rounds and their min-max."""
    rounds = ablation.ok_rounds(config)
    median = ablation.median(config)
    if median is None:
        return "-"
    missing = f", {len(rounds)} of {ablation.repeats} rounds ok" if len(rounds) < ablation.repeats else ""
    return f"{median:.2f} ({min(rounds):.2f}-{max(rounds):.2f}{missing})"


def _table(ablation: Ablation) -> list[str]:
    lines = [
        f"| step | change | images/s: median (min-max of {ablation.repeats} rounds) | step speedup (interval) | cumulative | verdict |",
        "|---|---|---|---|---|---|",
        f"| 0 | baseline (trial {ablation.baseline}) | {_speed(ablation, 0)} | - | 1.00x | - |",
    ]
    for step in ablation.steps():
        speedup = "-" if step.speedup is None else f"{step.speedup:.3f}x"
        if step.interval is not None:
            speedup += f" ({step.interval.low:.3f}-{step.interval.high:.3f}x, {step.interval.rounds} rounds)"
        cumulative = "-" if step.cumulative is None else f"{step.cumulative:.3f}x"
        lines.append(f"| {step.number} | {step.text()} | {_speed(ablation, step.number)} | {speedup} | {cumulative} | {step.verdict} |")
    return lines + [""]


def _product(ablation: Ablation) -> list[str]:
    """The steps multiply to the full change (the ratio of the two ends' medians)."""
    total, steps = ablation.total(), ablation.steps()
    first, last = ablation.median(0), ablation.median(len(ablation.path))
    if total is None or first is None or last is None or any(s.speedup is None for s in steps):
        return ["Some config on the path never measured ok: the steps do not multiply to the full change.", ""]
    product = " × ".join(f"{s.speedup:.3f}x" for s in steps)
    return [f"Product of the step speedups: {product} = {total:.3f}x, the full change: the recommendation's median "
            f"{last:.2f} images/s over the baseline's {first:.2f} (trial {ablation.recommended} over trial {ablation.baseline}).", ""]


def _faster_on_the_way(ablation: Ablation) -> list[str]:
    """A config on the path that beat the recommendation in every round (a later step cost speed)."""
    last = len(ablation.path)
    beat = [(i, s) for i in range(1, last) if (s := paired(ablation.series(i), ablation.series(last))) and s.clears(0.0)]
    if not beat:
        return []
    i, s = max(beat, key=lambda pair: pair[1].median)
    kept = "; ".join(step.text() for step in ablation.steps()[i:])
    return [f"The config after step {i} measured faster than the recommendation in every round ({s.text()}): keeping "
            f"your value for {kept} may be faster still (not certified by the finals: measure it with `speedopt trial`).", ""]


def _order(ablation: Ablation) -> list[str]:
    """How the path was ordered: the single-change measurements at each point, fastest taken."""
    if ablation.from_finals or not ablation.probes:
        return []
    lines = ["Order: from the baseline, each remaining change measured once and the fastest taken, then again from there:", ""]
    for applied in dict.fromkeys(p.applied for p in ablation.probes):
        where = "after " + ", ".join(ablation.change(k).text() for k in applied) if applied else "from the baseline"
        tried = [
            f"{ablation.change(p.knob).text()} {p.images_per_s:.2f} images/s" if p.images_per_s is not None
            else f"{ablation.change(p.knob).text()} {p.outcome}{': ' + p.message if p.message else ''}"
            for p in ablation.probes if p.applied == applied
        ]
        lines.append(f"- {where}: " + "; ".join(t.replace("|", "/") for t in tried))
    return lines + [""]


def section(study: optuna.Study, result: SearchOutcome, folder: Path, link: str) -> list[str]:
    """The section, with its waterfall figure drawn in ``folder`` (linked as ``link``/ablation.png); a
    stale figure from an earlier report is removed when there is none."""
    ablation = schema.read_ablation(study)
    figure = folder / FIGURE
    why = _why_not(result, ablation)
    if why is not None or ablation is None:
        figure.unlink(missing_ok=True)
        return [TITLE, "", f"No ablation: {why}.", ""] if why else []
    bar = f" or whose speedup is under the study's --min-gain ({100 * ablation.min_gain:.0f}%)" if ablation.min_gain else ""
    lines = [
        TITLE, "",
        f"The path from the baseline (trial {ablation.baseline}) to the recommendation (trial {ablation.recommended}), one "
        f"changed knob at a time, the change that gains most first; every config on it measured in {ablation.repeats} "
        f"interleaved rounds. Step speedup = the ratio of the medians of consecutive configs (so the steps multiply to "
        f"the full change); interval = {METHOD} (each config beside the one before it). A step whose interval includes "
        f"1.0{bar} bought nothing measurable: you may keep your value.", "",
    ]
    lines += _table(ablation) + _product(ablation) + _faster_on_the_way(ablation) + _order(ablation)
    lines += [f"- Not a step: {c.text()}: asked differently, but the trainer ran the same value in both (no real change)."
              for c in ablation.dropped]
    lines += [f"- {note}." for note in ablation.notes]
    lines += [""] if ablation.dropped or ablation.notes else []
    if waterfall(ablation, figure) is None:
        figure.unlink(missing_ok=True)
    else:
        lines += [f"![which change bought what]({link}/{FIGURE})", ""]
    return lines


def waterfall(ablation: Ablation, path: Path) -> Path | None:
    """Images/s along the path: the baseline, each step a floating bar from the config before it (green: a
    gain, grey: nothing measurable, red: slower), the recommendation's total; whiskers: min-max of the rounds.
    None when a config on the path never measured ok."""
    medians = [ablation.median(i) for i in range(len(ablation.path) + 1)]
    if any(m is None for m in medians):
        return None
    values = [m for m in medians if m is not None]
    steps = ablation.steps()
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.7 * (len(steps) + 2)), 4.2))
    ax.bar(0, values[0], color="tab:gray", alpha=0.5)
    for step in steps:
        before, after = values[step.number - 1], values[step.number]
        slower = step.interval is not None and step.interval.rounds >= 2 and step.interval.high < 1.0
        colour = "tab:green" if step.gain else ("tab:red" if slower else "tab:gray")
        ax.bar(step.number, after - before, bottom=before, color=colour, alpha=0.75)
        ax.plot([step.number - 1 + 0.4, step.number - 0.4], [before, before], c="black", lw=0.8, ls=":")
        top = max(before, *ablation.ok_rounds(step.number))  # above the whisker
        ax.annotate(f"{step.speedup or 0:.2f}x", (step.number, top), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    end = len(steps) + 1
    ax.bar(end, values[-1], color="tab:blue", alpha=0.6)
    ax.annotate(f"{(ablation.total() or 0):.2f}x in all", (end, values[-1]), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    for i, value in enumerate(values):
        rounds = ablation.ok_rounds(i)
        ax.errorbar(i, value, yerr=[[value - min(rounds)], [max(rounds) - value]], fmt="none", c="black", capsize=4)
    names = ["baseline"] + [f"{s.number}. " + "\n".join(c.text() for c in s.changes) for s in steps] + ["recommended"]
    ax.set_xticks(range(end + 1), names, fontsize=8)
    ax.set_ylim(bottom=0, top=max(max(ablation.ok_rounds(i)) for i in range(len(values))) * 1.15)
    ax.set_ylabel("images/s (median of the rounds)")
    ax.set_title(f"which change bought what: {ablation.repeats} interleaved rounds (whisker: min-max)", fontsize=10)
    return _save(fig, path)
