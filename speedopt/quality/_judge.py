"""The mAP-loss constraint: the quality gate that keeps a faster config honest.

A quality probe trains one signature for a fixed budget (epochs x fraction of the training set,
fixed seed) and validates mAP50 and mAP50-95 on the val split. The baseline signature is probed with
two seeds: their mean is the reference, their difference the spread (the noise of the probe itself).
mAP loss = reference - candidate, with the interval loss +/- spread. The verdict is one of three
(:func:`~speedopt.quality._policy.accuracy_verdict`): kept (the whole interval within the allowed loss),
lost (the whole interval beyond it), unknown (the interval straddles it). Where the baseline's reference
is under :data:`~speedopt.quality.LOW_MAP` the probes learned nothing, and every candidate whose accuracy
knobs differ is unknown without a probe of its own. An unknown config is never recommended. Probes are
lazy (a signature is probed only when its measured throughput could make it the best feasible trial so
far) and cached (:mod:`speedopt.quality._cache`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from speedopt import machine
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import ProbeJob, TrialProgress, run_job
from speedopt.offline import cache_dir
from speedopt.quality._cache import ProbeCache, ProbeResult, cache_key
from speedopt.quality._policy import (
    BASELINE_SEEDS,
    Feasibility,
    Policy,
    accuracy_verdict,
    signature,
    signature_text,
    unchecked_knobs,
    unchecked_text,
    uninformative,
)
from speedopt.status import Status

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


@dataclass(frozen=True)
class Verdict:
    """What the quality gate decided for one measured config.

    ``unchecked`` names the accuracy knobs that differ from the baseline while nothing judged
    accuracy (quality off): such a config counts as feasible, since the user chose not to check, but
    it must never be shown as having kept accuracy.
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

    def constraint(self) -> float:
        """Optuna constraint value (<= 0 feasible): the loss's upper end (loss + spread) minus the allowed loss
        when probed; 1 for lost or unknown without a probe."""
        if self.feasibility is Feasibility.UNKNOWN:
            return 1.0  # never the best: nobody could tell whether it keeps accuracy
        if self.map_loss is None or self.allowed is None:
            return 1.0 if self.feasibility is Feasibility.REJECTED else 0.0
        return self.map_loss + (self.spread or 0.0) - self.allowed

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
            "probes_run": self.probes_run,
            "probe_cache_hits": self.cache_hits,
            "quality_reason": self.reason,
            "accuracy_unchecked": list(self.unchecked),
        }


FIX = "give --weights (probes then fine-tune), or raise --probe-epochs/--probe-fraction"


@dataclass(frozen=True)
class Reference:
    """The baseline's accuracy: mean mAP50-95 of two seeds and their spread (None and why, if it failed)."""

    map50_95: float | None
    spread: float | None
    why: str = ""


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
    _cache: ProbeCache | None = field(default=None, init=False)
    _reference: Reference | None = field(default=None, init=False)  # once per process, success or failure

    def _probe_knobs(self, knobs: Knobs) -> Knobs:
        # System knobs do not change accuracy: probes load data as fast as this machine allows.
        return Knobs(**signature(knobs), workers=min(8, machine.cpu_cores()), cache="none")

    def score(self, knobs: Knobs, seed: int) -> ProbeResult:
        """Val mAP of this signature for one seed: from the cache, else from a probe run now."""
        if self._cache is None:
            self._cache = ProbeCache(self.storage)
        sig = signature(knobs)
        keyed = {**sig, "data": f"resized-{self.target.copy_format}"} if "data" in sig else sig  # jpg and png differ
        key = cache_key(self.target.dataset_id, keyed, self.policy, seed, self.target.engine)
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
            epochs=self.policy.epochs,
            fraction=self.policy.fraction,
            seed=seed,
        )
        label = f"probe {signature_text(sig)} seed {seed}"

        def show(update: TrialProgress) -> None:
            if self.progress:
                self.progress(replace(update, phase=f"{label}: {update.phase}"))

        outcome = run_job(job, self.owner, show, self.on_wait)
        self.ran += 1
        scores = outcome.scores()
        result = ProbeResult(
            status=outcome.status,
            message=outcome.message,
            signature=sig,
            seed=seed,
            epochs=self.policy.epochs,
            fraction=self.policy.fraction,
            dataset=self.target.dataset_id,
            map50=scores.map50 if scores else None,
            map50_95=scores.map50_95 if scores else None,
            images=scores.images if scores else None,
        )
        if result.ok:
            self._cache.put(key, result)  # failures are not cached: a later run may have more memory or time
        return result

    def reference(self) -> Reference:
        """The baseline's mAP50-95 (mean of two seeds) and spread, probed once per process."""
        if self._reference is None:
            runs = [self.score(self.baseline, seed) for seed in BASELINE_SEEDS]
            failed = [r for r in runs if not r.ok]
            if failed:
                why = f"baseline probe ended {failed[0].status.value}: {failed[0].message}"
                self._reference = Reference(None, None, why)
            else:
                values = [r.map50_95 for r in runs if r.map50_95 is not None]
                self._reference = Reference(sum(values) / len(values), max(values) - min(values))
        return self._reference

    def verdict(self, knobs: Knobs, images_per_s: float, best_feasible: float | None) -> Verdict:
        """Feasibility of a config measured ok at ``images_per_s``, given the best feasible so far."""
        sig = signature(knobs)
        ran0, hits0 = self.ran, self.hits
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
        ref = self.reference()
        if ref.map50_95 is None or ref.spread is None:
            why = f"cannot judge: {ref.why}"
            return Verdict(sig, Feasibility.UNPROBED, probes_run=self.ran - ran0, cache_hits=self.hits - hits0, reason=why)
        allowed = self.policy.limit.allowed(ref.map50_95)
        blind = uninformative(ref.map50_95)
        if blind:  # a candidate's probe could not say anything: do not run it
            why = f"accuracy unknown: {blind}; {FIX}"
            return Verdict(
                sig, Feasibility.UNKNOWN, allowed=allowed, spread=ref.spread, reference=ref.map50_95,
                probes_run=self.ran - ran0, cache_hits=self.hits - hits0, reason=why,
            )
        run = self.score(knobs, BASELINE_SEEDS[0])
        ran, hits = self.ran - ran0, self.hits - hits0
        if not run.ok or run.map50_95 is None:
            why = f"probe ended {run.status.value}: {run.message}"
            return Verdict(
                sig, Feasibility.REJECTED, allowed=allowed, spread=ref.spread, reference=ref.map50_95,
                probes_run=ran, cache_hits=hits, reason=why,
            )
        loss = ref.map50_95 - run.map50_95
        decided = accuracy_verdict(loss, ref.spread, allowed)
        within = {Feasibility.FEASIBLE: "within", Feasibility.REJECTED: "beyond"}.get(decided, "straddles")
        reason = (
            f"mAP50-95 {run.map50_95:.4f} vs baseline {ref.map50_95:.4f}: loss {loss:.4f} +/- {ref.spread:.4f} (the "
            f"seeds' spread) {within} the allowed {allowed:.4f}"
        )
        if decided is Feasibility.UNKNOWN:
            reason = f"accuracy unknown: {reason}; {FIX}"
        return Verdict(
            sig, decided, run.map50, run.map50_95, loss, allowed,
            ref.spread, ref.map50_95, probes_run=ran, cache_hits=hits, reason=reason,
        )


def not_measured(knobs: Knobs, status: Status) -> Verdict:
    """The verdict of a trial that did not end ok: nothing to judge."""
    return Verdict(signature(knobs), Feasibility.NOT_MEASURED, reason=f"not measured: {status.value}")
