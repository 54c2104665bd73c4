"""Faulty and hostile storages: passwords in URLs, typo'd paths, files that are not storages, damaged
SQLite and journal files, read-only folders, missing drivers, searches started at the same moment,
Ctrl-C at the baseline, and a worker killed mid-trial.

Each case runs the real CLI and checks what the user sees (one line naming the problem and the fix,
exit 2, no traceback, no password) and what it leaves (the storage file byte for byte, no new folders,
nothing in the temp folder). Cases that run a real trainer are ``slow``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from tests.conftest import EVERY_CONFIG, free_port
from tests.faults.conftest import Faults, freeze, no_traceback, one_line_error

PG = os.environ.get("SPEEDOPT_TEST_POSTGRES")  # set by .ci/run, which starts a real server on loopback
SECRET = "S3cr3t-pw"
BASELINE = "model=yolov5n imgsz=64 batch=4 workers=0"
# The smallest real search: quality off, no finals, tiny images.
TINY = ["--quality", "off", "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu", "--baseline", BASELINE, "--no-report",
        *EVERY_CONFIG]


def _closed_port_url(scheme: str = "postgresql") -> str:
    """A server URL with a password that nothing listens on: the connection is refused at once."""
    return f"{scheme}://alice:{SECRET}@127.0.0.1:{free_port()}/speedopt"


def _no_secret(done: subprocess.CompletedProcess) -> None:
    everything = done.stdout + done.stderr
    assert SECRET not in everything, everything[-2000:]


def _env(faults: Faults) -> dict[str, str]:
    """torch's inductor cache beside the sandbox, not in its temp folder (a trainer run is not the point)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(faults.root / "inductor")}


