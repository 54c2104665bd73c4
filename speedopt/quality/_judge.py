"""The mAP-loss constraint: the quality gate that keeps a faster config honest.

A quality probe trains one signature for a budget (epochs x fraction of the training set, from
``--weights`` or from scratch) with one seed, and validates mAP50 and mAP50-95 on the val split.
The baseline signature is probed first, on every seed of the policy: their mean is the reference.
When that budget cannot tell signatures apart (:func:`~speedopt.quality._budget.not_informative`) it
grows, within a time cap, and the baseline is probed again; if it still cannot, every candidate whose
accuracy knobs differ is *unknown* without a probe of its own, and never recommended. A candidate is
probed on the same seeds as the baseline; the loss is the mean paired difference, with an interval of
two standard errors (:func:`~speedopt.quality._budget.paired_loss`). The verdict is one of three
(:func:`~speedopt.quality._policy.accuracy_verdict`): kept (the whole interval within the allowed loss),
lost (the whole interval beyond it), unknown (the interval straddles it). Probes are lazy (a signature
is probed only when its measured throughput could make it the best feasible trial so far) and cached
(:mod:`speedopt.quality._cache`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from speedopt import machine
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import ProbeJob, TrialProgress, run_job
from speedopt.offline import cache_dir
from speedopt.quality._budget import ProbeBudget, not_informative, paired_loss
from speedopt.quality._cache import ProbeCache, ProbeResult, cache_key
from speedopt.quality._policy import (
    Feasibility,
    Policy,
    accuracy_verdict,
    signature,
    signature_text,
    unchecked_knobs,
    unchecked_text,
)
from speedopt.quality._verdict import Verdict

if TYPE_CHECKING:
    from optuna.storages import BaseStorage


@dataclass(frozen=True)
class ProbeTarget:
    """What probes train on: the study's data, dataset fingerprint, trainer and device."""

    data: str
    dataset_id: str
    engine: str
    yolov5_dir: str | None
    device: str
    copies: tuple[tuple[int, str], ...] = ()  # (imgsz, data.yaml) of the prepared copies data=resized trains on
    copy_format: str = ""  # their format (jpg, png, npy): part of a resized signature's cache key

    def data_yaml(self, knobs: Knobs) -> str:
        """The data.yaml a probe of ``knobs`` trains on: the original, or the copy at its imgsz."""
        if knobs.data != "resized":
            return self.data
        for imgsz, yaml in self.copies:
            if imgsz == knobs.imgsz:
                return yaml
        raise UsageError(f"no prepared copy at imgsz={knobs.imgsz} to probe data=resized on; run `speedopt prepare`")


def _fix(policy: Policy, straddles: bool = False) -> str:
    """What would let the probes judge: weights to fine-tune (when none were given), a larger budget, and where
    the loss's interval straddles the allowed loss, more seeds (a narrower interval)."""
    fixes = [] if policy.weights else ["give --weights (probes then fine-tune)"]
    fixes.append("raise --probe-grow, --probe-epochs or --probe-fraction")
    if straddles:
        fixes.append(f"give more --probe-seeds than {policy.seeds}")
    return ", or ".join(fixes)


@dataclass(frozen=True)
class Reference:
    """The baseline's accuracy under the budget candidates are judged with.

    ``values`` are its seeds' mAP50-95 (paired with a candidate's), ``map50_95`` their mean and ``spread``
    their range; ``blind`` says why this budget cannot tell signatures apart (empty: it can), ``grown``
    how the budget grew from the one asked (empty: as asked). ``map50_95`` is None, and ``why`` says
    why, when a baseline probe failed.
    """

    map50_95: float | None
    spread: float | None
    why: str = ""
    values: tuple[float, ...] = ()
    budget: ProbeBudget | None = None
    blind: str = ""
    grown: str = ""


