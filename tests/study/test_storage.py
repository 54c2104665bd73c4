"""Storage URLs, files and study look-up: one clear line for everything a user can get wrong, no
password ever shown, no storage made by a command that only reads, no source ever written."""

import multiprocessing
import sqlite3

import optuna
import pytest
import sqlalchemy.exc

from speedopt.errors import UsageError
from speedopt.quality import CACHE_STUDY
from speedopt.study import Need, find_study, open_storage, redact, schema, storage_errors
from speedopt.study import _storage as storage_mod
from speedopt.study._storage import url_for
from speedopt.study._transfer import split_source
from speedopt.study.names import check_study_name, study_names


def test_url_for_files_and_urls(tmp_path):
    assert url_for("postgresql://u@h/db") == "postgresql://u@h/db"
    assert url_for(str(tmp_path / "a.db")) == f"sqlite:///{tmp_path / 'a.db'}"
    assert url_for(str(tmp_path / "a.log")) == f"journal:{tmp_path / 'a.log'}"
    with pytest.raises(UsageError, match="neither a storage URL"):
        url_for(str(tmp_path / "a.txt"))
    assert split_source(f"{tmp_path / 'a.db'}::mine") == (f"sqlite:///{tmp_path / 'a.db'}", "mine")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://alice:pw@db.example:5432/speedopt", "postgresql://alice:***@db.example:5432/speedopt"),
        ("postgresql+psycopg://alice:p@ss/w:rd@host/db::study", "postgresql+psycopg://alice:***@host/db::study"),
        ("mysql+pymysql://root:@localhost/db", "mysql+pymysql://root:***@localhost/db"),
        ("postgresql://alice@host/db", "postgresql://alice@host/db"),  # no password: unchanged
        ("postgresql://host:5432/db", "postgresql://host:5432/db"),  # a port is not a password
        ("sqlite:////home/u/studies/speedopt.db", "sqlite:////home/u/studies/speedopt.db"),
        ("journal:/tmp/x.log", "journal:/tmp/x.log"),
        ("postgresql://alice@host/db?password=pw&sslmode=require", "postgresql://alice@host/db?password=***&sslmode=require"),
        ("Could not parse SQLAlchemy URL from string 'postgresql://a:pw@h:x/db'", "Could not parse SQLAlchemy URL from string 'postgresql://a:***@h:x/db'"),
        ("host=h password=pw dbname=d", "host=h password=*** dbname=d"),
    ],
)
def test_redact_hides_every_password(text, shown):
    assert redact(text) == shown
    assert redact(redact(text)) == shown


def test_open_storage_kinds_and_errors(tmp_path):
    assert isinstance(open_storage(f"journal:{tmp_path / 'j.log'}", Need.CREATE), optuna.storages.JournalStorage)
    assert isinstance(open_storage(f"sqlite:///{tmp_path}/new/s.db", Need.CREATE), optuna.storages.BaseStorage)
    assert (tmp_path / "new").is_dir()  # the folder of a new SQLite file is made, by a command that creates
    with pytest.raises(UsageError, match="is not a storage URL"):
        open_storage("studies/x")
    with pytest.raises(UsageError, match="cannot open storage"):
        open_storage("nosuchdb://x")


@pytest.mark.parametrize("need", [Need.EXISTING, Need.READ_ONLY])
def test_a_missing_storage_is_never_created_by_a_reading_command(tmp_path, need):
    for url in (f"sqlite:///{tmp_path}/a/b/s.db", f"journal:{tmp_path}/a/b/j.log", str(tmp_path / "a" / "b" / "j.log")):
        with pytest.raises(UsageError, match=r"no storage at .*a/b/.*does not exist.*speedopt search"):
            open_storage(url, need)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_source_cannot_be_written_and_stays_byte_for_byte(tmp_path):
    path = tmp_path / "s.db"
    study = optuna.create_study(study_name="a", storage=f"sqlite:///{path}")
    study.add_trial(optuna.trial.create_trial(value=1.0))
    before = path.read_bytes()
    storage = open_storage(f"sqlite:///{path}", Need.READ_ONLY)
    assert study_names(storage) == ["a"]
    with pytest.raises(optuna.exceptions.StorageInternalError):  # SQLite refuses: the file is opened read-only
        storage.set_study_user_attr(storage.get_study_id_from_name("a"), "x", 1)
    assert path.read_bytes() == before


