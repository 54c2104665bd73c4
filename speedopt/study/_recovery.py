"""Trials left RUNNING by a search that was killed: found by their process, failed and retried.

Each trial records its worker (host, pid, process start time). On start, RUNNING trials of this host
whose process is gone are failed and re-enqueued at once with Optuna's retry callback; trials of
other hosts are left to the storage heartbeat (RDB storages).
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

import psutil

from speedopt.study._storage import retry_callback

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage


def worker_id() -> dict[str, Any]:
    """This process as a trial records it: host, pid and start time (a pid alone may be reused)."""
    me = psutil.Process()
    return {"host": platform.node(), "pid": me.pid, "started": me.create_time()}


def _alive(worker: dict[str, Any]) -> bool:
    try:
        return bool(abs(psutil.Process(worker["pid"]).create_time() - worker["started"]) < 1.0)
    except (psutil.NoSuchProcess, KeyError, TypeError):
        return False


def recover_interrupted(study: optuna.Study, storage: BaseStorage) -> list[int]:
    """Fail and re-enqueue RUNNING trials whose process on this host is gone; returns their numbers."""
    from optuna.trial import TrialState

    recovered = []
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = frozen.user_attrs.get("worker") or {}
        if worker.get("host") == platform.node() and not _alive(worker):
            storage.set_trial_state_values(frozen._trial_id, TrialState.FAIL)
            retry_callback()(study, storage.get_trial(frozen._trial_id))
            recovered.append(frozen.number)
    return recovered
