"""The report's accuracy section: the rule trials were judged by, and what judging them cost.

Probes are the price of the mAP-loss constraint: each signature is trained once per seed. The section
shows that price beside the search it belongs to (probe time as a share of the search's span, from the
first trial's start to the last trial's end) and per signature, with the verdict each got, what its probes
were estimated to cost before they ran, and what deciding could save over the user's run (both estimates).
"""

from __future__ import annotations

from speedopt.quality import signature_text
from speedopt.reporting._text import cell, duration
from speedopt.study import SearchOutcome, StudyProtocol, TrialRecord


def _span(done: list[TrialRecord]) -> float:
    starts = [r.started for r in done if r.started]
    ends = [r.completed for r in done if r.completed]
    return (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0


def _verdicts(done: list[TrialRecord]) -> dict[str, str]:
    """Each judged signature's verdict word (with its loss and interval where probed)."""
    words: dict[str, str] = {}
    for r in done:
        if r.signature is None or r.feasibility.word == "not judged" or r.is_baseline:
            continue
        loss = f" (loss {r.map_loss:+.4f} +/- {r.map_spread or 0:.4f})" if r.map_loss is not None and r.probe_map50_95 is not None else ""
        words[signature_text(r.signature)] = f"{r.feasibility.word}{loss}"
    return words


def _priced(done: list[TrialRecord]) -> dict[str, tuple[float | None, float | None]]:
    """Each judged signature's (estimated probe seconds before they ran, seconds its speedup could save over the run)."""
    return {
        signature_text(r.signature): (r.probe_estimate_s, r.saving_s)
        for r in done
        if r.signature is not None and (r.probe_estimate_s is not None or r.saving_s is not None)
    }


def _saving(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return duration(seconds) if seconds > 0 else "nothing (not faster)"


def accuracy_section(p: StudyProtocol, result: SearchOutcome) -> list[str]:
    """The accuracy rule (max mAP loss, the probes) and what the probes did and cost; or that quality was off."""
    q = p.quality
    if not q.probing:
        return ["Accuracy: quality off: accuracy knobs were fixed at the baseline's values.", ""]
    done = list(result.trials)
    start = f"from {q.weights}" if q.weights else "from scratch"
    judged = {(r.probe_epochs, r.probe_fraction) for r in done if r.probe_epochs and r.probe_fraction}
    grown = [f"{e} epochs on {f:g}" for e, f in sorted(judged, key=lambda b: (b[0] or 0) * (b[1] or 0)) if (e, f) != (q.epochs, q.fraction)]
    lines = [
        "## Accuracy",
        "",
        f"Max mAP50-95 loss {q.max_loss}; probes of {q.budget} ({start}), {q.seeds} seeds per signature, the "
        f"candidate's paired with the baseline's{'; budget grown to ' + ', '.join(grown) if grown else ''}; "
        f"{result.probes_run} probes ran, {result.probe_cache_hits} cache hits, {result.unprobed} trials not probed, "
        f"{result.rejected} lost, {result.unknown} unknown.",
        "",
        f"The stated {result.risk_text()}. A candidate screened kept is confirmed on fresh seeds that took no part in "
        "choosing it, at its probe's length and at twice it; each confirmation spends half the risk the earlier ones "
        "left, and a loss that grows with the probe's length is carried on to your run's (docs/accuracy.md).",
        "",
    ]
    spent: dict[str, float] = {}
    for r in done:
        for name, seconds in r.probe_seconds.items():
            spent[name] = spent.get(name, 0.0) + seconds
    if not spent:
        return lines + ["No probe ran in this study (every verdict came from the probe cache or needed none).", ""]
    span, total = _span(done), sum(spent.values())
    share = f", {100 * total / span:.0f}% of the search's {duration(span)} (first trial's start to last trial's end)" if span else ""
    words, priced = _verdicts(done), _priced(done)
    base = signature_text(result.baseline.signature) if result.baseline and result.baseline.signature else None
    lines += [
        f"The price of accuracy: {duration(total)} of probes{share}. Before a candidate's probes ran, the search "
        f"estimated their cost (from probes already measured at that budget) and what deciding could save over your "
        f"{p.epochs} epochs (from the trials' measured images/s): both are estimates.", "",
        "| signature | verdict | probe time | estimated before | could save | share of probe time |", "|---|---|---|---|---|---|",
    ]
    unpaid = {name: 0.0 for name in priced if name not in spent}  # judged, or left unknown, without a probe
    for name, seconds in sorted({**unpaid, **spent}.items(), key=lambda item: -item[1]):
        verdict = "the reference (baseline)" if name == base else words.get(name, "-")
        estimate, saving = priced.get(name, (None, None))
        lines.append(
            f"| {cell(name)} | {cell(verdict)} | {duration(seconds)} | {duration(estimate)} | {_saving(saving)} | "
            f"{100 * seconds / total:.0f}% |"
        )
    return lines + [""]