def test_an_unrelated_sqlite_file_is_refused_in_every_mode(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    before = path.read_bytes()
    for need in Need:
        with pytest.raises(UsageError, match=r"not an Optuna storage \(its tables: invoices\)"):
            open_storage(f"sqlite:///{path}", need)
    assert path.read_bytes() == before


def test_an_empty_file_is_a_new_storage_only_for_a_command_that_creates(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(UsageError, match="holds no Optuna storage"):
        open_storage(f"sqlite:///{path}")
    open_storage(f"sqlite:///{path}", Need.CREATE)
    assert path.stat().st_size > 0


def test_a_storage_another_search_is_half_way_through_creating_is_completed_not_refused(tmp_path):
    # The state a concurrent creation leaves for a moment (CI saw it): some of Optuna's tables, not yet all.
    path = tmp_path / "half.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE studies (study_id INTEGER NOT NULL, study_name VARCHAR(512) NOT NULL, PRIMARY KEY (study_id))")
        db.execute("CREATE TABLE version_info (version_info_id INTEGER NOT NULL, schema_version INTEGER, "
                   "library_version VARCHAR(256), PRIMARY KEY (version_info_id))")
    with pytest.raises(UsageError, match="not an Optuna storage"):  # only a command that creates completes it
        open_storage(f"sqlite:///{path}")
    storage = open_storage(f"sqlite:///{path}", Need.CREATE)
    optuna.create_study(study_name="a", storage=storage)
    assert study_names(open_storage(f"sqlite:///{path}")) == ["a"]


def _open_at_once(url, barrier, results):
    barrier.wait()
    try:
        open_storage(url, Need.CREATE)
        results.put("ok")
    except Exception as exc:  # the race this test is about
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow  # starts processes
def test_processes_creating_one_new_storage_at_once_all_open_it(tmp_path):
    # Four processes released together on a new SQLite file: Optuna's table creation and alembic stamp race.
    ctx = multiprocessing.get_context("fork")
    for attempt in range(3):
        url = f"sqlite:///{tmp_path}/race{attempt}.db"
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(url, barrier, results)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [results.get(timeout=5) for _ in procs] == ["ok"] * 4


def test_a_concurrent_creation_error_is_retried_only_when_creating(tmp_path, monkeypatch):
    real = optuna.storages.RDBStorage
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed: alembic_version.version_num"))
        return real(*args, **kwargs)

    monkeypatch.setattr(storage_mod, "CREATE_PAUSE_S", 0.0)
    monkeypatch.setattr(optuna.storages, "RDBStorage", flaky)
    open_storage(f"sqlite:///{tmp_path}/s.db", Need.CREATE)
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(UsageError, match="UNIQUE constraint failed"):
        open_storage(f"sqlite:///{tmp_path}/s.db")  # an existing storage: no second try
    assert len(calls) == 1


def test_find_study_by_name_or_the_only_one(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(UsageError, match="no storage at"):
        find_study(url, None)
    open_storage(url, Need.CREATE)
    with pytest.raises(UsageError, match="0 studies"):
        find_study(url, None)
    optuna.create_study(study_name="a", storage=url).set_user_attr(schema.SCHEMA, schema.SCHEMA_VERSION)
    optuna.create_study(study_name=CACHE_STUDY, storage=url)  # internal: never counted
    assert find_study(url, None).study_name == "a" and study_names(open_storage(url)) == ["a"]
    optuna.create_study(study_name="b", storage=url)
    with pytest.raises(UsageError, match="2 studies .*: a, b; name one with --study"):
        find_study(url, None)
    with pytest.raises(UsageError, match="no study 'c'"):
        find_study(url, "c")


@pytest.mark.parametrize(
    ("name", "why"),
    [("", "must not be empty"), (" ", "must not be empty"), ("a\nb", "control characters"), ("x" * 513, "at most 512"),
     (CACHE_STUDY, "probe cache")],
)
def test_study_names_a_storage_cannot_hold_are_refused(name, why):
    with pytest.raises(UsageError, match=why):
        check_study_name(name)


def test_study_names_a_storage_can_hold_pass():
    for name in ("shapes-cpu-1a2b3c4d", "../escape/x", "x" * 512, "'; DROP TABLE studies; --"):
        assert check_study_name(name) == name


def test_a_storage_failure_after_opening_is_one_line_without_the_password():
    url = "postgresql://alice:pw@db/speedopt"
    with pytest.raises(UsageError) as caught, storage_errors(url):
        try:
            raise sqlalchemy.exc.OperationalError("SELECT", {}, Exception(f"server closed the connection\nof {url}"))
        except sqlalchemy.exc.OperationalError as exc:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc
    text = str(caught.value)
    assert "\n" not in text and "pw" not in text and "alice:***@db" in text and "server closed the connection" in text
