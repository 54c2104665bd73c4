"""Every rule that stops a search or skips a config, and what each is meant to save.

- **the budget** (:func:`max_trials`, :func:`full`, :func:`spent`, and the run's ``--timeout``): no trial past
  the study's target, shared by every worker, and none started after the timeout; a trial pruned part-way
  counts (it ran the trainer), a config skipped before it ran does not;
- **the full-study prune** (:func:`guarded`): a worker that lost the race for the last slot measures nothing;
- **the skip** (:class:`Skips`): a config measured before, or one its ceilings bound below the best, is not
  measured again (never on ceilings a trial has beaten: :func:`beaten`); after :data:`QUEUE_AFTER` repeated
  configs in a row one the space has not measured is queued (:func:`enqueue_unmeasured`), and none left stops
  the search (the space is used up), as do :data:`DUPLICATE_LIMIT` such proposals in a row in a space too
  large to enumerate;
- **the pruner** (:class:`BestMargin`, fed by :func:`reporting`): a trial clearly slower than the best stops
  part-way through its measured window;
- **stop at the ceiling** (:func:`stop_at_ceiling`, :func:`reached`, :func:`space_reached`): the search
  stops once its best config is near what this machine could do at all with the knobs it varies.

The pruner's margin stands for this machine's noise: the same config measured 22.8 to 32.2 images/s in
three runs (a 29% spread) and a running rate over a few steps wobbles more, so the default margin (50%)
prunes only a config that half the speed of the best could not explain. Never on one step; never the
baseline, finals or ceilings (they report nothing). Imported only where a study runs (it imports Optuna).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping

import optuna
from optuna.trial import FrozenTrial, TrialState

from speedopt.knobs import Knobs, knob_names
from speedopt.measure import Ceiling, Ceilings, TrialProgress, TrialRequest, TrialResult, key_of
from speedopt.search import _rank as rank_mod
from speedopt.search._headroom import headroom_of
from speedopt.search._plan import SearchPlan
from speedopt.search._view import View
from speedopt.study import Space, TrialRecord, best_trial, records, schema
from speedopt.study.record_types import Ranking, measured_pruned

#: Proposals in a row that repeat measured configs before the search stops: the space is used up.
DUPLICATE_LIMIT = 25
#: Proposals in a row that repeat measured configs before an unmeasured one is queued (:func:`enqueue_unmeasured`).
QUEUE_AFTER = 3


def best_feasible(study: optuna.Study) -> float | None:
    """Images/s of the best trial so far (None if none yet): what the pruner, the skip and the stop compare against."""
    best = best_trial(records(study))
    return best.images_per_s if best else None


def baseline_speed(study: optuna.Study) -> float | None:
    """Images/s of the study's baseline trial (None until it measured ok): what a candidate's probes are priced against."""
    base = next((r for r in records(study) if r.is_baseline and r.result.ok), None)
    return base.images_per_s if base else None


def _stop(study: optuna.Study, why: str) -> None:
    """Stop the study's loop and keep why (the report says it)."""
    schema.write_stopped(study, why)
    study.stop()


def complete(study: optuna.Study) -> int:
    """The study's complete trials."""
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def spent(study: optuna.Study) -> int:
    """The trials that count toward ``--trials``: complete ones and those pruned part-way (they ran too)."""
    return sum(t.state == TrialState.COMPLETE or measured_pruned(t) for t in study.get_trials(deepcopy=False))


def full(study: optuna.Study, target: int) -> bool:
    """The study holds its target: spent trials (:func:`spent`), or those and running ones with nothing queued."""
    trials = study.get_trials(deepcopy=False)
    done, running = spent(study), sum(t.state == TrialState.RUNNING for t in trials)
    return done >= target or (done + running >= target and all(t.state != TrialState.WAITING for t in trials))


