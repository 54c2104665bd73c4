"""A trial's constraints in the one form every Optuna reader knows, so every reader sees the verdict (issue 56).

Optuna reads two forms: named, one system attr each (``constraints:NAME``, Optuna 5's ``Trial.set_constraint``), and
the list (``constraints``, its older form, read as names ``"0"``, ``"1"``...). optuna-dashboard (0.21) reads the list
only: with the named form, which speedopt stored before, it drew a trial whose accuracy was lost as feasible. So a
trial stores the list, in :data:`NAMES`' order (``Trial.constraints`` reads ``{"0": measured, "1": map_loss}``).

A value <= 0 is feasible. ``measured``: 0 when the trial measured ok. ``map_loss``: the verdict's
(:meth:`speedopt.quality.Verdict.constraint`): only a kept accuracy (or no accuracy change) is <= 0; lost, unknown
and never judged are > 0. A study stored before the list (named constraints, and a never-judged change stored
feasible) is read through :func:`with_constraint_lists`: the dashboard serves it that way and ``speedopt
import``/``export`` copy it that way, so the file the user gets carries the list.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Container
from typing import TYPE_CHECKING

from speedopt.quality import Feasibility

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial, TrialState

CONSTRAINTS = "constraints"  # the list form's system attr (optuna.study._constrained_optimization's key)
NAMES = ("measured", "map_loss")  # the named constraints, in the list's order


def write_constraints(trial: optuna.Trial, measured: float, map_loss: float) -> None:
    """Store a finished trial's constraints as the list (see the module docstring)."""
    # Optuna's public Trial has no setter for the list (its samplers write it from a constraints_func, which would
    # also make TPE sample on the constraints): the trial's own storage writes it, as those samplers do
    trial.storage.set_trial_system_attr(trial._trial_id, CONSTRAINTS, [measured, map_loss])


def constraint_list(trial: FrozenTrial) -> list[float] | None:
    """The list form of ``trial``'s constraints (None: it has none, such as a trial pruned or still running). A
    never-judged accuracy change (verdict "unprobed"), which studies before issue 56 stored as feasible (0), is
    infeasible (1), as its verdict says."""
    system = trial.system_attrs
    stored = system.get(CONSTRAINTS)
    if isinstance(stored, (list, tuple)):
        return list(stored)
    named = [system.get(f"{CONSTRAINTS}:{name}") for name in NAMES]
    if not all(isinstance(v, (int, float)) for v in named):
        return None
    values = [float(v) for v in named]  # type: ignore[arg-type]
    accuracy = trial.user_attrs.get("accuracy")  # schema.ACCURACY (schema re-exports this module: it cannot import it)
    if isinstance(accuracy, dict) and accuracy.get("verdict") == Feasibility.UNPROBED.value:
        values[1] = max(values[1], 1.0)
    return values


def _listed(trial: FrozenTrial) -> FrozenTrial:
    found = constraint_list(trial)
    if found is None or trial.system_attrs.get(CONSTRAINTS) == found:
        return trial
    shown = copy.copy(trial)
    rest = {k: v for k, v in trial.system_attrs.items() if not k.startswith(f"{CONSTRAINTS}:")}  # one form, not two
    shown.system_attrs = {**rest, CONSTRAINTS: found}
    return shown


def with_constraint_lists(storage: BaseStorage) -> BaseStorage:
    """``storage`` with ``get_all_trials`` (the dashboard's one read of a study's trials, and what
    ``optuna.copy_study`` copies) giving each trial its constraints as the list, as :func:`constraint_list` reads
    them: a study stored before issue 56 is served and copied as one stored now."""
    every = storage.get_all_trials

    def trials(self: BaseStorage, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return [_listed(t) for t in every(study_id, deepcopy=deepcopy, states=states)]

    storage.get_all_trials = types.MethodType(trials, storage)  # type: ignore[method-assign]
    return storage
