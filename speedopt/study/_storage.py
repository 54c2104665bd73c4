"""Where studies live: an Optuna storage opened from a URL, with crash safety switched on.

RDB storages (SQLite, PostgreSQL, MySQL) get Optuna's heartbeat: a trial whose process died stops
beating, is marked failed after the grace period, and is retried once with the same knobs. A
journal file (``*.log`` / ``*.journal`` path or ``journal:PATH``) works too, without heartbeat;
speedopt's own recovery of dead same-host trials (:mod:`speedopt.study._recovery`) covers both.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from speedopt import defaults
from speedopt.errors import UsageError
from speedopt.quality import CACHE_STUDY

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage

HEARTBEAT_S = 5
GRACE_S = 20
MAX_RETRY = 1


def retry_callback() -> optuna.storages.RetryHeartbeatStaleTrialCallback:
    """Optuna's retry of a failed (stale) trial: re-enqueued once with the same params and attrs."""
    import optuna

    return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)


def url_for(text: str) -> str:
    """A storage URL from a URL or a file path (``*.db``/``*.sqlite`` -> SQLite, ``*.log`` -> journal)."""
    if "://" in text or text.startswith("journal:"):
        return text
    path = Path(text).expanduser().resolve()
    if path.suffix in (".log", ".journal"):
        return f"journal:{path}"
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return f"sqlite:///{path}"
    raise UsageError(f"{text!r} is neither a storage URL nor a .db/.sqlite/.log file")


def open_storage(url: str | None = None) -> BaseStorage:
    """Open (creating where needed) the storage at ``url``; default: ``studies/speedopt.db`` here."""
    import optuna

    url = url or defaults.STORAGE_URL
    journal = url.removeprefix("journal:") if url.startswith("journal:") or url.endswith((".log", ".journal")) else None
    if journal:
        from optuna.storages.journal import JournalFileBackend

        Path(journal).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(journal))
    if "://" not in url:
        raise UsageError(
            f"storage {url!r} is not a storage URL; use e.g. sqlite:///studies/speedopt.db, "
            "postgresql://user@host/db, or a journal file path ending in .log"
        )
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    try:
        return optuna.storages.RDBStorage(
            url,
            heartbeat_interval=HEARTBEAT_S,
            grace_period=GRACE_S,
            heartbeat_stale_trial_callback=retry_callback(),
        )
    except ImportError as exc:
        raise UsageError(f"storage {url}: missing database driver ({exc}); pip install 'speedopt[postgres]'") from None
    except Exception as exc:  # sqlalchemy: bad URL, server down, permission
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot open storage {url}: {first}") from None


def study_names(storage: BaseStorage) -> list[str]:
    """The studies in a storage, speedopt's internal probe cache left out."""
    import optuna

    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    return [s.study_name for s in summaries if s.study_name != CACHE_STUDY]


def find_study(storage_url: str | None, name: str | None) -> optuna.Study:
    """Load a study by name, or the only one in the storage; UsageError when that is ambiguous or absent."""
    import optuna

    storage = open_storage(storage_url)
    names = study_names(storage)
    where = storage_url or defaults.STORAGE_URL
    if name is None:
        if len(names) != 1:
            listed = f": {', '.join(names)}" if names else ""
            raise UsageError(f"{len(names)} studies in {where}{listed}; name one with --study")
        name = names[0]
    if name not in names:
        raise UsageError(f"no study {name!r} in {where}; `speedopt studies` lists them")
    return optuna.load_study(study_name=name, storage=storage)
