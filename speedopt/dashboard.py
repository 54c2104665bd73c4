"""`speedopt dashboard`: optuna-dashboard on a speedopt storage, with speedopt's idea of "best".

optuna-dashboard takes a study's best trial from ``storage.get_best_trial``, which knows nothing of
constraints: it would crown a fast trial that the mAP constraint rejected. Here the storage answers
with the fastest trial measured ok and judged feasible (Optuna's own ``Study.best_trial`` agrees),
and falls back to the plain answer for studies speedopt did not make.
"""

from __future__ import annotations

import types

from speedopt.storage import open_storage


def _feasible_best(storage) -> None:
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    plain = storage.get_best_trial

    def best(self, study_id: int):
        trials = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        feasible = [t for t in trials if t.user_attrs.get("status") == "ok" and t.user_attrs.get("feasible", True) is True]
        if not feasible:
            return plain(study_id)
        pick = max if self.get_study_directions(study_id)[0] == StudyDirection.MAXIMIZE else min
        return pick(feasible, key=lambda t: t.value)

    storage.get_best_trial = types.MethodType(best, storage)


def serve(storage_url: str | None, host: str, port: int) -> None:
    """Serve the dashboard until interrupted (blocks)."""
    from optuna_dashboard import run_server

    storage = open_storage(storage_url)
    _feasible_best(storage)
    run_server(storage, host=host, port=port)
