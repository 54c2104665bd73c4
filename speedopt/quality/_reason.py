"""The words of a verdict: the look it was decided at, in one line, and what would let the probes judge."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from speedopt.quality._budget import ProbeBudget
from speedopt.quality._policy import Feasibility, Policy
from speedopt.quality._verdict import Verdict

if TYPE_CHECKING:
    from speedopt.quality._rule import Look


def fix_text(policy: Policy, straddles: bool = False) -> str:
    """What would let the probes judge: weights to fine-tune (when none were given), a larger budget or share,
    and where the loss's interval straddles the allowed loss, more seeds (a narrower interval)."""
    fixes = [] if policy.weights else ["give --weights (probes then fine-tune)"]
    fixes.append("raise --probe-grow, --probe-share, --probe-epochs or --probe-fraction")
    if straddles:
        fixes.append(f"give more --probe-seeds than {policy.seeds}")
    return ", or ".join(fixes)


def look_text(
    look: Look, half: float, allowed: float, decided: Feasibility, asked: ProbeBudget, ref: tuple[ProbeBudget | None, str] | None
) -> str:
    """``mAP50-95 0.41 vs baseline 0.42 on 4 paired seeds: loss +0.01 +/- 0.005 within the allowed 0.02`` (and how
    the screening's budget grew: ``ref`` is the reference's budget and how it grew; None: a confirmation's look, whose
    length the rule sets)."""
    within = {Feasibility.FEASIBLE: "within", Feasibility.REJECTED: "beyond"}.get(decided, "straddles")
    if ref is None:
        grown = f" at {look.budget}"
    elif look.budget != ref[0]:
        grown = f"; probe budget grown from {asked} to {look.budget}"
    else:
        grown = f"; probe budget {ref[1]}" if ref[1] else ""
    return (
        f"mAP50-95 {look.mean:.4f} vs baseline {look.reference:.4f} on {len(look.cand)} paired seeds: loss {look.loss:.4f} "
        f"+/- {half:.4f} {within} the allowed {allowed:.4f}{grown}"
    )


def with_look(verdict: Verdict, look: Look, half: float, allowed: float) -> Verdict:
    """The verdict with the figures of the look it was decided at."""
    return replace(
        verdict, map50=look.map50, map50_95=look.mean, map_loss=look.loss, spread=half, allowed=allowed,
        reference=look.reference, budget=look.budget,
    )