def _optuna_storage(path: Path, trials: int = 3) -> str:
    """A real Optuna SQLite storage with one study and ``trials`` complete trials."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{path}"
    study = optuna.create_study(study_name="kept", storage=url, direction="maximize")
    for i in range(trials):
        study.add_trial(optuna.trial.create_trial(value=float(i), params={"x": i},
                                                  distributions={"x": optuna.distributions.IntDistribution(0, 999)}))
    return url


def _study(url: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=url)


# --- 5: a password in a storage URL is never printed -------------------------------------------------

READ_COMMANDS = {
    "studies": ["studies"],
    "best": ["best"],
    "report": ["report"],
    "worker": ["worker", "--study", "any"],
    "export": ["export", "--study", "any", "-o", "{root}/out.db"],
    "dashboard": ["dashboard", "--port", "{port}"],
}


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_a_refused_connection_never_prints_the_password(faults: Faults, command: str) -> None:
    args = [a.format(root=faults.root, port=free_port()) for a in READ_COMMANDS[command]]
    faults.watch(faults.root)
    done = faults.run(*args, "--storage", _closed_port_url())
    line = one_line_error(done, "alice:***@127.0.0.1", "refused")
    _no_secret(done)
    assert "speedopt" in line
    faults.unchanged()


def test_search_never_prints_the_password_of_its_storage(faults: Faults) -> None:
    data = faults.dataset()
    faults.watch(faults.root)
    done = faults.run("search", "--data", str(data), "--storage", _closed_port_url(), *TINY, env=_env(faults))
    one_line_error(done, "alice:***@", "refused")
    _no_secret(done)
    faults.unchanged()


def test_a_url_sqlalchemy_cannot_parse_is_quoted_without_its_password(faults: Faults) -> None:
    done = faults.run("studies", "--storage", f"postgresql://alice:{SECRET}@127.0.0.1:notaport/db")
    one_line_error(done, "cannot open storage", "alice:***@")
    _no_secret(done)


@pytest.mark.parametrize("url", [f"postgresql+psycopg2://alice:{SECRET}@127.0.0.1/db", f"mysql://alice:{SECRET}@127.0.0.1/db"])
def test_a_missing_database_driver_is_one_line_with_the_install(faults: Faults, url: str) -> None:
    done = faults.run("studies", "--storage", url)
    one_line_error(done, "missing database driver", "pip install")
    _no_secret(done)


@pytest.mark.skipif(not PG, reason="no PostgreSQL server: .ci/run starts one and sets SPEEDOPT_TEST_POSTGRES")
def test_a_wrong_database_on_a_real_server_is_one_line_without_the_password(faults: Faults) -> None:
    assert PG is not None
    head, _, tail = PG.partition("@")
    url = f"{head}:{SECRET}@{tail.rsplit('/', 1)[0]}/no_such_database"
    done = faults.run("studies", "--storage", url)
    one_line_error(done, "no_such_database", ":***@")
    _no_secret(done)


# --- 11: read-only commands never create a storage ----------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_a_mistyped_storage_path_is_refused_and_nothing_is_created(faults: Faults, command: str, kind: str) -> None:
    missing = faults.root / "no" / "such" / "dir" / ("x.db" if kind == "sqlite" else "x.log")
    url = f"sqlite:///{missing}" if kind == "sqlite" else str(missing)
    args = [a.format(root=faults.root, port=free_port()) for a in READ_COMMANDS[command]]
    faults.watch(faults.root)
    one_line_error(faults.run(*args, "--storage", url), "no storage at", str(missing), "speedopt search")
    assert not (faults.root / "no").exists()
    faults.unchanged()


def test_the_default_storage_is_not_created_by_studies(faults: Faults) -> None:
    faults.watch(faults.root)
    one_line_error(faults.run("studies"), "no storage at", "studies/speedopt.db")
    assert not (faults.work / "studies").exists()
    faults.unchanged()


def test_a_server_database_without_optuna_tables_is_not_filled_by_a_read(faults: Faults) -> None:
    if not PG:
        pytest.skip("no PostgreSQL server: .ci/run starts one and sets SPEEDOPT_TEST_POSTGRES")
    import sqlalchemy

    base = PG.rsplit("/", 1)[0]
    name = f"empty_{os.getpid()}"
    admin = sqlalchemy.create_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as db:
        db.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    try:
        done = faults.run("studies", "--storage", f"{base}/{name}")
        one_line_error(done, "no storage at", "no Optuna tables")
        engine = sqlalchemy.create_engine(f"{base}/{name}")
        assert sqlalchemy.inspect(engine).get_table_names() == []  # nothing written into it
        engine.dispose()
    finally:
        with admin.connect() as db:
            db.execute(sqlalchemy.text(f"DROP DATABASE {name}"))
        admin.dispose()


# --- 10 and 12: files that are not storages are refused and left as they were -------------------------


def _unrelated_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
        db.execute("INSERT INTO customers VALUES (1, 'ada')")
    return path


def test_import_of_an_unrelated_sqlite_file_leaves_it_untouched(faults: Faults) -> None:
    other = _unrelated_sqlite(faults.root / "other.db")
    faults.watch(other, faults.work)
    one_line_error(faults.run("import", str(other), "--storage", f"sqlite:///{faults.work}/target.db"), "not an Optuna storage", "customers")
    with sqlite3.connect(f"file:{other}?mode=ro", uri=True) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["customers"]
    faults.unchanged()


@pytest.mark.parametrize("command", ["studies", "search"])
def test_an_unrelated_sqlite_file_as_storage_is_refused_not_filled(faults: Faults, command: str) -> None:
    other = _unrelated_sqlite(faults.root / "other.db")
    args = ["search", "--data", str(faults.dataset()), *TINY] if command == "search" else ["studies"]
    faults.watch(faults.root)
    one_line_error(faults.run(*args, "--storage", f"sqlite:///{other}", env=_env(faults)), "not an Optuna storage")
    faults.unchanged()


@pytest.mark.parametrize("content", [b"hello, not a database\n", b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_not_sqlite_is_refused(faults: Faults, content: bytes) -> None:
    bogus = faults.root / "bogus.db"
    bogus.write_bytes(content)
    faults.watch(faults.root)
    one_line_error(faults.run("studies", "--storage", f"sqlite:///{bogus}"), str(bogus), "speedopt export")  # the fix too
    one_line_error(faults.run("import", str(bogus), "--storage", f"sqlite:///{faults.work}/t.db"), str(bogus), "speedopt export")
    faults.unchanged()


def test_a_truncated_storage_is_one_line_and_left_as_it_is(faults: Faults) -> None:
    path = faults.root / "s.db"
    _optuna_storage(path, trials=40)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    faults.watch(faults.root)
    for args in (["studies", "--storage", f"sqlite:///{path}"], ["import", str(path), "--storage", f"sqlite:///{faults.work}/t.db"]):
        done = faults.run(*args)
        one_line_error(done, str(path), "restore it from a copy")
    faults.unchanged()


def test_an_empty_file_holds_no_storage(faults: Faults) -> None:
    empty = faults.root / "empty.db"
    empty.touch()
    faults.watch(faults.root)
    one_line_error(faults.run("studies", "--storage", f"sqlite:///{empty}"), "holds no Optuna storage")
    assert empty.stat().st_size == 0
    faults.unchanged()


JOURNALS = {
    "garbage": b"this is not a journal\nat all\n",
    "broken-json": b'{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n{"op_code": 5, \nmore\n',
    "json-not-journal": b'{"hello": "world"}\n',
}


@pytest.mark.parametrize("case", sorted(JOURNALS))
def test_a_corrupt_journal_is_one_line_for_studies_and_import(faults: Faults, case: str) -> None:
    journal = faults.root / "j.log"
    journal.write_bytes(JOURNALS[case])
    faults.watch(faults.root)
    one_line_error(faults.run("studies", "--storage", str(journal)), "not a readable Optuna journal", str(journal))
    one_line_error(faults.run("import", str(journal), "--storage", f"sqlite:///{faults.work}/t.db"), "not a readable Optuna journal")
    faults.unchanged()


def test_a_storage_in_a_read_only_folder_is_one_line_for_search_and_still_readable(faults: Faults) -> None:
    folder = faults.root / "frozen"
    folder.mkdir()
    url = _optuna_storage(folder / "s.db")
    data = faults.dataset()
    freeze(folder)
    faults.watch(faults.root)
    done = faults.run("search", "--data", str(data), "--storage", url, "--study", "new", "--trials", "1", *TINY, env=_env(faults))
    one_line_error(done, "read-only", str(folder / "s.db"))
    listed = faults.run("studies", "--storage", url)  # reading needs no write: it works
    no_traceback(listed)
    assert listed.returncode == 0 and "kept" in listed.stdout, listed.stderr
    faults.unchanged()


def test_a_worker_on_a_storage_in_a_read_only_folder_is_one_line(faults: Faults) -> None:
    from speedopt.search import SearchConfig, plan
    from speedopt.study import schema

    folder = faults.root / "frozen"
    folder.mkdir()
    url = _optuna_storage(folder / "s.db")
    data = faults.dataset()
    protocol = plan(SearchConfig(data=str(data), device="cpu", quality="off", baseline=BASELINE, trials=2)).protocol
    study = optuna.create_study(study_name="joined", storage=url, direction="maximize")
    schema.write_protocol(study, protocol)  # a study speedopt made, still short of its 2 trials
    freeze(folder)
    faults.watch(faults.root)
    one_line_error(faults.run("worker", "--storage", url, "--study", "joined", env=_env(faults)), "read-only", str(folder / "s.db"))
    faults.unchanged()


@pytest.mark.parametrize("command", ["search", "studies"])
def test_a_working_directory_without_write_permission_is_one_line(faults: Faults, command: str) -> None:
    args = ["search", "--data", str(faults.dataset()), *TINY] if command == "search" else ["studies"]
    freeze(faults.work)
    faults.watch(faults.root)
    one_line_error(faults.run(*args, env=_env(faults)), "studies/speedopt.db")
    faults.unchanged()


# --- hostile study names for storage operations -------------------------------------------------------

BAD_NAMES = {"empty": "", "blank": "   ", "newline": "a\nb", "escape": "a\x1b[31mred", "long": "n" * 600,
             "probe-cache": "speedopt-probe-cache"}


@pytest.mark.parametrize("case", sorted(BAD_NAMES))
def test_a_study_name_no_storage_can_hold_is_refused_before_any_storage(faults: Faults, case: str) -> None:
    data = faults.dataset()
    faults.watch(faults.root)
    done = faults.run("search", "--data", str(data), "--study", BAD_NAMES[case], "--trials", "1", *TINY, env=_env(faults))
    one_line_error(done, "--study" if case != "probe-cache" else "probe cache")
    assert not (faults.work / "studies").exists()
    faults.unchanged()


# --- 13: searches started at the same moment on a new storage -------------------------------------------


@pytest.mark.slow
def test_searches_started_at_once_on_a_new_storage_wait_and_join(faults: Faults) -> None:
    data = faults.dataset()
    url = f"sqlite:///{faults.work}/new/s.db"
    argv = [sys.executable, "-m", "speedopt", "search", "--data", str(data), "--storage", url, "--study", "race",
            "--trials", "2", "--repeats", "0", *TINY]
    env = {**os.environ, "TMPDIR": str(faults.tmp), "PYTHONUNBUFFERED": "1", **_env(faults)}
    procs = [subprocess.Popen(argv, cwd=faults.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert "Traceback" not in out + err, err[-3000:]
        assert p.returncode == 0, err[-3000:]
    study = _study(url, "race")
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) >= 2
    assert [t.user_attrs.get("role") for t in study.trials].count("baseline") == 1  # one creator: one baseline
    assert not study.get_trials(states=(TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING))
    faults.unchanged()


# --- 6 and 16a: Ctrl-C at the baseline ------------------------------------------------------------------


def _wait_running(url: str, name: str, proc: subprocess.Popen, timeout: float = 120) -> optuna.trial.FrozenTrial:
    """The first trial of the study still RUNNING a second after it started, polled while ``proc`` runs.

    A proposal that repeats a measured config is pruned at once (``duplicate_of``): a trial that is
    still running a second later is being measured, whatever the sampler proposed first. The baseline is
    no proposal: it is returned as soon as it runs (a 3-step baseline can end within that second).
    """
    deadline = time.monotonic() + timeout
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            running = _study(url, name).get_trials(states=(TrialState.RUNNING,))
        except (KeyError, ValueError, optuna.exceptions.StorageInternalError):
            running = []
        if running and running[0].user_attrs.get("worker"):
            if running[0].user_attrs.get("role") == "baseline":
                return running[0]
            time.sleep(1.0)
            again = _study(url, name).trials[running[0].number]
            if again.state == TrialState.RUNNING:
                return again
            continue
        time.sleep(0.1)
    raise AssertionError("no trial started")


@pytest.mark.slow
def test_ctrl_c_at_the_baseline_is_one_line_and_the_rerun_retries_the_baseline(faults: Faults) -> None:
    data = faults.dataset()
    url = f"sqlite:///{faults.work}/s.db"
    # --repeats 2: the rerun's finals must name the baseline that actually ran.
    # --ceiling-rank off: the ranking's enqueued config would take trial 1's number from the baseline's retry.
    args = ["search", "--data", str(data), "--storage", url, "--study", "cc", "--trials", "2", "--repeats", "2",
            "--finalists", "1", "--no-ablation", "--ceiling-rank", "off", *EVERY_CONFIG, *TINY]
    env = {**os.environ, "TMPDIR": str(faults.tmp), "PYTHONUNBUFFERED": "1", **_env(faults)}
    proc = subprocess.Popen([sys.executable, "-m", "speedopt", *args], cwd=faults.work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = _wait_running(url, "cc", proc)
    assert running.number == 0 and running.user_attrs["role"] == "baseline"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, err[-3000:]
    assert err.strip().splitlines()[-1] == "speedopt search: interrupted; run the same command to resume"
    assert err.count("interrupted") == 1
    trials = _study(url, "cc").trials
    assert [(t.number, t.state) for t in trials] == [(0, TrialState.FAIL), (1, TrialState.WAITING)]
    assert trials[1].user_attrs == {"role": "baseline"} and trials[1].params == trials[0].params
    assert not [p for p in psutil.process_iter(["cmdline"]) if "speedopt.measure._" in " ".join(p.info["cmdline"] or [])
                and str(faults.tmp) in " ".join(p.info["cmdline"] or [])]

    again = faults.run(*args, env=_env(faults), timeout=600)
    no_traceback(again)
    assert again.returncode == 0, again.stderr[-3000:]
    study = _study(url, "cc")
    base = [t for t in study.get_trials(states=(TrialState.COMPLETE,)) if t.user_attrs.get("role") == "baseline"]
    assert [t.number for t in base] == [1] and base[0].user_attrs["status"] == "ok"
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 2
    assert "trial 0 retried as trial 1" in again.stdout  # the summary lists the trial that ended early
    assert "trial 1 (baseline)" in again.stdout and "trial 0 (baseline)" not in again.stdout  # 16a
    assert study.user_attrs["finals"]["trials"][0] == 1
    report = faults.run("report", "--storage", url, "--study", "cc", "--out", str(faults.work / "r"), env=_env(faults), timeout=600)
    assert report.returncode == 0, report.stderr[-3000:]
    text = Path(report.stdout.strip().splitlines()[-1]).read_text()
    assert "1 ended early (trial 0 retried as trial 1)" in text  # the report lists the trial that ended early
    assert "| 0 | baseline | interrupted (Ctrl-C) | trial 1 |" in text
    faults.unchanged()


# --- 19: a worker does not leave the study short while a killed worker's trial can be recovered ---------


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and everything it started (its trial runs in a session of its own)."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=30)


@pytest.mark.slow
def test_a_worker_recovers_the_trial_of_a_worker_killed_on_another_host(faults: Faults) -> None:
    """On the PostgreSQL server where one runs (CI starts one: the storage of workers on several hosts), else in
    SQLite. Recovery is Optuna's heartbeat in either (the same code path), and the wait for a stale heartbeat
    is most of this test's time, so it runs on one storage, not on both."""
    data = faults.dataset()
    url = str(PG) if PG else f"sqlite:///{faults.work}/s.db"
    name = f"killed-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, "TMPDIR": str(faults.tmp), "PYTHONUNBUFFERED": "1", **_env(faults)}
    # 20 steps: the doomed worker's trial must still run when the test looks (a 3-step trial can end first)
    seeded = faults.run("search", "--data", str(data), "--storage", url, "--study", name, "--trials", "1", "--repeats", "0",
                        *TINY, "--steps", "20", "--max-steps", "20", env=_env(faults))
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    _study(url, name).set_user_attr("trials", 3)

    doomed = subprocess.Popen([sys.executable, "-m", "speedopt", "worker", "--storage", url, "--study", name],
                              cwd=faults.work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = _wait_running(url, name, doomed)
    _kill_tree(doomed.pid)
    doomed.wait()
    # The killed worker ran on another node: only its heartbeat going stale can tell that it is gone.
    study = _study(url, name)
    study._storage.set_trial_user_attr(running._trial_id, "worker", {**running.user_attrs["worker"], "host": "another-node"})

    done = faults.run("worker", "--storage", url, "--study", name, env=_env(faults), timeout=600)
    no_traceback(done)
    assert done.returncode == 0, done.stderr[-3000:]
    study = _study(url, name)
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 3, [(t.number, t.state) for t in study.trials]
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    (failed,) = study.get_trials(states=(TrialState.FAIL,))
    assert failed.number == running.number
    (retry,) = [t for t in study.trials if t.system_attrs.get("failed_trial") == failed.number]
    assert retry.params == failed.params  # the same knobs; measured, or pruned when this worker measured them meanwhile
    assert retry.state == TrialState.COMPLETE or retry.user_attrs.get("duplicate_of") is not None
    assert f"trial {failed.number} retried as trial {retry.number}" in done.stdout  # the summary says so
    assert "3 of 3 complete" in done.stdout


# --- round 2, item 4: an imported study's stored ids and model paths are data from outside -------------

TRAVERSAL = "../../../x"


def _measured_study(faults: Faults, url: str, model: str | None = None, timed: bool = True) -> optuna.Study:
    """A study as `speedopt search` leaves it, made without a trainer: its protocol and one measured baseline
    (``model``: the model its config names), the validation pass of that config already timed unless not ``timed``."""
    import dataclasses

    from speedopt.measure import TrialResult
    from speedopt.quality import Feasibility, Verdict, signature
    from speedopt.search import SearchConfig, plan
    from speedopt.search._ends import _val_digest
    from speedopt.status import Status
    from speedopt.study import schema

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    protocol = plan(SearchConfig(data=str(faults.dataset()), device="cpu", quality="off", storage=url)).protocol
    study = optuna.create_study(study_name="imported", storage=url, direction="maximize")
    schema.write_protocol(study, protocol)
    knobs = dataclasses.replace(protocol.baseline, model=model) if model else protocol.baseline
    trial = study.ask()
    trial.set_user_attr(schema.ROLE, "baseline")
    schema.write_measurement(trial, TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=12.0,
                                                data_wait_fraction=0.25, steps=10).to_dict())
    schema.write_verdict(trial, Verdict(signature(knobs), Feasibility.FEASIBLE, reason="quality off").attrs())
    study.tell(trial, 12.0)
    if timed:
        schema.write_val_time(study, _val_digest(protocol, knobs), {"status": "ok", "val_s": 1.0, "val_images": 4, "save_s": 0.1})
    return study


