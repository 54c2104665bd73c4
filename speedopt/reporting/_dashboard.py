"""`speedopt dashboard`: optuna-dashboard on a speedopt storage, with speedopt's idea of "best".

optuna-dashboard takes a study's best trial from ``storage.get_best_trial``, which knows nothing of
constraints: it would crown a fast trial that the mAP constraint rejected. Here the storage answers
with :func:`speedopt.study.best_trial` (Optuna's own ``Study.best_trial`` agrees), and falls back to
the plain answer for studies speedopt did not make. Its study list (``storage.get_all_studies``, the
dashboard's one call for it) leaves out speedopt's internal probe-cache study, an empty MINIMIZE study
that is no user's.
"""

from __future__ import annotations

import types
from collections.abc import Container
from typing import TYPE_CHECKING, Any

from speedopt.errors import UsageError
from speedopt.knobs import shown
from speedopt.quality import CACHE_STUDY
from speedopt.study import Finals, TrialRecord, artifact_dir, is_claim, open_storage, recommended_trial, schema

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.study._frozen import FrozenStudy
    from optuna.trial import FrozenTrial, TrialState


def feasible_best(storage: BaseStorage) -> BaseStorage:
    """``storage`` with ``get_best_trial`` answering speedopt's recommended trial (the finals' choice, else
    the fastest feasible one)."""
    from optuna.trial import TrialState

    plain = storage.get_best_trial

    def best(self: BaseStorage, study_id: int) -> FrozenTrial:
        trials = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        finals = Finals.from_attr(self.get_study_user_attrs(study_id).get(schema.FINALS))
        found = recommended_trial((r for r in map(TrialRecord.from_frozen, trials) if r is not None), finals)
        if found is None:
            return plain(study_id)
        return next(t for t in trials if t.number == found.number)

    storage.get_best_trial = types.MethodType(best, storage)  # type: ignore[method-assign]
    return storage


def _as_run(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The trials with params as they ran, in one space: every searched knob, plus every knob whose value
    differs between trials (the baseline's other model), each a categorical of the values seen."""
    import copy
    import json

    from optuna.distributions import CategoricalDistribution

    def config_of(t: FrozenTrial) -> dict[str, Any]:  # as run; a trial that measured nothing: its sampled params
        stored = t.user_attrs.get(schema.CONFIG)
        return stored if isinstance(stored, dict) else dict(t.params)

    configs = [t.user_attrs[schema.CONFIG] for t in trials if isinstance(t.user_attrs.get(schema.CONFIG), dict)]
    if not configs:
        return trials
    searched = {k for t in trials for k in t.params}
    varying = [k for k in configs[0] if k in searched or len({json.dumps(c.get(k)) for c in configs}) > 1]
    values: dict[str, dict[str, Any]] = {k: {} for k in varying}
    for t in trials:
        config = config_of(t)
        for k in varying:
            if k in config:
                values[k][json.dumps(config[k])] = config[k]
    space = {k: CategoricalDistribution([seen[key] for key in sorted(seen)]) for k, seen in values.items() if seen}
    out = []
    for t in trials:
        config = config_of(t)
        shown = copy.copy(t)
        params = {k: config[k] for k in space if k in config}
        shown.distributions = {k: space[k] for k in params}
        shown.params = params
        out.append(shown)
    return out


def as_run(storage: BaseStorage) -> BaseStorage:
    """``storage`` with ``get_all_trials`` (the dashboard's one read of a study's trials) giving each trial's params
    as it ran, in one space (:func:`_as_run`): the baseline's params then say what ran, and importance, slice, rank
    and parallel-coordinate plots place it where it belongs (another model is a value of ``model``)."""
    every = storage.get_all_trials

    def trials(self: BaseStorage, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return _as_run(every(study_id, deepcopy=deepcopy, states=states))

    storage.get_all_trials = types.MethodType(trials, storage)  # type: ignore[method-assign]
    return storage


def users_studies(storage: BaseStorage) -> BaseStorage:
    """``storage`` with ``get_all_studies`` leaving out speedopt's internal studies (the probe cache, claims)."""
    every = storage.get_all_studies

    def studies(self: BaseStorage) -> list[FrozenStudy]:
        return [s for s in every() if s.study_name != CACHE_STUDY and not is_claim(s.study_name)]

    storage.get_all_studies = types.MethodType(studies, storage)  # type: ignore[method-assign]
    return storage


def study_page(host: str, port: int, study_id: int | None = None) -> str:
    """The dashboard's address: its study list, or one study's page."""
    where = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/dashboard"
    return where if study_id is None else f"{where}/studies/{study_id}"


def check_address(host: str, port: int) -> None:
    """Refuse, in one line naming the fix, an address the dashboard could not listen on: a port outside
    1..65535, a host that is not a name or address of this machine, a port in use or reserved. Binds a
    socket the way the dashboard's server will (SO_REUSEADDR) and closes it at once."""
    import errno
    import socket

    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535, got {port}; the default is 8080")
    fix = "use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"--host {shown(host)} is not a name or address this machine can resolve ({why}); {fix}") from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as the server picks it
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {host} is already in use (another dashboard?); pass --port with a free port"
            ) from None
        if exc.errno == errno.EACCES:
            raise UsageError(f"port {port} needs administrator rights on this machine; pass --port 1024 or above") from None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            raise UsageError(f"--host {shown(host)} is not an address of this machine; {fix}") from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; {fix}, or pass another --port") from None


def serve(storage_url: str | None, host: str, port: int) -> None:
    """Serve the dashboard until interrupted (blocks); :func:`check_address` first says why it could not."""
    import optuna
    from optuna.artifacts import FileSystemArtifactStore
    from optuna_dashboard import run_server

    # The report's figures, uploaded as the studies' artifacts: served where `speedopt report` made the folder. The
    # dashboard creates none (a read-only command creates nothing; a copied storage comes without its figures).
    folder = artifact_dir(storage_url)
    store = FileSystemArtifactStore(folder) if folder.is_dir() else None
    # The study the dashboard builds for its importance takes a storage as Optuna's get_storage returns it (an RDB
    # storage in its cache); the wrappers go on that one object, so every view of the trials sees the same params.
    storage = optuna.storages.get_storage(open_storage(storage_url))
    served = users_studies(feasible_best(as_run(schema.with_constraint_lists(storage))))  # constraints as the dashboard reads them
    run_server(served, host=host, port=port, artifact_store=store)
