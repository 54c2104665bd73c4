"""Where studies live: an Optuna storage opened from a URL, checked first, with crash safety switched on.

RDB storages (SQLite, PostgreSQL, MySQL) get Optuna's heartbeat: a trial whose process died stops
beating, is marked failed after the grace period, and is handed to the opener's ``on_stale`` (the search
retries it once with the same knobs). A journal file (``*.log`` / ``*.journal`` path or ``journal:PATH``)
works too, without heartbeat; the search's own recovery of dead same-host trials covers both.

Only ``speedopt search`` (and the target of export/import) may create a storage (:attr:`Need.CREATE`);
a worker joins one that exists and can be written (:attr:`Need.WRITE`), every other command opens one
that exists (:attr:`Need.EXISTING`), and the source of an import or a warm start is opened so that
nothing can write to it (:attr:`Need.READ_ONLY`). A file that is not an
Optuna storage is refused before Optuna could write its tables into it, and a damaged SQLite file is named
so, in one line, by every command (:func:`damaged`). Every URL that is printed or
stored goes through :func:`redact`, so a database password never reaches a terminal, a log or a report.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from speedopt import defaults
from speedopt.errors import UsageError
from speedopt.study._schema import check
from speedopt.study.names import study_names

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

#: Tables every Optuna RDB storage has: a database without them is not a storage (yet).
OPTUNA_TABLES = frozenset({"studies", "trials", "version_info"})
#: Attempts, and the pause between them, when another process creates the same new storage at once.
CREATE_ATTEMPTS = 20
CREATE_PAUSE_S = 0.5

_SQLITE_HEADER = b"SQLite format 3\x00"
#: SQLite's result codes for a damaged file: SQLITE_CORRUPT ("database disk image is malformed"), SQLITE_NOTADB.
_DAMAGE_CODES = (11, 26)
_POINT = "point the command at a storage that `speedopt search` or `speedopt export` wrote"
#: ``scheme://user:PASSWORD@``: the password runs to the last ``@`` of the URL (an unescaped ``@`` in it too).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)[^\s'\"]*@")
_PARAM_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?:'[^']*'|\"[^\"]*\"|[^&\s'\"]+)", re.IGNORECASE)


class Need(enum.Enum):
    """What a command may do to the storage it names."""

    CREATE = "create"  # search, and the target of export/import: made where missing, written
    WRITE = "write"  # a worker: it must exist already and be writable (every trial is written there)
    EXISTING = "existing"  # every other command: it must exist already (a typo is never a new storage)
    READ_ONLY = "read-only"  # import and warm-start sources: must exist and are never written


def redact(text: str) -> str:
    """``text`` with every password in it hidden: ``user:SECRET@`` in a URL and ``password=SECRET``.

    Works on a URL and on any message that quotes one (sqlalchemy's errors do, even for a URL it
    could not parse), so one helper serves every print and every stored attr. ``sqlalchemy``'s
    ``make_url(...).render_as_string(hide_password=True)`` would only handle URLs it can parse.
    """
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + "***@", text)
    return _PARAM_PASSWORD.sub(lambda m: m.group("head") + "***", text)


def quiet_optuna() -> None:
    """Optuna's INFO lines and experimental warnings (heartbeats, metric names) would drown speedopt's own output:
    the commands and the benchmarks that drive a study call this once."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


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


def _journal_path(url: str) -> str | None:
    if url.startswith("journal:"):
        return url.removeprefix("journal:")
    if "://" not in url and url.endswith((".log", ".journal")):
        return url
    return None


def _sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (None for an in-memory database or a URI we leave to SQLite)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    if parsed.query.get("uri") or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else type(exc).__name__
    return redact(re.sub(r"^\([\w.]+\)\s*", "", line))  # sqlalchemy's "(sqlite3.OperationalError) " prefix


