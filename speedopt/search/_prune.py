"""The pruner: a trial clearly slower than the best stops part-way through its measured window (:class:`BestMargin`,
fed by :func:`reporting`).

The pruner's margin stands for this machine's noise: the same config measured 22.8 to 32.2 images/s in
three runs (a 29% spread) and a running rate over a few steps wobbles more, so the default margin (50%)
prunes only a config that half the speed of the best could not explain. Never on one step; never the
baseline, finals or ceilings (they report nothing). The one search rule that imports Optuna at load time (its
class is an Optuna pruner).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna
from optuna.trial import FrozenTrial

from speedopt.measure import TrialProgress
from speedopt.search._plan import SearchPlan
from speedopt.study import best_trial, records, schema


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
