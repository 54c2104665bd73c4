"""The budget: no trial past the study's target, shared by every worker, and none started after the run's timeout.

- :class:`Target` (a :class:`~speedopt.search._stop_rule.StopRule`), :func:`full`, :func:`spent`: a trial pruned
  part-way counts (it ran the trainer), a config skipped before it ran does not; the run's ``--timeout`` bounds the
  trials loop beside them;
- :func:`guarded`, the full-study prune: a worker that lost the race for the last slot measures nothing;
- what every other rule compares against (:func:`best_feasible`, :func:`baseline_speed`) and how a rule stops the
  study (:func:`stop_study`: why is kept for the report).

Imports Optuna only where it runs (the search's rules are imported at the search's start; only the pruner's module,
:mod:`speedopt.search._prune`, needs Optuna to define its class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt.search._stop_rule import StopRule
from speedopt.study import best_trial, records, schema
from speedopt.study.record_types import measured_pruned

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def best_feasible(study: optuna.Study) -> float | None:
    """Images/s of the best trial so far (None if none yet): what the pruner, the skip and the stop compare against."""
    best = best_trial(records(study))
    return best.images_per_s if best else None

def baseline_speed(study: optuna.Study) -> float | None:
    """Images/s of the study's baseline trial (None until it measured ok): what a candidate's probes are priced against."""
    base = next((r for r in records(study) if r.is_baseline and r.result.ok), None)
    return base.images_per_s if base else None

def stop_study(study: optuna.Study, why: str) -> None:
    """Stop the study's loop and keep why (the report says it)."""
    schema.write_stopped(study, why)
    study.stop()

def complete(study: optuna.Study) -> int:
    """The study's complete trials."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

def spent(study: optuna.Study) -> int:
    """The trials that count toward ``--trials``: complete ones and those pruned part-way (they ran too)."""
    from optuna.trial import TrialState

    return sum(t.state == TrialState.COMPLETE or measured_pruned(t) for t in study.get_trials(deepcopy=False))

def full(study: optuna.Study, target: int) -> bool:
    """The study holds its target: spent trials (:func:`spent`), or those and running ones with nothing queued."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    done, running = spent(study), sum(t.state == TrialState.RUNNING for t in trials)
    return done >= target or (done + running >= target and all(t.state != TrialState.WAITING for t in trials))

def _busy(trials: list[FrozenTrial]) -> int:
    """The trials that hold a slot of the target: complete, running, or pruned part-way (they ran)."""
    from optuna.trial import TrialState

    return sum(t.state in (TrialState.COMPLETE, TrialState.RUNNING) or measured_pruned(t) for t in trials)


class Target(StopRule):
    """Saves trials past the target: the loop stops starting trials once spent and running ones reach it (as
    Optuna's MaxTrialsCallback, counting a trial pruned part-way: ``--trials 6`` runs the trainer at most 6
    times; the run's ``--timeout`` bounds the loop beside it)."""

    kept = False

    def __init__(self, target: int) -> None:
        self.target = target

    def why(self, study: optuna.Study, trial: FrozenTrial) -> str | None:
        if _busy(study.get_trials(deepcopy=False)) >= self.target:
            return f"the study has its {self.target} trials run or running"
        return None

def guarded(objective: Callable[[optuna.Trial], float], target: int) -> Callable[[optuna.Trial], float]:
    """Saves a measurement nobody asked for: prune a trial that would exceed the target (another worker took
    the last slot meanwhile)."""

    import optuna

    def run_one(trial: optuna.Trial) -> float:
        if _busy([t for t in trial.study.get_trials(deepcopy=False) if t.number != trial.number]) >= target:
            raise optuna.TrialPruned(f"the study already has {target} trials run or running")
        return objective(trial)

    return run_one