def _plant_id(study: optuna.Study, where: str, artifact_id: str) -> None:
    """An artifact id stored where Optuna, optuna-dashboard or speedopt's report keep one."""
    from speedopt.study import schema

    if where == "report-figure":
        schema.write_artifacts(study, {"history.png": artifact_id})
    elif where == "study-artifact":
        study._storage.set_study_system_attr(study._study_id, f"artifacts:{artifact_id}", json.dumps({"artifact_id": artifact_id}))
    else:  # a trial's artifact, as optuna.artifacts.upload_artifact stores it
        study.add_trial(optuna.trial.create_trial(value=1.0, system_attrs={f"artifacts:{artifact_id}": json.dumps(None)}))


@pytest.mark.parametrize("where", ["report-figure", "study-artifact", "trial-artifact"])
def test_import_refuses_a_stored_artifact_id_that_leaves_the_store(faults: Faults, where: str) -> None:
    # Round 2, item 4: an export whose figure ids were traversal strings imported without a word, and the next
    # `speedopt report` ended in a traceback (ValueError: Invalid artifact_id, exit 1).
    from speedopt.study import schema

    source = faults.root / "export.db"
    study = optuna.create_study(study_name="imported", storage=f"sqlite:///{source}", direction="maximize")
    study.set_user_attr(schema.SCHEMA, schema.SCHEMA_VERSION)
    study.add_trial(optuna.trial.create_trial(value=1.0))
    _plant_id(study, where, TRAVERSAL)  # a trial's artifact: on trial 1
    target = _optuna_storage(faults.work / "target.db")
    faults.watch(faults.root)
    line = one_line_error(faults.run("import", str(source), "--storage", target), "refusing to import", "'imported'",
                          TRAVERSAL, "nothing was imported")
    assert ("trial 1" in line) == (where == "trial-artifact"), line
    assert ("report_artifacts" in line) == (where == "report-figure"), line
    faults.unchanged()


