"""Stop at the ceiling (``--stop-at-ceiling``): the search stops once its best config is near what this machine could
do at all with the knobs it varies (:class:`CeilingStop`, :func:`reached`, :func:`space_reached`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from speedopt.knobs import Knobs, knob_names
from speedopt.measure import Ceiling, Ceilings
from speedopt.search import _rank as rank_mod
from speedopt.search._budget import spent
from speedopt.search._headroom import headroom_of
from speedopt.search._plan import SearchPlan
from speedopt.search._skip import beaten, stored_ceilings
from speedopt.search._stop_rule import StopRule
from speedopt.search._view import View
from speedopt.study import TrialRecord, best_trial, records, schema
from speedopt.study.record_types import Ranking

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def _with_headroom(why: str, plan: SearchPlan, best: TrialRecord, ceilings: Ceilings | None) -> str:
    """The stop line, then what bounded the search and which levers are left (:func:`headroom_of`)."""
    return f"{why}. What bounds it and what is left: {headroom_of(plan.protocol, best.result, best.images_per_s, ceilings)}"

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
    missing = sum(Ceiling.name_for(kind, knobs) not in known for kind in ("data", "compute"))
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

class CeilingStop(StopRule):
    """Saves the trials after the best is as fast as this machine allows (``--stop-at-ceiling``): after the trial
    that is the best feasible one, the study stops once it reaches the share of the highest bound in the space (every
    config bounded by its ceilings), or of min(its own ceilings, found or measured now by ``ceilings_of``) where no
    knob the search varies moves them. Never once any trial beat its ceilings (:func:`beaten`); and ceilings are
    measured only while the trials left outnumber the ceiling jobs missing (else stopping saves no more than they
    cost). Asked in the trials loop, so measuring them is a job of the loop's, not of an Optuna callback's."""

    def __init__(self, plan: SearchPlan, view: View, ceilings_of: Callable[[Knobs], Ceilings | None]) -> None:
        self.plan, self.view, self.ceilings_of = plan, view, ceilings_of
        self.said: set[str] = set()

    def why(self, study: optuna.Study, trial: FrozenTrial) -> str | None:
        plan, view = self.plan, self.view
        best = best_trial(records(study))
        sampled = set(plan.protocol.space.sampled())
        if not plan.protocol.stop_at_ceiling or best is None or best.number != trial.number:
            return None
        if any(t.user_attrs.get(schema.ROLE) == "prepared" and not t.state.is_finished() for t in study.get_trials(deepcopy=False)):
            return None  # the lever the search prepared a copy for is measured before any stop
        ci = best.result.ci_rel
        fault = beaten(study)
        if fault is not None:  # a ceiling some trial beat: no stop on any ceiling of this study
            if fault not in self.said:
                view.note(fault)
                self.said.add(fault)
            return None
        ranking = schema.read_ranking(study)
        own = _own_bound(plan, study, best, ranking, self.ceilings_of)
        why = space_reached(best.images_per_s or 0.0, ranking, plan.protocol.stop_at_ceiling, ci, own)
        if why:  # every config of the space is bounded, and none could beat this one by more than the share
            return _with_headroom(why, plan, best, stored_ceilings(schema.read_ceilings(study), best.config))
        fault = space_fault(best.images_per_s or 0.0, ranking, ci)
        if fault:
            view.note(fault)
        if (sampled & _acting_on("data") and sampled & _acting_on("compute")) or "gpus" in sampled:
            return None  # either ceiling may rise with a knob the search varies (ceilings are one GPU's): never stop here
        if _too_late(plan, study, best.config):
            return None  # measuring them costs as many jobs as stopping could save: their answer changes nothing
        view.note(f"trial {trial.number} is the best so far: its data and compute ceilings (found, or measured now: --stop-at-ceiling)")
        found = self.ceilings_of(best.config)
        why = None if found is None else reached(best.images_per_s or 0.0, found, plan.protocol.stop_at_ceiling, sampled, ci)
        if found is not None:
            view.note("; ".join(found.lines(best.images_per_s, ci)))
        return _with_headroom(why, plan, best, found) if why else None
