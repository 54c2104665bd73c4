"""`speedopt dashboard`: optuna-dashboard on a speedopt storage, with speedopt's idea of "best".

optuna-dashboard takes a study's best trial from ``storage.get_best_trial``, which knows nothing of
constraints: it would crown a fast trial that the mAP constraint rejected. Here the storage answers
with :func:`speedopt.study.best_trial` (Optuna's own ``Study.best_trial`` agrees), and falls back to
the plain answer for studies speedopt did not make.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from speedopt.study import Finals, TrialRecord, open_storage, recommended_trial

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial


def feasible_best(storage: BaseStorage) -> BaseStorage:
    """``storage`` with ``get_best_trial`` answering speedopt's recommended trial (the finals' choice, else
    the fastest feasible one)."""
    from optuna.trial import TrialState

    plain = storage.get_best_trial

    def best(self: BaseStorage, study_id: int) -> FrozenTrial:
        trials = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        finals = Finals.from_attr(self.get_study_user_attrs(study_id).get("finals"))
        found = recommended_trial((r for r in map(TrialRecord.from_frozen, trials) if r is not None), finals)
        if found is None:
            return plain(study_id)
        return next(t for t in trials if t.number == found.number)

    storage.get_best_trial = types.MethodType(best, storage)  # type: ignore[method-assign]
    return storage


def serve(storage_url: str | None, host: str, port: int) -> None:
    """Serve the dashboard until interrupted (blocks)."""
    from optuna_dashboard import run_server

    run_server(feasible_best(open_storage(storage_url)), host=host, port=port)