def test_report_refuses_a_stored_artifact_id_that_leaves_the_store(faults: Faults) -> None:
    # A storage another tool wrote holds the same id: the report says so in one line, before it writes anything.
    path = faults.root / "s.db"
    study = _measured_study(faults, f"sqlite:///{path}")
    _plant_id(study, "report-figure", TRAVERSAL)
    faults.watch(faults.root)
    one_line_error(faults.run("report", "--storage", f"sqlite:///{path}"), "report_artifacts", TRAVERSAL, "artifact id")
    assert not (faults.work / "reports").exists()
    faults.unchanged()


def _crafted_model(faults: Faults) -> tuple[Path, Path]:
    """A .pt whose unpickling touches a marker file (the fault suite's crafted checkpoint), and that marker."""
    from tests.faults.test_trial_faults import _crafted

    marker = faults.root / "pwned"
    return _crafted(faults.root / "evil.pt", "posix", "system", (f"touch {marker}",), legacy=False), marker


@pytest.mark.parametrize("job", ["validation pass", "probe"])
def test_a_crafted_checkpoint_a_study_names_is_inspected_before_its_job_starts(faults: Faults, job: str) -> None:
    # A .pt that an imported study's trial ran went uninspected to the trainer of the report's validation pass (and
    # of the one after a resumed search's finals), as the probes' weights a worker read from the study did: the
    # trainer unpickled it and the payload touched its marker. The one job runner inspects both now.
    import dataclasses

    from speedopt.measure import JobOutcome, ProbeJob, run_job
    from speedopt.offline import cache_dir
    from speedopt.search import validation_time
    from speedopt.status import Status
    from speedopt.study import schema

    evil, marker = _crafted_model(faults)
    url = f"sqlite:///{faults.root / 's.db'}"
    study = _measured_study(faults, url, model=str(evil) if job == "validation pass" else None, timed=False)
    protocol = schema.read_protocol(study)
    if job == "validation pass":  # what `speedopt report` and a search's end time, for the config the study names
        outcome = validation_time(study, protocol, dataclasses.replace(protocol.baseline, model=str(evil)))
        what = f"model {evil}"
    else:
        outcome = run_job(ProbeJob("ultralytics", None, protocol.data, protocol.baseline, "cpu", 60.0, str(cache_dir()),
                                   weights=str(evil)), "imported")
        what = f"--weights {evil}"
    assert not marker.exists(), "the trainer unpickled the crafted checkpoint"
    assert isinstance(outcome, JobOutcome) and outcome.status is Status.ERROR, outcome
    assert outcome.message.startswith(f"{what} refers to posix.system") and "refusing" in outcome.message, outcome.message


