"""`speedopt dashboard`: optuna-dashboard on a speedopt storage, with speedopt's idea of "best".

optuna-dashboard takes a study's best trial from ``storage.get_best_trial``, which knows nothing of
constraints: it would crown a fast trial that the mAP constraint rejected. Here the storage answers
with :func:`speedopt.study.best_trial` (Optuna's own ``Study.best_trial`` agrees), and falls back to
the plain answer for studies speedopt did not make. Its study list (``storage.get_all_studies``, the
dashboard's one call for it) leaves out speedopt's internal probe-cache study, an empty MINIMIZE study
that is no user's.
"""

from __future__ import annotations

import contextlib
import types
from typing import TYPE_CHECKING

from speedopt.errors import UsageError
from speedopt.knobs import shown
from speedopt.quality import CACHE_STUDY
from speedopt.study import Finals, TrialRecord, artifact_dir, open_storage, recommended_trial

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.study._frozen import FrozenStudy
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


def users_studies(storage: BaseStorage) -> BaseStorage:
    """``storage`` with ``get_all_studies`` leaving out speedopt's internal studies (the probe cache)."""
    every = storage.get_all_studies

    def studies(self: BaseStorage) -> list[FrozenStudy]:
        return [s for s in every() if s.study_name != CACHE_STUDY]

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
    from optuna.artifacts import FileSystemArtifactStore
    from optuna_dashboard import run_server

    folder = artifact_dir(storage_url)  # the report's figures, uploaded as the studies' artifacts
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
    store = FileSystemArtifactStore(folder) if folder.is_dir() else None
    run_server(users_studies(feasible_best(open_storage(storage_url))), host=host, port=port, artifact_store=store)