def _missing(what: str, where: str) -> UsageError:
    return UsageError(
        f"no storage at {where}: the {what} does not exist; check --storage (a typo is never made into a new "
        "storage), or run `speedopt search` to create one"
    )


def _writable_folder(path: Path) -> Path | None:
    """The nearest existing folder at or above ``path``, if this process cannot write into it."""
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return None if os.access(folder, os.W_OK | os.X_OK) else folder


def _check_file(path: Path, need: Need, kind: str) -> None:
    """A storage file as ``need`` requires it: present (unless created), a file, writable to write it."""
    shown = str(path)
    if not path.exists():
        if need is not Need.CREATE:
            raise _missing(f"{kind} file", shown)
        denied = _writable_folder(path.parent)
        if denied is not None:
            raise UsageError(
                f"cannot create storage {shown}: no write permission in {denied}; run where you can write, or give "
                "--storage a path in a writable folder"
            )
        return
    if not path.is_file():
        raise UsageError(f"storage {shown} is not a file; give --storage a {kind} file path")
    if not os.access(path, os.R_OK):
        raise UsageError(f"storage {shown} cannot be read (permission denied); fix its permissions or copy it")
    if need in (Need.CREATE, Need.WRITE) and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise UsageError(
            f"storage {shown} is read-only (the file or its folder {path.parent} cannot be written); this command writes "
            "every trial there: copy it to a writable folder, or give another --storage"
        )


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro", uri=True)


def _is_damage(exc: sqlite3.Error) -> bool:
    """SQLite says its file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB): not a lock, a permission or a full disk."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in _DAMAGE_CODES
    return any(s in str(exc) for s in ("malformed", "not a database"))


def _sqlite_file(url: str) -> Path | None:
    """The file of an SQLite storage URL; None for anything else (a journal, a server, a URL that does not parse)."""
    if _journal_path(url) or "://" not in url:
        return None
    try:
        return _sqlite_path(url)
    except Exception:  # sqlalchemy cannot parse it: open_storage said so
        return None


def damaged(path: Path) -> str | None:
    """What is damaged in the SQLite file at ``path``, in SQLite's words, or None: a sound file, or one this could
    not check (locked, unreadable: the caller's own reading says why).

    The one test of a damaged storage file, run by every command that opens one (:func:`open_storage`) and again
    when a storage fails after opening (:func:`storage_errors`), so each names the file the same way. SQLite's
    ``PRAGMA quick_check``, read-only: every page and b-tree of the file (not index contents), 0.25 s for 130 MB.
    """
    try:
        with contextlib.closing(_read_only(path)) as db:
            problems = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
    except sqlite3.Error as exc:
        return _first_line(exc) if _is_damage(exc) else None
    return None if problems == ["ok"] else problems[0]


def _damaged(path: Path, detail: str) -> UsageError:
    return UsageError(f"{path.resolve()} is a damaged SQLite database ({detail}); restore it from a copy, or {_POINT}")


def _sqlite_tables(path: Path) -> set[str]:
    """The tables of an SQLite file, read without writing a byte; UsageError for a file that is not SQLite, or damaged."""
    if path.stat().st_size == 0:
        return set()
    with open(path, "rb") as f:
        header = f.read(len(_SQLITE_HEADER))
    if header != _SQLITE_HEADER:
        raise UsageError(f"{path} is not an SQLite database (no SQLite header); {_POINT}")
    detail = damaged(path)
    if detail is not None:
        raise _damaged(path, detail)
    try:
        with contextlib.closing(_read_only(path)) as db:
            return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise UsageError(f"cannot read storage {path}: {_first_line(exc)}; check the file and its permissions") from None


def _optuna_schema() -> frozenset[str]:
    """Every table Optuna's RDB storage creates (``alembic_version`` included)."""
    from optuna.storages._rdb import models

    return frozenset(models.BaseModel.metadata.tables) | {"alembic_version"}


def _check_sqlite(path: Path, need: Need) -> None:
    _check_file(path, need, "SQLite")
    if not path.exists():
        return
    tables = _sqlite_tables(path)
    if tables >= OPTUNA_TABLES:
        return
    if need is Need.CREATE and tables <= _optuna_schema():
        return  # empty, or part of Optuna's schema: another search is creating it now (Optuna completes it)
    if not tables:
        raise UsageError(f"{path} holds no Optuna storage (an empty database); {_POINT}")
    shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    raise UsageError(f"{path} is an SQLite database but not an Optuna storage (its tables: {shown}); it was left as it is: {_POINT}")


def _check_server(url: str) -> None:
    """A database server's storage must exist: connect, and refuse a database without Optuna's tables."""
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url)
    except ImportError as exc:
        raise _driver(url, exc) from None
    except Exception as exc:  # sqlalchemy: a URL it cannot parse, an unknown dialect
        raise UsageError(f"cannot open storage {redact(url)}: {_first_line(exc)}") from None
    try:
        tables = set(sqlalchemy.inspect(engine).get_table_names())
    except ImportError as exc:
        raise _driver(url, exc) from None
    except Exception as exc:  # server down, authentication, unknown database
        raise UsageError(f"cannot open storage {redact(url)}: {_first_line(exc)}") from None
    finally:
        engine.dispose()
    if not tables >= OPTUNA_TABLES:
        raise UsageError(
            f"no storage at {redact(url)}: the database holds no Optuna tables; check --storage, or run "
            "`speedopt search` to create one"
        )


