"""What the quality gate decided for one measured config, as it is stored and read back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from speedopt.knobs import Knobs
from speedopt.quality._budget import ProbeBudget
from speedopt.quality._policy import Feasibility, signature
from speedopt.status import Status


@dataclass(frozen=True)
class Verdict:
    """What the quality gate decided for one measured config.

    ``unchecked`` names the accuracy knobs that differ from the baseline while nothing judged
    accuracy (quality off): such a config counts as feasible, since the user chose not to check, but
    it must never be shown as having kept accuracy. ``spread`` is the half-width of the loss's interval
    (paired seeds); ``reference_spread`` the baseline seeds' range. ``probe_seconds`` is the wall time
    of the probes this verdict ran, by signature (cache hits cost nothing here); ``probe_estimate_s`` what they
    were estimated to cost before they ran, and ``saving_s`` what deciding could save over the user's run.
    """

    signature: dict[str, Any]
    feasibility: Feasibility
    map50: float | None = None
    map50_95: float | None = None
    map_loss: float | None = None
    allowed: float | None = None
    spread: float | None = None
    reference: float | None = None
    probes_run: int = 0
    cache_hits: int = 0
    reason: str = ""
    unchecked: tuple[str, ...] = ()
    reference_spread: float | None = None
    budget: ProbeBudget | None = None
    probe_seconds: dict[str, float] = field(default_factory=dict)
    probe_estimate_s: float | None = None  # what its probes were estimated to cost before they ran
    saving_s: float | None = None  # what its measured speedup would save over the user's run (estimate)
    risk: float | None = None  # the share of the search's stated risk its confirmation spent (None: never confirmed)
    run_loss: float | None = None  # the loss its confirmation predicts at the run's length (None: never confirmed)

    def constraint(self) -> float:
        """Optuna constraint value (<= 0 feasible): the loss's upper end (loss + spread) minus the allowed loss
        when probed; 1 for lost, unknown or never judged without a probe (only a kept accuracy is feasible)."""
        if self.feasibility in (Feasibility.UNKNOWN, Feasibility.UNPROBED):
            return 1.0  # never the best: nobody could tell (or asked) whether it keeps accuracy
        if self.map_loss is None or self.allowed is None:
            return 1.0 if self.feasibility is Feasibility.REJECTED else 0.0
        return max(self.map_loss, self.run_loss if self.run_loss is not None else self.map_loss) + (self.spread or 0.0) - self.allowed

    def attrs(self) -> dict[str, Any]:
        """The trial user attrs recording this verdict (``feasible``: true, false or "unknown")."""
        stored: bool | str = {Feasibility.FEASIBLE: True, Feasibility.REJECTED: False}.get(self.feasibility, "unknown")
        return {
            "signature": self.signature,
            "feasible": stored,
            "verdict": self.feasibility.value,  # unknown apart from unprobed: the probe budget cannot tell
            "probe_map50": self.map50,
            "probe_map50_95": self.map50_95,
            "map_loss": self.map_loss,
            "allowed_map_loss": self.allowed,
            "map_spread": self.spread,
            "baseline_map50_95": self.reference,
            "baseline_spread": self.reference_spread,
            "probe_epochs": self.budget.epochs if self.budget else None,
            "probe_fraction": self.budget.fraction if self.budget else None,
            "probe_seconds": dict(self.probe_seconds),
            "probe_estimate_s": self.probe_estimate_s,
            "saving_s": self.saving_s,
            "confirm_risk": self.risk,
            "run_map_loss": self.run_loss,
            "probes_run": self.probes_run,
            "probe_cache_hits": self.cache_hits,
            "quality_reason": self.reason,
            "accuracy_unchecked": list(self.unchecked),
        }


def not_measured(knobs: Knobs, status: Status) -> Verdict:
    """The verdict of a trial that did not end ok: nothing to judge."""
    return Verdict(signature(knobs), Feasibility.NOT_MEASURED, reason=f"not measured: {status.value}")