def test_a_worker_refuses_a_crafted_model_in_the_stored_space(faults: Faults) -> None:
    # `speedopt worker` took the stored space as it was: a .pt it lists reached no check before a trial asked for it.
    from speedopt.study import Space, schema
    from speedopt.study._space import Domain

    evil, marker = _crafted_model(faults)
    url = f"sqlite:///{faults.root / 's.db'}"
    study = _measured_study(faults, url)
    space = Space.from_dict(study.user_attrs[schema.SPACE])
    widened = Space({**space.domains, "model": Domain(choices=(*space.domains["model"].values(), str(evil)))})
    study.set_user_attr(schema.SPACE, widened.to_dict())
    study.set_user_attr(schema.TRIALS, 1)  # it holds its target: a worker that joins samples nothing
    faults.watch(faults.root)
    line = one_line_error(faults.run("worker", "--storage", url, "--study", "imported", env=_env(faults)),
                          f"model {evil}", "posix.system")
    assert "refusing" in line and not marker.exists()
    faults.unchanged()


# --- round 2, item 8: the dashboard creates nothing ----------------------------------------------------


def test_the_dashboard_on_a_copied_storage_creates_nothing_beside_it(faults: Faults, monkeypatch: pytest.MonkeyPatch) -> None:
    # `speedopt dashboard` on a copied storage made <storage>.artifacts/ beside it: read-only commands create nothing.
    # The real command serves in a thread of this process (no new Python: fast), its real wsgiref server kept at hand
    # so the test can shut it down.
    import threading
    import urllib.request
    import wsgiref.simple_server

    from speedopt.cli import main

    url = _optuna_storage(faults.root / "copied.db")
    servers: list[wsgiref.simple_server.WSGIServer] = []
    make = wsgiref.simple_server.make_server

    def kept(*args, **kwargs):  # the real server, kept so the test can shut it down
        servers.append(make(*args, **kwargs))
        return servers[-1]

    monkeypatch.setattr(wsgiref.simple_server, "make_server", kept)
    faults.watch(faults.root)
    port = free_port()
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main(["dashboard", "--storage", url, "--port", str(port)])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not servers and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert servers, "the dashboard did not start"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=30) as answer:
            assert answer.status == 200 and b'"kept"' in answer.read()
    finally:
        for server in servers:
            server.shutdown()
        thread.join(timeout=30)
    assert codes == [0] and not thread.is_alive()
    assert not (faults.root / "copied.db.artifacts").exists()
    faults.unchanged()


