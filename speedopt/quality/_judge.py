"""The mAP-loss constraint: the quality gate that keeps a faster config honest.

A quality probe trains one signature for a budget (epochs x fraction of the training set, from
``--weights`` or from scratch) with one seed, and validates mAP50 and mAP50-95 on the val split.
The baseline signature is probed first, on every seed of the policy. When its probes learned nothing
(:func:`~speedopt.quality._budget.not_informative`) the budget grows, within ``--probe-grow`` and the
share of the run a probe may train; if they still learn nothing, every candidate whose accuracy knobs
differ is *unknown* without a probe of its own. Otherwise a candidate is probed on the baseline's seeds
and judged from its per-seed differences, by the rule of :mod:`speedopt.quality._rule`: screened in looks
(twice the seeds, then the next budget, while the interval straddles), then what screening keeps confirmed
on fresh seeds at a longer budget, at its share of the search's stated risk, and carried on to the run's length.
Each look runs only while it pays (:class:`~speedopt.quality._price.Price`): its estimated probes cost
less than what the candidate's measured speedup saves over the user's run. Probes are lazy (a signature is
probed only when its measured throughput could make it the best feasible trial so far) and cached
(:mod:`speedopt.quality._cache`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from speedopt import machine
from speedopt.knobs import Knobs
from speedopt.measure import JobOutcome, ProbeJob, TrialProgress, run_job
from speedopt.offline import cache_dir
from speedopt.quality import _rule as rule
from speedopt.quality._budget import ProbeBudget, cap_text, not_informative
from speedopt.quality._cache import ProbeCache, ProbeResult, cache_key
from speedopt.quality._policy import (
    Feasibility,
    Policy,
    signature,
    signature_text,
    unchecked_knobs,
    unchecked_text,
)
from speedopt.quality._price import Price, saving_s
from speedopt.quality._reason import fix_text as _fix
from speedopt.quality._reason import look_text as _look_text
from speedopt.quality._reason import with_look as _with_look
from speedopt.quality._target import ProbeTarget
from speedopt.quality._verdict import Verdict

if TYPE_CHECKING:
    from optuna.storages import BaseStorage


@dataclass(frozen=True)
class Reference:
    """The baseline's accuracy under the budget candidates are first judged at.

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
    storage: BaseStorage | None  # None: no probe cache (benchmarks/verdict_error.py)
    owner: str  # who holds the host lock while probing (the study name)
    on_wait: Callable[[str], None] | None = None
    progress: Callable[[TrialProgress], None] | None = None
    note: Callable[[str], None] | None = None  # what judging will cost, said before the probes run
    run: Callable[..., JobOutcome] = run_job  # runs a probe (run_job's signature; a replay substitutes its own)
    confirmations: int = 0  # confirmations the study started before this judge (each spends half the risk left)
    ran: int = field(default=0, init=False)
    hits: int = field(default=0, init=False)
    spent: dict[str, float] = field(default_factory=dict, init=False)  # wall time of probes run here, by signature
    _cache: ProbeCache | None = field(default=None, init=False)
    _reference: Reference | None = field(default=None, init=False)  # once per process, success or failure
    _seconds: dict[ProbeBudget, list[float]] = field(default_factory=dict, init=False)  # measured probe seconds by budget
    _known: dict[str, ProbeResult] = field(default_factory=dict, init=False)  # results this process already read or ran
    _keys: dict[tuple[Knobs, int, ProbeBudget], str] = field(default_factory=dict, init=False)  # cache keys, computed once
    _spreads: dict[ProbeBudget, dict[str, float]] = field(default_factory=dict, init=False)  # each candidate's last spread, by budget

    def _probe_knobs(self, knobs: Knobs) -> Knobs:
        # System knobs do not change accuracy: probes load data as fast as this machine allows.
        return Knobs(**signature(knobs), workers=min(8, machine.cpu_cores()), cache="none")

    def _key(self, knobs: Knobs, seed: int, budget: ProbeBudget) -> str:
        known = self._keys.get((knobs, seed, budget))
        if known is None:
            sig = signature(knobs)
            keyed = {**sig, "data": f"resized-{self.target.copy_format}"} if "data" in sig else sig  # jpg and png differ
            budgeted = replace(self.policy, epochs=budget.epochs, fraction=budget.fraction)
            known = self._keys[(knobs, seed, budget)] = cache_key(
                self.target.dataset_id, keyed, budgeted, seed, self.target.engine_spec.name, self.target.run_epochs
            )
        return known

    def _cached(self, knobs: Knobs, seed: int, budget: ProbeBudget) -> ProbeResult | None:
        if self.storage is None:  # no storage (a simulation of the rule): nothing cached
            return None
        if self._cache is None:
            self._cache = ProbeCache(self.storage)
        return self._cache.get(self._key(knobs, seed, budget))

    def score(self, knobs: Knobs, seed: int, budget: ProbeBudget | None = None) -> ProbeResult:
        """Val mAP of this signature for one seed and budget (the policy's by default): from the cache,
        else from a probe run now."""
        budget = budget or self.policy.budget
        key = self._key(knobs, seed, budget)
        if key in self._known:  # read or run before in this process: neither a new hit nor a new probe
            return self._known[key]
        result = self._cached(knobs, seed, budget)
        if result is not None:
            self.hits += 1
        else:
            result = self._probe(knobs, seed, budget)
        if result.ok and result.seconds is not None:
            self._seconds.setdefault(budget, []).append(result.seconds)
        self._known[key] = result
        return result

    def _probe(self, knobs: Knobs, seed: int, budget: ProbeBudget) -> ProbeResult:
        sig = signature(knobs)
        job = ProbeJob(
            **self.target.engine_spec.record(),
            data_yaml=self.target.data_yaml(knobs),
            knobs=self._probe_knobs(knobs),
            device=self.target.device,
            timeout_s=self.policy.timeout_s,
            cache_dir=str(cache_dir()),
            weights=self.policy.weights,
            epochs=budget.epochs,
            fraction=budget.fraction,
            seed=seed,
            run_epochs=self.target.run_epochs,
            run_images=self.target.train_images,
        )
        asked = "" if budget == self.policy.budget else f" ({budget})"
        label = f"probe {signature_text(sig)} seed {seed}{asked}"

        def show(update: TrialProgress) -> None:
            if self.progress:
                self.progress(replace(update, phase=f"{label}: {update.phase}"))

        start = time.monotonic()
        outcome = self.run(job, self.owner, show, self.on_wait)
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
        if result.ok and self._cache is not None:
            self._cache.put(self._key(knobs, seed, budget), result)  # failures are not cached: a later run may have more
        return result

    def reference(self) -> Reference:
        """The baseline's mAP50-95 over the policy's seeds, under a budget grown until its probes learned something
        (or until the next budget would take them past ``policy.grow_s`` or the share cap); once per process."""
        if self._reference is None:
            asked = budget = self.policy.budget
            spent, stop = 0.0, ""  # the baseline's probes at every budget tried, as measured (cached or not)
            while True:
                ref, runs = self._reference_at(budget)
                if ref.map50_95 is None or not ref.blind:
                    break
                spent += sum(r.seconds or 0.0 for r in runs)
                bigger = budget.grown(asked)
                if not bigger.within(self.policy.share, self.target.run_epochs):
                    stop = f" (a larger budget would train more than {cap_text(self.policy.share, self.target.run_epochs)})"
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
        return Reference(mean, spread, values=values, budget=budget, blind=not_informative(mean)), runs

    def verdict(self, knobs: Knobs, images_per_s: float, best_feasible: float | None, baseline_ips: float | None = None) -> Verdict:
        """Feasibility of a config measured ok at ``images_per_s``, given the best feasible so far and the
        baseline's measured images/s (what the candidate's probes are priced against; None: unknown)."""
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
        saving = saving_s(self.target.run_images, baseline_ips, images_per_s)
        verdict = self._judged(knobs, ref, saving)
        spent = {k: round(v - spent0.get(k, 0.0), 3) for k, v in self.spent.items() if v > spent0.get(k, 0.0)}
        return replace(verdict, probes_run=self.ran - ran0, cache_hits=self.hits - hits0, probe_seconds=spent)

    def _price(self, knobs: Knobs, budgets: tuple[ProbeBudget, ...], seeds: tuple[int, ...], saving: float | None) -> Price:
        """The probes a look at each of ``budgets`` on ``seeds`` still needs (cached ones cost nothing), and their time
        estimated from the probes measured at that budget, or scaled from the largest budget measured."""
        needed, total, basis = 0, 0.0, ""
        for budget in budgets:
            count = sum(self._cached(k, seed, budget) is None for seed in seeds for k in (self.baseline, knobs))
            needed += count
            if self._seconds.get(budget):
                each = sum(self._seconds[budget]) / len(self._seconds[budget])
                basis = f"{each:.0f} s per probe, as measured at {budget}"
            elif self._seconds:
                last = max(self._seconds, key=lambda b: b.size)
                each = sum(self._seconds[last]) / len(self._seconds[last]) * budget.size / last.size
                basis = f"{each:.0f} s per probe, scaled from {last} to {budget}"
            else:
                return Price(needed, None, "", saving, self.target.run_epochs)
            total += count * each
        return Price(needed, total, basis, saving, self.target.run_epochs)

    def _look(self, knobs: Knobs, budget: ProbeBudget, seeds: tuple[int, ...]) -> rule.Look | str:
        """Probe both sides on ``seeds`` at ``budget`` and pair them; or why a probe failed. The look's spread joins
        the search's at that budget (the floor under every later look's)."""
        base = [self.score(self.baseline, seed, budget) for seed in seeds]
        bad = next((r for r in base if not r.ok or r.map50_95 is None), None)
        if bad is not None:
            return f"baseline probe ended {bad.status.value}: {bad.message}"
        runs = [self.score(knobs, seed, budget) for seed in seeds]
        failed = next((r for r in runs if not r.ok or r.map50_95 is None), None)
        if failed is not None:
            return f"probe ended {failed.status.value}: {failed.message}"
        look = rule.Look(
            budget, seeds, tuple(r.map50_95 or 0.0 for r in base), tuple(r.map50_95 or 0.0 for r in runs),
            sum(r.map50 or 0.0 for r in runs) / len(runs),
        )
        self._spreads.setdefault(budget, {})[signature_text(signature(knobs))] = look.sd
        return look

    def _half(self, look: rule.Look, confidence: float) -> float:
        """The look's half-width at ``confidence``, its spread floored by the search's looks at its budget."""
        return rule.half_width(look, confidence, rule.floor(list(self._spreads.get(look.budget, {}).values())))

    def _next(self, budget: ProbeBudget, seeds: int) -> tuple[ProbeBudget, int] | None:
        """The look after one that straddles: twice the seeds up to the most, then the next budget (from the
        policy's seeds again) while it stays within the share cap; None at the end."""
        if seeds < self.policy.max_seeds:
            return budget, min(2 * seeds, self.policy.max_seeds)
        bigger = budget.grown(self.policy.budget)
        return (bigger, self.policy.seeds) if bigger.within(self.policy.share, self.target.run_epochs) else None

    def _judged(self, knobs: Knobs, ref: Reference, saving: float | None) -> Verdict:
        """The verdict of a candidate: unknown without a probe where the baseline's probes learned nothing; else
        screened in looks paired with the baseline, and what screening keeps confirmed on fresh seeds."""
        sig = signature(knobs)
        if ref.map50_95 is None or ref.spread is None or ref.budget is None:
            return Verdict(sig, Feasibility.UNPROBED, reason=f"cannot judge: {ref.why}")
        blank = Verdict(
            sig, Feasibility.UNKNOWN, allowed=self.policy.limit.allowed(ref.map50_95), reference=ref.map50_95,
            reference_spread=ref.spread, budget=ref.budget, saving_s=saving,
        )
        if ref.blind:  # a candidate's probe could not say anything: do not run it
            return replace(blank, reason=f"accuracy unknown: {ref.blind}; {_fix(self.policy)}")
        screened = self._screen(knobs, blank, ref, saving)
        if isinstance(screened, Verdict):
            return screened
        look, estimate = screened
        return self._confirm(knobs, blank, look, saving, estimate)

    def _screen(
        self, knobs: Knobs, blank: Verdict, ref: Reference, saving: float | None
    ) -> Verdict | tuple[rule.Look, float | None]:
        """Screening: looks on the policy's seeds until one decides or the next would cost more than it is worth.
        A look that screens kept is returned for confirmation (with the probes' estimate so far); any other end is
        the verdict (``blank`` filled in)."""
        sig = signature(knobs)
        allowed = blank.allowed or 0.0
        step: tuple[ProbeBudget, int] | None = (ref.budget or self.policy.budget, self.policy.seeds)
        look: rule.Look | None = None
        estimate: float | None = None
        stop = ""
        while step is not None:
            budget, seeds = step
            price = self._price(knobs, (budget,), tuple(range(seeds)), saving)
            if self.policy.lazy and not price.worth:
                stop = f"the next look ({price.cost_text()}) would cost more than the decision is worth: {price.saving_text()}"
                break
            if price.probes:
                estimate = (estimate or 0.0) + (price.seconds or 0.0)
                if self.note:
                    self.note(f"judging {signature_text(sig)} at {budget}, {seeds} seeds: {price.text()}")
            seen = self._look(knobs, budget, tuple(range(seeds)))
            if isinstance(seen, str):
                return replace(blank, feasibility=Feasibility.REJECTED, reason=seen, probe_estimate_s=estimate)
            look = seen
            decided = rule.verdict(look.loss, self._half(look, rule.SCREEN_CONFIDENCE), allowed)
            if decided is Feasibility.FEASIBLE:
                return look, estimate
            if decided is Feasibility.REJECTED:
                break
            step = self._next(budget, seeds)
            if step is None:
                stop = f"the most seeds ({self.policy.max_seeds}) at the largest budget within {cap_text(self.policy.share, self.target.run_epochs)}"
        if look is None:  # not one look paid for itself
            return replace(blank, reason=f"accuracy unknown: not probed: {stop}", probe_estimate_s=estimate)
        half = self._half(look, rule.SCREEN_CONFIDENCE)
        decided = rule.verdict(look.loss, half, allowed)
        reason = _look_text(look, half, allowed, decided, self.policy.budget, (ref.budget, ref.grown))
        if decided is Feasibility.UNKNOWN:
            reason = f"accuracy unknown: {reason}; stopped: {stop}; {_fix(self.policy, straddles=True)}"
        return _with_look(replace(blank, feasibility=decided, reason=reason, probe_estimate_s=estimate), look, half, allowed)

    def _confirm(
        self, knobs: Knobs, blank: Verdict, short: rule.Look, saving: float | None, estimate: float | None
    ) -> Verdict:
        """Confirmation of a screened candidate on fresh seeds at its screened budget and the first twice as long, at its
        share of the search's risk: kept only when the long look's interval and the loss carried on to the run's length
        are within the allowed loss, and the baseline's own probes did not get worse with length."""
        sig = signature(knobs)
        allowed = blank.allowed or 0.0
        screened = f"screened kept at {short.budget} on {len(short.seeds)} seeds (loss {short.loss:+.4f})"
        long = short.budget.twice(self.policy.budget, self.policy.share, self.target.run_epochs)
        if long is None:
            why = (
                f"accuracy unknown: {screened}, but no probe of at least twice that length fits within "
                f"{cap_text(self.policy.share, self.target.run_epochs)}, so how the loss moves with training cannot be seen; "
                "lower --probe-epochs or --probe-fraction, or raise --probe-share"
            )
            return _with_look(replace(blank, reason=why, probe_estimate_s=estimate), short, 0.0, allowed)
        risk = rule.confirm_risk(self.policy.risk, self.confirmations)
        self.confirmations += 1
        seeds = tuple(range(rule.CONFIRM_SEED0, rule.CONFIRM_SEED0 + self.policy.confirm_seeds))
        price = self._price(knobs, (short.budget, long), seeds, saving)
        if self.policy.lazy and not price.worth:
            why = f"accuracy unknown: {screened}; not confirmed: confirming ({price.cost_text()}) would cost more than the decision is worth: {price.saving_text()}"
            return _with_look(replace(blank, reason=why, probe_estimate_s=estimate, risk=risk), short, 0.0, allowed)
        if price.probes:
            estimate = (estimate or 0.0) + (price.seconds or 0.0)
            if self.note:
                self.note(f"confirming {signature_text(sig)} at {short.budget} and {long}, {len(seeds)} fresh seeds, risk {100 * risk:g}%: {price.text()}")
        looks: list[rule.Look] = []
        for budget in (short.budget, long):
            seen = self._look(knobs, budget, seeds)
            if isinstance(seen, str):
                return replace(blank, feasibility=Feasibility.REJECTED, reason=seen, probe_estimate_s=estimate, risk=risk)
            looks.append(seen)
        fresh, look = looks
        half = self._half(look, 1 - risk)
        at_run, growth = rule.run_loss(fresh, look, float(self.target.run_epochs))
        measured = rule.verdict(look.loss, half, allowed)
        text = _look_text(look, half, allowed, measured, self.policy.budget, None)  # its length is the rule's, not grown
        decided = measured
        if decided is Feasibility.FEASIBLE and at_run + half > allowed:
            decided = Feasibility.UNKNOWN  # within at the probe's length, not carried on to the run's
        shaken = decided is Feasibility.FEASIBLE and rule.disrupted(fresh, look, allowed)
        if shaken:
            decided = Feasibility.UNKNOWN  # the probes see the fine-tune's disruption, not its end
        grown = (
            f"; it grew {growth:+.4f} from {fresh.loss:+.4f} at {short.budget}, carried on to your {self.target.run_epochs}-epoch "
            f"run: {at_run:+.4f}" if growth else ""
        )
        reason = f"{text}, confirmed on {len(seeds)} fresh seeds at risk {100 * risk:g}% ({screened}){grown}"
        if shaken:
            reason = (
                f"accuracy unknown: {screened}; not confirmed: {text} on {len(seeds)} fresh seeds, but the baseline's own "
                f"probes got worse from {short.budget} to {long} (mAP50-95 {fresh.reference:.4f} to {look.reference:.4f}): "
                "the probes see the fine-tune's disruption, not how your run ends; raise --probe-share (longer probes)"
            )
        elif decided is Feasibility.UNKNOWN:
            fix = f"give more --confirm-seeds than {self.policy.confirm_seeds} (a narrower interval), or raise --probe-share (longer probes)"
            reason = f"accuracy unknown: {screened}; not confirmed: {text} on {len(seeds)} fresh seeds at risk {100 * risk:g}%{grown}; {fix}"
        verdict = replace(blank, feasibility=decided, reason=reason, probe_estimate_s=estimate, risk=risk, run_loss=at_run)
        return _with_look(verdict, look, half, allowed)
