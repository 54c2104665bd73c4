"""The report's torch.compile section: the recommendation measured eager and compiled, the one-time cost, the payback.

Written where the space listed compile modes (the search decided compile once, at the end: no trial compiled).
"""

from __future__ import annotations

from speedopt.study import SearchOutcome
from speedopt.study.record_types import CompileDecision


def compile_section(result: SearchOutcome) -> list[str]:
    """The decision in a line, each round's images/s eager and compiled, and each mode's cost and payback."""
    decision = result.compile
    if decision is None:
        return []
    lines = [
        "## torch.compile, decided once on the recommendation", "",
        f"No trial compiled: the space listed compile modes, so trial {decision.trial}'s config was measured eager and "
        f"compiled in {decision.repeats} interleaved rounds after the finals. {decision.line()}.", "",
    ]
    lines += _rounds(decision) + _paybacks(decision)
    if result.compiled is None and decision.choice is not None:
        lines += ["_The recommendation changed after this decision: its command trains eager._", ""]
    return lines


def _rounds(decision: CompileDecision) -> list[str]:
    heads = ["eager", *(f"compile={m}" for m in decision.modes)]
    rows = [f"| round | {' | '.join(heads)} |", "|---|" + "---|" * len(heads)]
    for r in range(decision.repeats):
        cells = []
        for of in range(len(heads)):
            speed = decision.series(of)[r]
            measured = decision.has(r, of)
            cells.append(f"{speed:.1f}" if speed is not None else ("failed" if measured else "-"))
        rows.append(f"| {r + 1} | {' | '.join(cells)} |")
    return [*rows, "", "images/s; '-': not measured (a mode that could not run is not measured again).", ""]


def _paybacks(decision: CompileDecision) -> list[str]:
    rows = ["| mode | compiled / eager | one-time cost | saved over the run (low end) | pays back within |", "|---|---|---|---|---|"]
    for mode in decision.modes:
        p = decision.payback(mode)
        ratio = p.speedup.text() if p.speedup else "not measured"
        cost = f"{p.cost_s:.1f} s" if p.cost_s is not None else "not measured"
        saved = f"{p.saved_s:.1f} s" if p.saved_s is not None else "nothing (not faster in every round)"
        back = f"{p.payback_epochs:.1f} of {decision.epochs} epochs" if p.payback_epochs is not None else "never"
        rows.append(f"| compile={mode} | {ratio} | {cost} | {saved} | {back} |")
    basis = (
        f"Cost: the first compiled measurement's warm-up beyond its steady steps (a cold compile, as a first run meets "
        f"it; less where the inductor cache is warm). Saved: an estimate, {decision.epochs} epochs x "
        f"{decision.train_images} train images at the eager median and the ratio's low end (training only)."
    )
    return [*rows, "", basis, ""]