# --- round 2, item 10: a damaged SQLite file is named so by every command ------------------------------


def test_a_damaged_sqlite_storage_is_the_same_one_line_for_every_command(faults: Faults) -> None:
    # 8 KiB overwritten inside a storage: `studies` said "An exception is raised during the commit ... exceeding max
    # length", report and best "database disk image is malformed ... check that it is writable", while import
    # called the same file a damaged SQLite database.
    path = faults.root / "corrupt.db"
    url = f"sqlite:///{path}"
    study = _measured_study(faults, url)
    data = study.user_attrs["data"]
    with open(path, "r+b") as f:
        f.seek(8192)  # the third page of the file, inside the tables Optuna reads first
        f.write(b"\xff" * 8192)
    commands = {
        "studies": ["studies", "--storage", url],
        "report": ["report", "--storage", url],
        "best": ["best", "--storage", url],
        "verify": ["verify", "--storage", url],
        "export": ["export", "--storage", url, "--study", "imported", "-o", str(faults.work / "out.db")],
        "worker": ["worker", "--storage", url, "--study", "imported"],
        "import": ["import", str(path), "--storage", f"sqlite:///{faults.work / 'target.db'}"],
        "search": ["search", "--data", data, "--storage", url, "--study", "imported", *TINY],
    }
    faults.watch(faults.root)
    said = {}
    for name, args in commands.items():
        line = one_line_error(faults.run(*args, env=_env(faults)), f"{path} is a damaged SQLite database", "restore it from a copy")
        said[name] = line.split(": error: ", 1)[1]
    assert len(set(said.values())) == 1, said
    faults.unchanged()


# --- round 4, items 3 and 4: every record an import stores fits its schema's types and bounds --------------


def _plant_record(study: optuna.Study, what: str) -> None:
    from speedopt.knobs import Knobs
    from speedopt.study import schema
    from speedopt.study.record_types import CompileDecision

    decision = CompileDecision(0, Knobs(), ("default",), 2, 100, 48).to_attr()
    if what == "compile-repeats":  # a report looped over a billion rounds: 5.5 GB in 44 s, then MemoryError
        study.set_user_attr(schema.COMPILE, {**decision, "repeats": 1_000_000_000})
    elif what == "compile-trial":  # ValueError in report and best
        study.set_user_attr(schema.COMPILE, {**decision, "trial": "x"})
    elif what == "ceilings":  # AttributeError in report
        study.set_user_attr(schema.CEILINGS, {"x": 5})
    else:  # a trial's measurement of the wrong type
        attrs = {"status": "ok", "images_per_s": "fast", "config": Knobs().to_dict(), "feasible": True}
        study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs=attrs))


