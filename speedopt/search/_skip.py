"""The skip: a config measured before, or one its ceilings bound below the best, is not measured again (never on
ceilings a trial has beaten: :func:`beaten`); after :data:`QUEUE_AFTER` repeated configs in a row one the space has
not measured is queued (:func:`enqueue_unmeasured`), and none left stops the search (the space is used up), as do
:data:`DUPLICATE_LIMIT` such proposals in a row in a space too large to enumerate.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, Ceilings, TrialRequest, TrialResult
from speedopt.search import _rank as rank_mod
from speedopt.search._budget import best_feasible, stop_study
from speedopt.search._plan import SearchPlan
from speedopt.study import Space, best_trial, records, schema

if TYPE_CHECKING:
    import optuna

#: Proposals in a row that repeat measured configs before the search stops: the space is used up.
DUPLICATE_LIMIT = 25
#: Proposals in a row that repeat measured configs before an unmeasured one is queued (:func:`enqueue_unmeasured`).
QUEUE_AFTER = 3


def duplicate_of(study: optuna.Study, asked: Knobs, request: TrialRequest | TrialResult) -> int | None:
    """The earlier trial that measured the same config (as asked, or as it will run), if any; a trial the
    pruner stopped counts too (measured far enough to know it is slow: never again)."""
    from optuna.trial import TrialState

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
        fault = stored_ceilings(known, r.config).fault(r.images_per_s, r.result.ci_rel)
        if fault is not None:
            return f"trial {r.number}: {fault}"
    return None

def stored_ceilings(known: Mapping[str, Ceiling], config: Knobs) -> Ceilings:
    """The ceilings of ``config`` (as run) among a study's stored ones (``known``); either may be None."""
    return Ceilings(known.get(Ceiling.name_for("data", config)), known.get(Ceiling.name_for("compute", config)))

def unmeasured(study: optuna.Study, space: Space) -> list[Knobs] | None:
    """The space's configs no trial measured, pruned, runs or holds in the queue (None: too many to enumerate)."""
    from optuna.trial import TrialState

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
        import optuna

        why = None if baseline else self.why(trial, knobs, request)
        if why is None:
            self.in_a_row = 0
            return
        self.in_a_row += 1  # not measured as a new trial: the budget goes to configs that may win
        if self.in_a_row >= QUEUE_AFTER and trial.user_attrs.get(schema.DUPLICATE_OF) is not None:
            space = self.plan.protocol.space
            if not enqueue_unmeasured(trial.study, space, self.plan.seed * 100_003 + trial.number) and unmeasured(trial.study, space) == []:
                stop_study(trial.study, "every config of the space is measured: the space is used up")
        if self.in_a_row >= DUPLICATE_LIMIT:
            stop_study(trial.study, f"the sampler proposed only measured or hopeless configs {DUPLICATE_LIMIT} times in a row: the space is used up")
        raise optuna.TrialPruned(why)
