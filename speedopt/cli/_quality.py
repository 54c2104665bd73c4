"""The search's accuracy summary: the rule trials were judged by, the probes' count and each probed verdict."""

from __future__ import annotations

from rich.console import Console

from speedopt.quality import Policy, signature_text, unchecked_knobs
from speedopt.study import SearchOutcome


def _budget_text(result: SearchOutcome, policy: Policy) -> str:
    """The probe budget verdicts were judged at: as asked, or grown (the largest any trial's verdict used)."""
    judged = [(r.probe_epochs, r.probe_fraction) for r in result.trials if r.probe_epochs and r.probe_fraction]
    epochs, fraction = max(judged, key=lambda b: b[0] * b[1], default=(policy.epochs, policy.fraction))
    if (epochs, fraction) == (policy.epochs, policy.fraction):
        return f"{policy.budget}"
    return f"{epochs} epochs on {fraction:g} of the train set (grown from {policy.budget})"


def print_quality(out: Console, result: SearchOutcome) -> None:
    policy = result.protocol.quality if result.protocol else None
    if policy is None or result.protocol is None or not policy.probing:
        base = result.protocol.baseline if result.protocol else None
        differ = policy is not None and base is not None and any(unchecked_knobs(policy, base, r.config) for r in result.trials)
        what = "not checked where accuracy knobs differ from the baseline" if differ else "accuracy knobs as the baseline's"
        out.print(f"accuracy: quality off ({what}), no probes", highlight=False)
        return

    out.print(
        f"accuracy: max mAP50-95 loss {policy.max_loss}, probes of {_budget_text(result, policy)}, "
        f"{policy.seeds} paired seeds at first: {result.probes_run} probe(s) ran, {result.probe_cache_hits} cache hit(s), "
        f"{result.unprobed} trial(s) not probed (too slow to matter), {result.rejected} lost accuracy, "
        f"{result.unknown} unknown",
        highlight=False,
    )
    out.print(f"  {result.risk_text()}", highlight=False)
    if result.unknown:
        out.print(
            f"  {result.unknown} trial(s) with other accuracy knobs than the baseline's are never recommended: "
            f"{result.unknown_why}. The recommendation keeps the baseline's accuracy knobs, as --quality off would.",
            highlight=False,
        )
    if not result.probed:
        return
    first = result.probed[0]
    out.print(f"  baseline mAP50-95 {first.baseline_map50_95 or 0:.4f} (its probes on the first candidate's seeds)", highlight=False)
    for entry in result.probed:
        out.print(
            f"  {signature_text(entry.signature)}: mAP50-95 {entry.map50_95:.4f}, loss {entry.map_loss or 0:+.4f} "
            f"+/- {entry.spread or 0:.4f}: {entry.feasibility.word}",
            highlight=False,
        )