@pytest.mark.parametrize(
    "what, needle",
    [
        ("compile-repeats", "compile_decision record.repeats is 1000000000, beyond its bound"),
        ("compile-trial", "its compile_decision record cannot be read"),
        ("ceilings", "ceilings record cannot be read"),
        ("measurement", "trial 1's record.result.images_per_s is 'fast', not a number"),
    ],
)
def test_import_refuses_a_record_that_does_not_fit_its_schema(faults: Faults, what: str, needle: str) -> None:
    source = faults.root / "export.db"
    study = _measured_study(faults, f"sqlite:///{source}")
    target = _optuna_storage(faults.work / "target.db")
    _plant_record(study, what)
    faults.watch(faults.root)
    one_line_error(faults.run("import", str(source), "--storage", target), "refusing to import", needle,
                   "nothing was imported")
    faults.unchanged()


def test_a_study_as_search_leaves_it_imports_and_reports(faults: Faults) -> None:
    source = faults.root / "export.db"
    _measured_study(faults, f"sqlite:///{source}")
    target = faults.work / "target.db"
    done = faults.run("import", str(source), "--storage", f"sqlite:///{target}")
    assert done.returncode == 0, done.stderr
    assert faults.run("report", "--storage", f"sqlite:///{target}", "--study", "imported").returncode == 0


# --- round 4, item 1: an imported study's checkout is never run -------------------------------------------------


def _planted_checkout(faults: Faults) -> tuple[Path, Path]:
    """A folder that passes for a yolov5 checkout (train.py with YOLOv5's marker strings, utils/callbacks.py,
    models/yolo.py) whose train.py touches a marker when run."""
    marker = faults.root / "pwned"
    root = faults.root / "their-yolov5"
    (root / "utils").mkdir(parents=True)
    (root / "models").mkdir()
    (root / "utils" / "callbacks.py").write_text("")
    (root / "models" / "yolo.py").write_text("")
    markers = "def parse_opt\ndef main(opt\nCallbacks\ncreate_dataloader\n--batch-size\non_train_batch_end\n"
    (root / "train.py").write_text(f"open({str(marker)!r}, 'w').close()\n'''\n{markers}'''\n")
    return root, marker


def test_an_imported_study_never_runs_the_checkout_it_names(faults: Faults) -> None:
    import dataclasses

    from speedopt.reporting import recommend
    from speedopt.reporting._trainer_run import launch
    from speedopt.study import schema

    checkout, marker = _planted_checkout(faults)
    source = faults.root / "export.db"
    study = _measured_study(faults, f"sqlite:///{source}")
    protocol = dataclasses.replace(schema.read_protocol(study), engine="yolov5", yolov5_dir=str(checkout))
    schema.write_protocol(study, protocol)
    target = f"sqlite:///{faults.work / 'target.db'}"
    done = faults.run("import", str(source), "--storage", target)
    assert done.returncode == 0, done.stderr
    assert f"the study names the yolov5 checkout {str(checkout)!r}" in done.stdout and "--yolov5-dir" in done.stdout
    imported = optuna.load_study(study_name="imported", storage=target)
    assert schema.read_protocol(imported).yolov5_dir is None
    assert imported.user_attrs[schema.IMPORTED_YOLOV5_DIR] == str(checkout)  # kept for reading, never run
    started = launch(recommend(imported), 1, None, faults.work)
    assert str(checkout) not in " ".join(started.argv) and "-m yolov5.train" in " ".join(started.argv)
    report = faults.run("best", "--storage", target, "--study", "imported")
    assert report.returncode == 0 and str(checkout) not in report.stdout, report.stdout + report.stderr
    assert not marker.exists()
    named = faults.run("verify", "--storage", target, "--study", "imported", "--yolov5-dir", str(faults.root))
    one_line_error(named, f"--yolov5-dir {faults.root} has no train.py")  # the user's own, checked as a search checks it


# --- round 4: a shared PostgreSQL study under faults ----------------------------------------------------------


def _claim_owner(storage: optuna.storages.BaseStorage, study: str, step: str) -> int | None:
    """The pid that owns the first claim of ``study``'s ``step`` in ``storage`` (None while nobody has claimed it)."""
    from speedopt.search._claim import OWNER, claim_name

    try:
        claim = storage.get_study_id_from_name(claim_name(study, step, 1))
    except KeyError:
        return None
    owner = storage.get_study_user_attrs(claim).get(OWNER) or {}
    return int(owner["pid"]) if "pid" in owner else None


def _command_lines(parents: list[subprocess.Popen[str]], seen: set[str], stop: threading.Event) -> None:
    """The command line of every process the searches start (their jobs, warm workers, launchers), while they run:
    the user typed the URL on theirs; none they start may carry it. A child whose command line is its search's own is
    a fork that has not yet run its program (the moment between fork and exec of every job it starts, or a forked
    helper of the same program): it shows the line the user typed, not one speedopt wrote (CI, 2026-12-06, caught one)."""
    while not stop.is_set():
        for parent in parents:
            with contextlib.suppress(psutil.Error):
                search = psutil.Process(parent.pid)
                typed = search.cmdline()
                for child in search.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        line = child.cmdline()
                        if line != typed:
                            seen.add(" ".join(line))
        stop.wait(0.3)