def _driver(url: str, exc: BaseException) -> UsageError:
    scheme = url.partition("://")[0]
    if scheme.startswith("postgresql"):
        fix = "pip install 'speedopt[postgres]' (psycopg) and use postgresql:// or postgresql+psycopg://"
    elif scheme.startswith("mysql"):
        fix = "pip install 'speedopt[mysql]' (PyMySQL) and use mysql+pymysql://"
    else:
        fix = "install the database driver that URL names"
    return UsageError(f"storage {redact(url)}: missing database driver ({_first_line(exc)}); {fix}")


def _open_journal(path: str, need: Need) -> BaseStorage:
    import optuna
    from optuna.storages.journal import JournalFileBackend

    file = Path(path)
    _check_file(file, need, "journal")
    if need is Need.CREATE:
        file.parent.mkdir(parents=True, exist_ok=True)
    try:
        return optuna.storages.JournalStorage(JournalFileBackend(path))
    except Exception as exc:  # a line that is not a journal record: damaged, or not a journal at all
        raise UsageError(
            f"{path} is not a readable Optuna journal ({_first_line(exc)}); restore it from a copy, or {_POINT}"
        ) from None


def artifact_dir(url: str | None = None) -> Path:
    """Where the studies of a storage keep their artifacts (the report's figures, which the dashboard serves):
    beside an SQLite or journal file (``NAME.artifacts``), else in speedopt's cache folder, by the storage's
    address (password left out), so ``speedopt report`` and ``speedopt dashboard`` on one URL agree."""
    import hashlib

    from speedopt.offline import cache_dir

    url = url or defaults.STORAGE_URL
    journal = _journal_path(url)
    path = Path(journal) if journal else (_sqlite_path(url) if "://" in url else None)
    if path is not None:
        return path.resolve().with_name(path.name + ".artifacts")
    return cache_dir() / "artifacts" / hashlib.sha256(redact(url).encode()).hexdigest()[:16]


def _race(exc: BaseException) -> bool:
    """A failure that another process creating the same new storage at the same moment causes."""
    text = str(exc).lower()
    return any(s in text for s in ("unique", "already exists", "database is locked", "duplicate"))