@dataclass
class Judge:
    """Decides whether a measured config keeps accuracy, probing lazily through the cache."""

    policy: Policy
    target: ProbeTarget
    baseline: Knobs
    storage: BaseStorage
    owner: str  # who holds the host lock while probing (the study name)
    on_wait: Callable[[str], None] | None = None
    progress: Callable[[TrialProgress], None] | None = None
    ran: int = field(default=0, init=False)
    hits: int = field(default=0, init=False)
    spent: dict[str, float] = field(default_factory=dict, init=False)  # wall time of probes run here, by signature
    _cache: ProbeCache | None = field(default=None, init=False)
    _reference: Reference | None = field(default=None, init=False)  # once per process, success or failure

    def _probe_knobs(self, knobs: Knobs) -> Knobs:
        # System knobs do not change accuracy: probes load data as fast as this machine allows.
        return Knobs(**signature(knobs), workers=min(8, machine.cpu_cores()), cache="none")

    def score(self, knobs: Knobs, seed: int, budget: ProbeBudget | None = None) -> ProbeResult:
        """Val mAP of this signature for one seed and budget (the policy's by default): from the cache,
        else from a probe run now."""
        if self._cache is None:
            self._cache = ProbeCache(self.storage)
        budget = budget or self.policy.budget
        sig = signature(knobs)
        keyed = {**sig, "data": f"resized-{self.target.copy_format}"} if "data" in sig else sig  # jpg and png differ
        budgeted = replace(self.policy, epochs=budget.epochs, fraction=budget.fraction)
        key = cache_key(self.target.dataset_id, keyed, budgeted, seed, self.target.engine)
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        job = ProbeJob(
            engine=self.target.engine,
            yolov5_dir=self.target.yolov5_dir,
            data_yaml=self.target.data_yaml(knobs),
            knobs=self._probe_knobs(knobs),
            device=self.target.device,
            timeout_s=self.policy.timeout_s,
            cache_dir=str(cache_dir()),
            weights=self.policy.weights,
            epochs=budget.epochs,
            fraction=budget.fraction,
            seed=seed,
        )
        asked = "" if budget == self.policy.budget else f" ({budget})"
        label = f"probe {signature_text(sig)} seed {seed}{asked}"

        def show(update: TrialProgress) -> None:
            if self.progress:
                self.progress(replace(update, phase=f"{label}: {update.phase}"))

        start = time.monotonic()
        outcome = run_job(job, self.owner, show, self.on_wait)
        seconds = time.monotonic() - start
        self.ran += 1
        self.spent[signature_text(sig)] = self.spent.get(signature_text(sig), 0.0) + seconds
        scores = outcome.scores()
        result = ProbeResult(
            status=outcome.status,
            message=outcome.message,
            signature=sig,
            seed=seed,
            epochs=budget.epochs,
            fraction=budget.fraction,
            dataset=self.target.dataset_id,
            map50=scores.map50 if scores else None,
            map50_95=scores.map50_95 if scores else None,
            images=scores.images if scores else None,
            seconds=round(seconds, 3),
        )
        if result.ok:
            self._cache.put(key, result)  # failures are not cached: a later run may have more memory or time
        return result

    def reference(self) -> Reference:
        """The baseline's mAP50-95 over the policy's seeds, under a budget grown until informative (or
        until the next budget would take the baseline's probes past ``policy.grow_s``); once per process."""
        if self._reference is None:
            asked = budget = self.policy.budget
            spent, stop = 0.0, ""  # the baseline's probes at every budget tried, as measured (cached or not)
            while True:
                ref, runs = self._reference_at(budget)
                if ref.map50_95 is None or not ref.blind:
                    break
                spent += sum(r.seconds or 0.0 for r in runs)
                bigger = budget.grown(asked)
                if bigger is None:
                    stop = " (the largest budget a probe grows to)"
                    break
                if any(r.seconds is None for r in runs):
                    stop = " (probes cached without their time: the next budget's cost is unknown)"
                    break
                if spent + sum(r.seconds or 0.0 for r in runs) * bigger.size / budget.size > self.policy.grow_s:
                    stop = f" (a larger budget would take the baseline's probes past --probe-grow {self.policy.grow_s:g} s)"
                    break
                budget = bigger
            grown = f"grown from {asked} to {budget}" if budget != asked else ""
            why = f"{ref.blind}, even at {budget}{stop}" if ref.blind else ""
            self._reference = replace(ref, grown=grown, blind=why)
        return self._reference

    def _reference_at(self, budget: ProbeBudget) -> tuple[Reference, list[ProbeResult]]:
        runs = [self.score(self.baseline, seed, budget) for seed in self.policy.seed_list]
        failed = [r for r in runs if not r.ok]
        if failed:
            why = f"baseline probe ended {failed[0].status.value}: {failed[0].message}"
            return Reference(None, None, why, budget=budget), runs
        values = tuple(r.map50_95 or 0.0 for r in runs)
        mean, spread = sum(values) / len(values), max(values) - min(values)
        blind = not_informative(mean, spread, self.policy.limit.allowed(mean))
        return Reference(mean, spread, values=values, budget=budget, blind=blind), runs

    def verdict(self, knobs: Knobs, images_per_s: float, best_feasible: float | None) -> Verdict:
        """Feasibility of a config measured ok at ``images_per_s``, given the best feasible so far."""
        sig = signature(knobs)
        if not self.policy.probing:  # nothing judges accuracy: say whether the trained model is the baseline's
            differ = unchecked_knobs(self.policy, self.baseline, knobs)
            if differ:
                return Verdict(sig, Feasibility.FEASIBLE, reason=unchecked_text(differ), unchecked=differ)
            same = "quality off: accuracy knobs as the baseline's (the same trained model), so accuracy is kept"
            return Verdict(sig, Feasibility.FEASIBLE, reason=same)
        if sig == signature(self.baseline):
            return Verdict(sig, Feasibility.FEASIBLE, map_loss=0.0, reason="the baseline's own signature")
        if self.policy.lazy and best_feasible is not None and images_per_s <= best_feasible:
            why = f"not probed: {images_per_s:.1f} images/s cannot beat the best feasible {best_feasible:.1f}"
            return Verdict(sig, Feasibility.UNPROBED, reason=why)
        ran0, hits0, spent0 = self.ran, self.hits, dict(self.spent)
        ref = self.reference()
        verdict = self._judged(knobs, ref)
        spent = {k: round(v - spent0.get(k, 0.0), 3) for k, v in self.spent.items() if v > spent0.get(k, 0.0)}
        return replace(verdict, probes_run=self.ran - ran0, cache_hits=self.hits - hits0, probe_seconds=spent)

    def _judged(self, knobs: Knobs, ref: Reference) -> Verdict:
        """The verdict of a candidate against the baseline's reference: unknown without a probe where the
        budget cannot tell, else its probes on the baseline's seeds, paired."""
        sig = signature(knobs)
        if ref.map50_95 is None or ref.spread is None or ref.budget is None:
            return Verdict(sig, Feasibility.UNPROBED, reason=f"cannot judge: {ref.why}")
        allowed = self.policy.limit.allowed(ref.map50_95)
        blank = Verdict(
            sig, Feasibility.UNKNOWN, allowed=allowed, reference=ref.map50_95, reference_spread=ref.spread, budget=ref.budget,
        )
        if ref.blind:  # a candidate's probe could not say anything: do not run it
            return replace(blank, reason=f"accuracy unknown: {ref.blind}; {_fix(self.policy)}")
        runs = [self.score(knobs, seed, ref.budget) for seed in self.policy.seed_list]
        failed = next((r for r in runs if not r.ok or r.map50_95 is None), None)
        if failed is not None:
            why = f"probe ended {failed.status.value}: {failed.message}"
            return replace(blank, feasibility=Feasibility.REJECTED, reason=why)
        values = tuple(r.map50_95 or 0.0 for r in runs)
        loss, half = paired_loss(ref.values, values)
        decided = accuracy_verdict(loss, half, allowed)
        within = {Feasibility.FEASIBLE: "within", Feasibility.REJECTED: "beyond"}.get(decided, "straddles")
        mean = sum(values) / len(values)
        grown = f"; probe budget {ref.grown}" if ref.grown else ""
        reason = (
            f"mAP50-95 {mean:.4f} vs baseline {ref.map50_95:.4f} on {len(values)} paired seeds: loss {loss:.4f} +/- "
            f"{half:.4f} {within} the allowed {allowed:.4f}{grown}"
        )
        if decided is Feasibility.UNKNOWN:
            reason = f"accuracy unknown: {reason}; {_fix(self.policy, straddles=True)}"
        map50 = sum(r.map50 or 0.0 for r in runs) / len(runs)
        return replace(blank, feasibility=decided, map50=map50, map50_95=mean, map_loss=loss, spread=half, reason=reason)