@pytest.mark.slow
@pytest.mark.skipif(not PG, reason="no PostgreSQL server: .ci/run starts one and sets SPEEDOPT_TEST_POSTGRES")
def test_two_searches_share_a_postgres_study_through_a_killed_owner(faults: Faults) -> None:
    """Issue 54: two `speedopt search` runs of one study on a real server, with finals and a compile decision. The
    first to reach the finals owns them; it is killed (SIGKILL, its whole group) once a finals round is stored. The
    other takes the claim over, measures what is missing, and decides compile: every round of the finals and the
    decision is measured once, no config is measured twice, and the password in the storage URL appears in no output,
    report, database row or command line. The compile mode runs with a compiler that fails at once (CXX names none):
    the decision's path without a 4-minute cold compile on this CPU; the mode is said to fail and not measured again."""
    import sqlalchemy

    from speedopt.study import records, schema

    assert PG is not None
    head, _, tail = PG.partition("@")
    url = f"{head}:{SECRET}@{tail}"  # the loopback server trusts every password: this one must still never show
    name = f"shared-{os.getpid()}"
    data = faults.dataset()
    space = faults.root / "space.yaml"
    space.write_text("cache: [none, ram]\ncompile: [off, default]\n")
    args = ["search", "--data", str(data), "--storage", url, "--study", name, "--space", str(space), "--trials", "2",
            "--finalists", "1", "--repeats", "3", "--no-ablation", *TINY]
    env = {**os.environ, "TMPDIR": str(faults.tmp), "CXX": str(faults.root / "no-such-compiler"), **_env(faults)}
    seen: set[str] = set()
    stop = threading.Event()
    procs = [subprocess.Popen([sys.executable, "-m", "speedopt", *args], cwd=faults.work, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True) for _ in range(2)]
    watcher = threading.Thread(target=_command_lines, args=(procs, seen, stop), daemon=True)
    watcher.start()
    # One storage for every look: a URL per look opened a pool per look, and in CI the server's 100 connections ran
    # out before the collector closed the old pools
    storage = optuna.storages.RDBStorage(PG)
    killed = None
    deadline = time.time() + 600
    while killed is None and time.time() < deadline and all(p.poll() is None for p in procs):
        owner = _claim_owner(storage, name, "finals")
        study = optuna.load_study(study_name=name, storage=storage) if name in optuna.get_all_study_names(storage) else None
        finals = schema.read_finals(study) if study is not None else None
        if owner is not None and finals is not None and finals.measured:
            killed = next(p for p in procs if p.pid == owner)
            os.killpg(killed.pid, signal.SIGKILL)
        time.sleep(0.5)
    assert killed is not None, [p.communicate(timeout=60) for p in procs]
    survivor = next(p for p in procs if p is not killed)
    out, err = survivor.communicate(timeout=900)
    killed.communicate(timeout=60)
    stop.set()
    watcher.join()
    assert survivor.returncode == 0, (out + err)[-3000:]
    # It took over what the killed owner of the finals left (the rest of the finals, or only the compile decision when
    # the owner had stored the last round just before the kill): what the study holds says so, not which lines it printed
    study = optuna.load_study(study_name=name, storage=storage)
    finals, decision = schema.read_finals(study), schema.read_compile(study)
    assert finals is not None and finals.complete and decision is not None and decision.complete, (out + err)[-3000:]
    for measured in (finals.measured, decision.measured):
        keys = [(m.round, m.of) for m in measured]
        assert len(keys) == len(set(keys)), (keys, (out + err)[-3000:])  # nothing measured twice
    assert [mode for mode, _ in decision.failures] == ["default"] and decision.choice is None, (decision, (out + err)[-3000:])
    from speedopt.search._claim import claim_name

    ours = claim_name(name, "finals", 1).rsplit("-finals-1", 1)[0]
    assert not [n for n in optuna.get_all_study_names(storage) if n.startswith(ours)]  # the dead owner's claim went too
    done = records(study)
    configs = [r.config for r in done]
    assert len(configs) == len(set(configs)) == 2, (configs, (out + err)[-3000:])  # each config once: the killed run's trial not redone
    report = faults.run("report", "--storage", url, "--study", name, timeout=600, env=_env(faults))
    assert report.returncode == 0, report.stderr[-2000:]
    written = "".join(p.read_text(errors="replace") for p in (faults.work / "reports").rglob("*") if p.suffix in (".md", ".csv"))
    assert SECRET not in out + err + report.stdout + report.stderr + written
    with sqlalchemy.create_engine(PG).connect() as db:
        tables = sqlalchemy.inspect(db).get_table_names()
        rows = [str(row) for t in tables for row in db.execute(sqlalchemy.text(f'SELECT * FROM "{t}"'))]
    assert rows and not [r for r in rows if SECRET in r]
    assert seen and not [c for c in seen if SECRET in c], [c for c in seen if SECRET in c][:3]