def open_storage(
    url: str | None = None, need: Need = Need.EXISTING, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None
) -> BaseStorage:
    """Open the storage at ``url`` (default: ``studies/speedopt.db`` here) as ``need`` allows.

    ``on_stale``: what an RDB storage does with a trial its heartbeat failed (the search's retry,
    :mod:`speedopt.search`'s recovery; Optuna calls it while a study optimises and in ``fail_stale_trials``).

    UsageError, one line with the password hidden, for anything a user can get wrong: a typo'd path,
    a file that is not a storage, a read-only folder, a server that refuses, a missing driver.
    """
    import optuna

    url = url or defaults.STORAGE_URL
    journal = _journal_path(url)
    if journal:
        return _open_journal(journal, need)
    if "://" not in url:
        raise UsageError(
            f"storage {url!r} is not a storage URL; use e.g. sqlite:///studies/speedopt.db, "
            "postgresql://user@host/db, or a journal file path ending in .log"
        )
    try:
        path = _sqlite_path(url)
    except Exception as exc:  # sqlalchemy cannot parse it
        raise UsageError(f"cannot open storage {redact(url)}: {_first_line(exc)}") from None
    if path is not None:
        _check_sqlite(path, need)
        if need is Need.READ_ONLY:  # SQLite itself refuses every write
            url = f"sqlite:///file:{urllib.parse.quote(str(path.resolve()))}?mode=ro&uri=true"
        elif need is Need.CREATE:
            path.parent.mkdir(parents=True, exist_ok=True)
    elif need is not Need.CREATE and not url.startswith("sqlite:"):
        _check_server(url)
    attempts = CREATE_ATTEMPTS if need is Need.CREATE else 1
    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(
                url,
                heartbeat_interval=defaults.HEARTBEAT_S,
                grace_period=defaults.GRACE_S,
                heartbeat_stale_trial_callback=on_stale,
            )
        except ImportError as exc:
            raise _driver(url, exc) from None
        except Exception as exc:  # sqlalchemy: bad URL, server down, permission; or a concurrent creation
            if attempt + 1 < attempts and _race(exc):
                time.sleep(CREATE_PAUSE_S)
                continue
            if path is not None and (detail := damaged(path)) is not None:
                raise _damaged(path, detail) from None
            raise UsageError(f"cannot open storage {redact(url)}: {_first_line(exc)}") from None
    raise AssertionError("unreachable")


@contextlib.contextmanager
def storage_errors(url: str | None) -> Iterator[None]:
    """Turn a storage failure after opening (disk full, read-only file, lost server) into one UsageError line."""
    import optuna
    import sqlalchemy.exc

    try:
        yield
    except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError, sqlite3.Error) as exc:
        path = _sqlite_file(url or defaults.STORAGE_URL)
        if path is not None and (detail := damaged(path)) is not None:  # damaged after opening, or beyond the check
            raise _damaged(path, detail) from None
        cause = (exc.__cause__ or exc.__context__) if isinstance(exc, optuna.exceptions.StorageInternalError) else None
        raise UsageError(
            f"storage {redact(url or defaults.STORAGE_URL)} failed: {_first_line(cause or exc)}; check that it is "
            "writable and reachable, then run the same command again"
        ) from None


def find_study(storage_url: str | None, name: str | None, need: Need = Need.EXISTING) -> optuna.Study:
    """Load a study by name, or the only one in the storage; UsageError when that is ambiguous or absent, or
    when this speedopt does not read the study's schema version (:func:`~speedopt.study._schema.check`)."""
    import optuna

    storage = open_storage(storage_url, need)
    names = study_names(storage)
    where = redact(storage_url or defaults.STORAGE_URL)
    if name is None:
        if len(names) != 1:
            listed = f": {', '.join(names)}" if names else ""
            raise UsageError(f"{len(names)} studies in {where}{listed}; name one with --study")
        name = names[0]
    if name not in names:
        raise UsageError(f"no study {name!r} in {where}; `speedopt studies` lists them")
    study = optuna.load_study(study_name=name, storage=storage)
    check(study)
    return study
