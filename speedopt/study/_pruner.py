"""Pruning a trial that is clearly slower than the best one, part-way through its measured window.

A trial reports its running images/s (over the steps measured so far) as Optuna intermediate values
(step = measured steps); :class:`BestMargin`, an Optuna pruner, prunes it once it has measured at least
``min_steps`` steps and runs below ``(1 - margin)`` x the best feasible trial's images/s. The margin
stands for this machine's noise: the same config measured 22.8 to 32.2 images/s in three runs (a 29%
spread) and a running rate over a few steps wobbles more, so the default margin (50%) prunes only a
config that half the speed of the best could not explain. Never on one step; never the baseline,
finals or ceilings (they report nothing). Imported only where a study is opened (it imports Optuna).
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial

from speedopt.study._record import best_trial, records


class BestMargin(optuna.pruners.BasePruner):
    """Prune below ``(1 - margin)`` x the best feasible images/s, after ``min_steps`` measured steps."""

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
