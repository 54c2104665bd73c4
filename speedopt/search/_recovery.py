"""Trials that did not end by themselves: interrupted, killed, or left behind; found, failed and retried.

Each trial records its worker (host, pid, process start time). A trial is retried once, with the
same params and role (a retried baseline is the baseline), whichever way its run ended early:

- Ctrl-C: the interrupted process fails its own trial and re-enqueues it (:func:`retry_interrupted`);
- SIGKILL or a crash, same host: the next start sees the process gone (:func:`recover_interrupted`);
- any host, RDB storages: the trial stops beating and is failed after the grace period
  (Optuna's ``fail_stale_trials`` with :func:`retry_callback`, the storage's ``on_stale``, claimed once: :func:`retry_once`), which a
  worker waits out before it leaves a study short of its target (:func:`recover_stale`);
- a failed trial that was never retried (an interrupt during the retry itself) is retried on the next start.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Callable
from typing import TYPE_CHECKING

from speedopt.defaults import GRACE_S
from speedopt.search._claim import process_alive, try_claim, worker_id
from speedopt.study import schema
from speedopt.study.record_types import retried_as

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

MAX_RETRY = 1
INTERRUPTED = "interrupted (Ctrl-C)"
PROCESS_GONE = "its process was gone (killed or crashed)"


def retry_callback() -> Callable[[optuna.Study, FrozenTrial], None]:
    """Optuna's retry of a failed (stale or interrupted) trial: :func:`retry_once`."""

    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        retry_once(study, trial)

    return callback


def retry_once(study: optuna.Study, trial: FrozenTrial) -> bool:
    """Re-enqueue a failed trial once with the same params; whether this call did.

    The retry keeps the trial's planned attrs (its role: a retried baseline is the baseline) and drops
    what the failed run wrote (its worker, a partial measurement). Processes that see the same failed trial at
    once (two resumes, workers on several hosts) retry it once: the retry is claimed in the storage
    (:func:`~speedopt.search._claim.try_claim`), and a trial already retried is not retried again.
    """
    import copy

    import optuna

    claim = try_claim(study._storage, study.study_name, f"retry-{trial.number}", GRACE_S)
    if isinstance(claim, str):
        return False  # another process retries it
    try:
        trials = study._storage.get_all_trials(study._study_id, deepcopy=False)
        if any((t.system_attrs.get("retry_history") or [])[-1:] == [trial.number] for t in trials):
            return False
        planned = copy.copy(trial)
        planned.user_attrs = {k: v for k, v in trial.user_attrs.items() if k in schema.PLANNED}
        optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)(study, planned)
        return True
    finally:
        claim.release()


def say_interrupted(trial: optuna.Trial) -> None:
    """Record on ``trial`` that Ctrl-C interrupted it (before its state becomes FAIL: the report says why)."""
    trial.set_user_attr(schema.FAILED_BECAUSE, INTERRUPTED)


def _here(trial: FrozenTrial) -> bool:
    return bool((trial.user_attrs.get(schema.WORKER) or {}).get("host") == platform.node())


def _mine(trial: FrozenTrial) -> bool:
    return bool(trial.user_attrs.get(schema.WORKER) == worker_id())


def _fail_and_retry(study: optuna.Study, storage: BaseStorage, trial: FrozenTrial, why: str) -> bool:
    """Fail ``trial`` (if still running), saying why, and re-enqueue it if it has a retry left.

    True when it was re-enqueued here; False for a retry that failed again, or a trial another process failed or
    retried first.
    """
    import optuna
    from optuna.trial import TrialState

    if trial.state == TrialState.RUNNING:
        try:
            storage.set_trial_user_attr(trial._trial_id, schema.FAILED_BECAUSE, why)
            if not storage.set_trial_state_values(trial._trial_id, TrialState.FAIL):
                return False
        except optuna.exceptions.UpdateFinishedTrialError:
            return False  # another worker failed it (and retries it) first
    if len(trial.system_attrs.get("retry_history") or []) >= MAX_RETRY:
        return False
    return retry_once(study, storage.get_trial(trial._trial_id))  # False: another process retried it


def retry_interrupted(study: optuna.Study, storage: BaseStorage, interrupted: dict[int, int]) -> list[int]:
    """After Ctrl-C: fail the interrupted trials (``interrupted``: trial id -> number, and any trial still
    RUNNING under this process) if Optuna has not, and re-enqueue them; returns their numbers."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    retried = retried_as(trials)
    ids = set(interrupted) | {t._trial_id for t in trials if t.state == TrialState.RUNNING and _mine(t)}
    done = []
    for trial_id in sorted(ids):
        trial = storage.get_trial(trial_id)
        if trial.number in retried or trial.state not in (TrialState.RUNNING, TrialState.FAIL):
            continue
        if _fail_and_retry(study, storage, trial, INTERRUPTED):
            done.append(trial.number)
    return done


def _abandoned(trial: FrozenTrial, now: dt.datetime) -> bool:
    """A failed trial whose retry nobody else will make: its process here is gone, or (another host) it
    failed longer than the grace period ago, so the process that failed it did not retry it."""
    worker = trial.user_attrs.get(schema.WORKER) or {}
    if _here(trial):
        return not process_alive(worker)
    ended = trial.datetime_complete
    return ended is None or (now - ended).total_seconds() > GRACE_S


def recover_interrupted(study: optuna.Study, storage: BaseStorage) -> list[int]:
    """On start: retry trials whose run ended early and were never retried; returns their numbers.

    RUNNING trials of this host whose process is gone are failed first; failed trials that were never
    retried (and may still be: a retry is not retried again) are re-enqueued.
    """
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    retried = retried_as(trials)
    now = dt.datetime.now()
    recovered = []
    for trial in trials:
        if trial.number in retried:
            continue
        dead_here = trial.state == TrialState.RUNNING and _here(trial) and not process_alive(trial.user_attrs.get(schema.WORKER) or {})
        left = trial.state == TrialState.FAIL and _abandoned(trial, now)
        if (dead_here or left) and _fail_and_retry(study, storage, trial, PROCESS_GONE):
            recovered.append(trial.number)
    return recovered


def _beats(storage: BaseStorage) -> bool:
    """Whether the storage keeps a heartbeat per running trial (RDB storages opened by speedopt do)."""
    interval = getattr(storage, "get_heartbeat_interval", None)
    return bool(callable(interval) and interval() is not None)


def recover_stale(study: optuna.Study, storage: BaseStorage) -> list[int]:
    """Fail and retry trials that stopped beating (any host) or whose process here is gone; their numbers."""
    import warnings

    import optuna
    from optuna.trial import TrialState

    running = {t._trial_id: t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if _beats(storage):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)  # fails them and calls the storage's retry callback
    failed = [n for i, n in running.items() if storage.get_trial(i).state == TrialState.FAIL]
    return sorted(set(failed) | set(recover_interrupted(study, storage)))


def awaited(study: optuna.Study, storage: BaseStorage, longest_s: float) -> list[int]:
    """RUNNING trials of other processes that will end or can be recovered: worth waiting for.

    With a heartbeat (RDB storages) every running trial either finishes or goes stale; without one
    (a journal file) only this host's trials can be judged, by their process. A trial running longer
    than ``longest_s`` (the most a trial with its probes may take) is not waited for: it never beat.
    """
    from optuna.trial import TrialState

    beating = _beats(storage)
    now = dt.datetime.now()
    return [
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if not _mine(t)
        and (beating or _here(t))
        and (t.datetime_start is None or (now - t.datetime_start).total_seconds() < longest_s)
    ]
