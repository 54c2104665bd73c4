"""The report's bill: what the search cost, by stage, and after how many epochs its saving pays it back."""

from __future__ import annotations

from speedopt.study import SearchOutcome


def bill_section(result: SearchOutcome, epochs: int) -> list[str]:
    """The search's own wall time by stage (every run and worker of the study), and its payback: the one the
    search's summary printed (:meth:`SearchOutcome.payback`: training seconds per epoch from the finals' medians)."""
    bill = result.bill
    if not bill.seconds:
        return []
    text = result.payback_text(epochs)
    lines = ["## What the search cost", "", text[0].upper() + text[1:] + ".", "", "| stage | wall time | share |", "|---|---|---|"]
    total = bill.total_s or 1.0
    for stage, seconds in sorted(bill.seconds.items(), key=lambda item: -item[1]):
        lines.append(f"| {stage} | {seconds:.1f} s | {100 * seconds / total:.0f}% |")
    waited = [bill.waited_text()[0].upper() + bill.waited_text()[1:] + ".", ""] if bill.waited_s >= 1.0 else []
    return [*lines, f"| total | {bill.total_s:.1f} s | 100% |", "", *waited]