def max_trials(target: int) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Saves trials past the target: the loop stops starting trials once spent and running ones reach it (as
    Optuna's MaxTrialsCallback, counting a trial pruned part-way: ``--trials 6`` runs the trainer at most 6
    times; the run's ``--timeout`` goes to ``Study.optimize`` beside it)."""

    def check(study: optuna.Study, trial: FrozenTrial) -> None:
        trials = study.get_trials(deepcopy=False)
        if sum(t.state in (TrialState.COMPLETE, TrialState.RUNNING) or measured_pruned(t) for t in trials) >= target:
            study.stop()

    return check


def guarded(objective: Callable[[optuna.Trial], float], target: int) -> Callable[[optuna.Trial], float]:
    """Saves a measurement nobody asked for: prune a trial that would exceed the target (another worker took
    the last slot meanwhile)."""

    def run_one(trial: optuna.Trial) -> float:
        others = [t for t in trial.study.get_trials(deepcopy=False) if t.number != trial.number]
        busy = sum(t.state in (TrialState.COMPLETE, TrialState.RUNNING) or measured_pruned(t) for t in others)
        if busy >= target:
            raise optuna.TrialPruned(f"the study already has {target} trials run or running")
        return objective(trial)

    return run_one


def duplicate_of(study: optuna.Study, asked: Knobs, request: TrialRequest | TrialResult) -> int | None:
    """The earlier trial that measured the same config (as asked, or as it will run), if any; a trial the
    pruner stopped counts too (measured far enough to know it is slow: never again)."""
    runs = request.knobs if isinstance(request, TrialRequest) else None
    for r in records(study):
        if r.result.requested == asked or (runs is not None and r.config == runs):
            return r.number
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        if t.user_attrs.get(schema.PRUNED_CONFIG) == asked.to_dict():
            return t.number
    return None


def beaten(study: optuna.Study) -> str | None:
    """Why this study's ceilings do not hold (None: no trial beat them): a trial measured above min(its ceilings)
    beyond both intervals (:meth:`Ceilings.fault`). Then no rule skips or stops on any ceiling: the same cause
    (a ceiling job that ran other than the trials, or a trial that ran other than the real run) may bias them all."""
    known = schema.read_ceilings(study)
    if not known:
        return None
    for r in records(study):
        if not r.result.ok:
            continue
        fault = _stored(known, r.config).fault(r.images_per_s, r.result.ci_rel)
        if fault is not None:
            return f"trial {r.number}: {fault}"
    return None


def _stored(known: Mapping[str, Ceiling], config: Knobs) -> Ceilings:
    """The ceilings of ``config`` (as run) among a study's stored ones (``known``); either may be None."""
    return Ceilings(known.get(f"data|{key_of('data', config)}"), known.get(f"compute|{key_of('compute', config)}"))


def _with_headroom(why: str, plan: SearchPlan, best: TrialRecord, ceilings: Ceilings | None) -> str:
    """The stop line, then what bounded the search and which levers are left (:func:`headroom_of`)."""
    return f"{why}. What bounds it and what is left: {headroom_of(plan.protocol, best.result, best.images_per_s, ceilings)}"


def unmeasured(study: optuna.Study, space: Space) -> list[Knobs] | None:
    """The space's configs no trial measured, pruned, runs or holds in the queue (None: too many to enumerate)."""
    grid = rank_mod.configs(space)
    if grid is None:
        return None
    fixed = space.fixed()
    done = records(study)
    seen = {r.result.requested for r in done} | {r.config for r in done}
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.PRUNED and t.user_attrs.get(schema.PRUNED_CONFIG):
            seen.add(Knobs.from_dict(t.user_attrs[schema.PRUNED_CONFIG]))
        elif t.state in (TrialState.WAITING, TrialState.RUNNING):  # queued, or being measured now
            params = t.system_attrs.get("fixed_params") or t.params
            if set(params) >= set(space.sampled()):
                seen.add(Knobs(**{**fixed, **params}))
    return [k for k in grid if k not in seen]


def enqueue_unmeasured(study: optuna.Study, space: Space, seed: int) -> bool:
    """After a proposal that repeated a measured config: queue one of the space's unmeasured configs, drawn with
    ``seed`` among the best config's neighbours (one knob changed) where any is left, so the next trial measures
    something new (TPE past its random start keeps proposing its best in a small space). False when none is
    left or the space is too large to enumerate."""
    left = unmeasured(study, space)
    if not left:
        return False
    best = best_trial(records(study))
    if best is not None:  # a neighbour of the best (one knob changed) where one is left: where a better one likely is
        near = [k for k in left if sum(a != b for a, b in zip(k.to_dict().values(), best.config.to_dict().values())) == 1]
        left = near or left
    pick = random.Random(seed).choice(left)
    sampled = space.sampled()
    study.enqueue_trial({k: v for k, v in pick.to_dict().items() if k in sampled}, user_attrs={schema.ROLE: "unmeasured"})
    return True


def hopeless(knobs: Knobs, known: Mapping[str, Ceiling], best: float | None, margin: float) -> str | None:
    """Why ``knobs`` cannot catch the best config (its bound below (1 - margin) x best), or None."""
    if not best or not margin:
        return None
    top = rank_mod.bound_of(knobs, known)
    if top is None or top >= (1.0 - margin) * best:
        return None
    return (
        f"its ceilings bound it at {top:.1f} images/s, below {100 * (1 - margin):.0f}% of the best's {best:.1f}: "
        "pruned before it ran (--prune-margin)"
    )


class Skips:
    """Saves measuring what is known: a sampled config measured before (or pruned), or one whose ceilings
    cannot reach the best, is pruned before it runs; :data:`DUPLICATE_LIMIT` such proposals in a row stop
    the search (the sampler has nothing new left). One per run: it counts the proposals in a row."""

    def __init__(self, plan: SearchPlan) -> None:
        self.plan, self.in_a_row = plan, 0

    def why(self, trial: optuna.Trial, knobs: Knobs, request: TrialRequest | TrialResult) -> str | None:
        """Why a sampled config is not measured: measured before, or its ceilings cannot reach the best (None: measure it)."""
        earlier = duplicate_of(trial.study, knobs, request)
        if earlier is not None:
            trial.set_user_attr(schema.DUPLICATE_OF, earlier)
            return f"config already measured in trial {earlier}"
        runs = request.knobs if isinstance(request, TrialRequest) else knobs
        known = schema.read_ceilings(trial.study)
        if not known or beaten(trial.study) is not None:
            return None  # no ceilings, or ceilings a trial beat: they bound nothing, so they skip nothing
        why = hopeless(runs, known, best_feasible(trial.study), self.plan.protocol.prune_margin)
        if why is not None:
            trial.set_user_attr(schema.PRUNED, why)
            trial.set_user_attr(schema.PRUNED_CONFIG, knobs.to_dict())
        return why

    def check(self, trial: optuna.Trial, knobs: Knobs, request: TrialRequest | TrialResult, baseline: bool) -> None:
        """Raise ``optuna.TrialPruned`` for a config not to measure (never the baseline), stopping the study at the limit."""
        why = None if baseline else self.why(trial, knobs, request)
        if why is None:
            self.in_a_row = 0
            return
        self.in_a_row += 1  # not measured as a new trial: the budget goes to configs that may win
        if self.in_a_row >= QUEUE_AFTER and trial.user_attrs.get(schema.DUPLICATE_OF) is not None:
            space = self.plan.protocol.space
            if not enqueue_unmeasured(trial.study, space, self.plan.seed * 100_003 + trial.number) and unmeasured(trial.study, space) == []:
                _stop(trial.study, "every config of the space is measured: the space is used up")
        if self.in_a_row >= DUPLICATE_LIMIT:
            _stop(trial.study, f"the sampler proposed only measured or hopeless configs {DUPLICATE_LIMIT} times in a row: the space is used up")
        raise optuna.TrialPruned(why)


class BestMargin(optuna.pruners.BasePruner):
    """Saves the rest of a slow trial's window: prune below ``(1 - margin)`` x the best feasible images/s, after
    ``min_steps`` measured steps (a trial reports its running images/s as intermediate values, step = measured steps)."""

    def __init__(self, margin: float, min_steps: int):
        self.margin, self.min_steps = margin, min_steps

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if not self.margin or step is None or step < self.min_steps:
            return False
        best = best_trial(records(study))
        if best is None or not best.images_per_s:
            return False
        return trial.intermediate_values[step] < (1.0 - self.margin) * best.images_per_s


def pruned_text(rate: float, steps: int, study: optuna.Study, margin: float) -> str:
    """Why a trial was pruned, in one line (the trial's ``pruned`` user attr)."""
    best = best_trial(records(study))
    against = f"trial {best.number}'s {best.images_per_s:.1f} images/s" if best and best.images_per_s else "the best"
    return (
        f"pruned after {steps} measured steps at {rate:.1f} images/s: below {100 * (1 - margin):.0f}% of {against} "
        f"(--prune-margin {margin:g})"
    )


def pruner(plan: SearchPlan) -> BestMargin:
    """The study's pruner: a trial clearly slower than the best, part-way through its window (--prune-margin)."""
    return BestMargin(plan.protocol.prune_margin, max(3, plan.protocol.steps // 2))


def reporting(trial: optuna.Trial, plan: SearchPlan, show: Callable[[TrialProgress], None]) -> Callable[[TrialProgress], None]:
    """A progress callback that also reports each measured step's running images/s and prunes when Optuna says so."""

    def progress(update: TrialProgress) -> None:
        show(update)
        rate, step = update.images_per_s, update.done
        if update.phase != "measure" or not rate or step is None:
            return
        trial.report(rate, step)
        if trial.should_prune():
            why = pruned_text(rate, step, trial.study, plan.protocol.prune_margin)
            trial.set_user_attr(schema.PRUNED, why)
            raise optuna.TrialPruned(why)

    return progress


def _acting_on(side: str) -> set[str]:
    """The knobs the registry says act on the ``side`` ceiling (the knobs its stored key holds)."""
    return set(knob_names(lambda k: side in k.sides))


def reached(images_per_s: float, ceilings: Ceilings, stop_at: float, sampled: Iterable[str], ci_rel: float | None = None) -> str | None:
    """Why a search may stop: the config reached ``stop_at`` of min(ceilings) and the search varies none of the
    knobs the binding ceiling depends on (``sampled``: the knobs it varies), so no config it can still try has a
    higher bound. None: go on (or ``stop_at`` is 0), and always when the trial (its interval ``ci_rel``) beat
    the ceilings: a ceiling a trial beats is no bound (:meth:`Ceilings.fault`)."""
    share = ceilings.share(images_per_s)
    if not stop_at or share is None or share < stop_at or ceilings.binding is None:
        return None
    if ceilings.fault(images_per_s, ci_rel) is not None:
        return None
    movers = sorted(set(sampled) & _acting_on("data" if ceilings.binding == "data" else "compute"))
    if movers:  # another value of these may raise the binding ceiling itself
        return None
    return (
        f"the best config measured {images_per_s:.1f} images/s, {100 * share:.0f}% of min(ceilings) "
        f"{ceilings.bound:.1f} images/s, and the {ceilings.binding} ceiling binds, whose knobs this search does not vary: "
        f"nothing left to gain from the knobs it varies on this machine (--no-stop-at-ceiling searches on)"
    )


def space_reached(
    images_per_s: float, ranking: Ranking | None, stop_at: float, ci_rel: float | None = None, own_bound: float | None = None
) -> str | None:
    """Why a search may stop: its best config's bound (``own_bound``, from the same ceilings as every other's) is
    within the noise (the best's ``ci_rel``, at least 1%; never below ``stop_at``) of the highest bound in the whole
    space, so no config's ceilings let it beat the best by more than that; where the best's own bound is not known, its measured ``images_per_s`` is compared with that highest
    bound instead. None: go on, also when the best beat that bound beyond its interval ``ci_rel`` (the bounds do
    not hold).

    Bound against bound, because the bounds share their bias: with no loader workers a config's bound is the serial
    sum of its ceilings, which the replay's tables measured 1-17% below the config's own speed, so a measured speed
    against the highest bound stopped a search at a config 6% short of the best (benchmarks/RESULTS.md)."""
    if not stop_at or ranking is None or ranking.space_bound is None:
        return None
    level = own_bound if own_bound is not None else images_per_s
    # Bound against bound: within the noise (the best's own interval, at least 1%), not within the stop share: bounds
    # 3% apart held configs 10% apart in the replay's data table
    share = stop_at if own_bound is None else max(stop_at, 1.0 - max(ci_rel or 0.0, 0.01))
    if level < share * ranking.space_bound or space_fault(images_per_s, ranking, ci_rel):
        return None
    what = f"; its bound {own_bound:.1f} images/s is" if own_bound is not None else ","
    return (
        f"the best config measured {images_per_s:.1f} images/s{what} {100 * level / ranking.space_bound:.0f}% of the "
        f"highest bound of any of the space's {ranking.configs} configs ({ranking.space_bound:.1f} images/s, from their ceilings): "
        "nothing left to gain from the knobs it varies on this machine (--no-stop-at-ceiling searches on)"
    )


def space_fault(images_per_s: float, ranking: Ranking | None, ci_rel: float | None) -> str | None:
    """Why the space's highest bound does not hold (None: it may): the best beat it beyond its interval ``ci_rel``."""
    if ranking is None or ranking.space_bound is None or not Ceilings.above(images_per_s, ci_rel, ranking.space_bound, None):
        return None
    return (
        f"measurement fault: the best config measured {images_per_s:.1f} images/s (+/-{100 * (ci_rel or 0):.1f}%), above the "
        f"highest bound of any of the space's {ranking.configs} configs ({ranking.space_bound:.1f} images/s): no stop on that bound"
    )


def _too_late(plan: SearchPlan, study: optuna.Study, knobs: Knobs) -> bool:
    """Measuring the ceilings ``knobs`` still misses would cost as many jobs as the trials a stop could save."""
    known = schema.read_ceilings(study)
    missing = sum(f"{kind}|{key_of(kind, knobs)}" not in known for kind in ("data", "compute"))
    return missing > 0 and plan.protocol.trials - spent(study) <= missing


def _own_bound(
    plan: SearchPlan, study: optuna.Study, best: TrialRecord, ranking: Ranking | None, ceilings_of: Callable[[Knobs], Ceilings | None]
) -> float | None:
    """The best config's bound, to hold against the space's (None: the space was not ranked, or is unbounded). The
    branch and bound leaves most configs' ceilings unmeasured: the best's missing ones are measured now, while the
    trials left outnumber them (a measured speed against a bound would carry the serial bound's bias)."""
    if ranking is None or not ranking.ran or ranking.space_bound is None:
        return None
    own = rank_mod.bound_of(best.config, schema.read_ceilings(study))
    if own is not None or _too_late(plan, study, best.config):
        return own
    found = ceilings_of(best.config)
    return None if found is None else rank_mod.bound(found, best.config.workers)


def stop_at_ceiling(
    plan: SearchPlan, view: View, ceilings_of: Callable[[Knobs], Ceilings | None]
) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Saves the trials after the best is as fast as this machine allows (``--stop-at-ceiling``): an Optuna
    callback (after each trial is stored) that, when the trial just finished is the best feasible one, stops
    the study once it reaches the share of the highest bound in the space (every config bounded by its ceilings),
    or of min(its own ceilings, found or measured now by ``ceilings_of``) where no knob the search varies moves them.
    Never once any trial beat its ceilings (:func:`beaten`); and ceilings are measured only while the trials left
    outnumber the ceiling jobs missing (else stopping saves no more than they cost)."""
    said: set[str] = set()

    def check(study: optuna.Study, trial: FrozenTrial) -> None:
        best = best_trial(records(study))
        sampled = set(plan.protocol.space.sampled())
        if not plan.protocol.stop_at_ceiling or best is None or best.number != trial.number:
            return
        if any(t.user_attrs.get(schema.ROLE) == "prepared" and not t.state.is_finished() for t in study.get_trials(deepcopy=False)):
            return  # the lever the search prepared a copy for is measured before any stop
        ci = best.result.ci_rel
        fault = beaten(study)
        if fault is not None:  # a ceiling some trial beat: no stop on any ceiling of this study
            if fault not in said:
                view.note(fault)
                said.add(fault)
            return
        ranking = schema.read_ranking(study)
        own = _own_bound(plan, study, best, ranking, ceilings_of)
        why = space_reached(best.images_per_s or 0.0, ranking, plan.protocol.stop_at_ceiling, ci, own)
        if why:  # every config of the space is bounded, and none could beat this one by more than the share
            _stop(study, _with_headroom(why, plan, best, _stored(schema.read_ceilings(study), best.config)))
            return
        fault = space_fault(best.images_per_s or 0.0, ranking, ci)
        if fault:
            view.note(fault)
        if (sampled & _acting_on("data") and sampled & _acting_on("compute")) or "gpus" in sampled:
            return  # either ceiling may rise with a knob the search varies (ceilings are one GPU's): never stop here
        if _too_late(plan, study, best.config):
            return  # measuring them costs as many jobs as stopping could save: their answer changes nothing
        view.note(f"trial {trial.number} is the best so far: its data and compute ceilings (found, or measured now: --stop-at-ceiling)")
        found = ceilings_of(best.config)
        why = None if found is None else reached(best.images_per_s or 0.0, found, plan.protocol.stop_at_ceiling, sampled, ci)
        if found is not None:
            view.note("; ".join(found.lines(best.images_per_s, ci)))
        if why:
            _stop(study, _with_headroom(why, plan, best, found))

    return check
