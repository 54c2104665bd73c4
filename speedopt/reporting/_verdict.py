"""The report's verdict: section 2 (the baseline beside the recommended trial) and the finals, the
paired re-measurements a speedup is claimed from."""

from __future__ import annotations

from collections.abc import Callable

from speedopt.knobs import knobs_text
from speedopt.reporting._text import fmt, pct
from speedopt.speedup import METHOD
from speedopt.study import SearchOutcome, TrialRecord, finalists


def side_by_side_section(base: TrialRecord | None, best: TrialRecord | None, result: SearchOutcome) -> list[str]:
    """Section 2: the baseline and the recommended trial, row by row."""
    lines = ["## 2. Baseline vs recommended", "", "| | baseline | recommended |", "|---|---|---|"]

    def row(label: str, get: Callable[[TrialRecord], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(get(c) if c else "-" for c in (base, best)) + " |")

    reference = result.reference_map50_95

    def accuracy(c: TrialRecord) -> str:
        if c.probe_map50_95 is not None:
            return fmt(c.probe_map50_95, 4)
        if c.map_loss == 0.0:
            return f"{reference:.4f} (baseline reference, mean of two seeds)" if reference is not None else "baseline signature, not probed"
        return "not probed"

    finals = result.finals

    def finals_median(c: TrialRecord) -> str:
        median, rounds = finals.median(c.number) if finals else (None, 0)
        return f"{median:.2f} (median of {rounds})" if median is not None else "-"

    row("trial", lambda c: str(c.number))
    row("config", lambda c: knobs_text(c.config))
    row("status", lambda c: c.status.value)
    row("images/s (search, measured once)", lambda c: fmt(c.images_per_s, 2))
    row("images/s (finals rounds)", finals_median)
    lines.append(f"| speedup | 1.00x | {_speedup_cell(result)} |")
    row("step time median / p90 (s)", lambda c: f"{fmt(c.result.step_s_median, 3)} / {fmt(c.result.step_s_p90, 3)}")
    row("waiting for data", lambda c: pct(c.result.data_wait_fraction))
    row("GPU busy (NVML)", lambda c: fmt(c.result.gpu_util_mean, 0, "%"))
    row("model GFLOPs per trained image (estimate: 3 x forward)", lambda c: _gflops_cell(c.result.gflops_per_image))
    row("share of the GPU's dense peak (estimate)", _peak_cell)
    row("CPU utilisation (all cores)", lambda c: fmt(c.result.cpu_util_mean, 0, "%"))
    row("peak RAM, with workers (MB)", lambda c: fmt(c.result.peak_ram_mb, 0))
    row("peak GPU memory (MB)", lambda c: fmt(c.result.peak_gpu_mem_mb, 0))
    row("mAP50-95 (probe)", accuracy)
    row("mAP loss vs baseline", lambda c: fmt(c.map_loss, 4) if c.map_loss is not None else "not probed")
    lines.append("")
    if best is None:
        lines += ["No trial was both measured ok and judged feasible: there is nothing to recommend yet.", ""]
    return lines


def _gflops_cell(gflops: float | None) -> str:
    return "-" if gflops is None else f"{gflops:.3g}"


def _peak_cell(c: TrialRecord) -> str:
    """The trial's share of its GPU's dense peak and the precision it is of, or why unknown."""
    r = c.result
    return f"{r.peak_percent} of {r.peak_precision}" if r.peak_percent else (r.peak_unknown or "not recorded")


def _speedup_cell(result: SearchOutcome) -> str:
    if result.speedup is not None:
        return result.speedup.text()
    if result.keep_settings:
        return "no measurable gain (keep your settings)"
    return "not claimed: " + result.verdict_text()


def finals_section(result: SearchOutcome) -> list[str]:
    """Every finals measurement: one row per config, one column per round, the paired speedup."""
    finals = result.finals
    lines = ["## Finals: the leaders measured again beside the baseline", ""]
    if finals is None:
        p = result.protocol
        if p is not None and p.repeats == 0:
            why = "--repeats 0"
        elif finalists(result.trials, 1):
            why = "not run yet: rerun the search command to run them"
        else:
            why = "no feasible config other than the baseline"
        return lines + [f"No finals ran ({why}): no speedup is claimed.", ""]
    rounds = " | ".join(f"round {r + 1}" for r in range(finals.repeats))
    lines += [f"Interleaved rounds (baseline, then each finalist, per round); images/s per measurement; speedup = "
              f"median of the per-round ratios to the baseline, interval = {METHOD}.", "",
              f"| trial | config | {rounds} | speedup |", "|---|---|" + "---|" * finals.repeats + "---|"]
    speedups = finals.speedups()
    by_number = {r.number: r for r in result.trials}
    for number in finals.trials:
        record = by_number.get(number)
        cells = " | ".join(fmt(v, 2) for v in finals.series(number))
        s = speedups.get(number)
        label = "baseline" if number == finals.baseline else (s.text() if s else "-")
        lines.append(f"| {number} | {knobs_text(record.config) if record else '?'} | {cells} | {label} |")
    saved = [f"- {line}" for line in finals.notes()]
    if saved:
        saved.insert(0, "Sequential rounds (a decision that could no longer change was not measured again; docs/search.md):")
    return lines + ["", *saved, *([""] if saved else []), f"**Decision:** {result.verdict_text()}.", ""]
