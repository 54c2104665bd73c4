"""Shared fixtures: a tiny demo dataset made by the real generator, and helpers to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from speedopt import data as demo_data
from speedopt.isolation import LOCK_ENV, STATE_ENV

#: The private folders this process made for its session (host lock, trial state), removed when it ends.
_MADE: list[str] = []


def _made(folder: str) -> str:
    """``folder``, remembered for :func:`pytest_sessionfinish` to remove: a run leaves nothing in the temp folder."""
    _MADE.append(folder)
    return folder


def pytest_configure(config: pytest.Config) -> None:
    """Tests (and the CLI processes they start) take a private host lock, never the real one: a
    search running on this host is neither blocked by the tests nor able to block them."""
    import signal
    import tempfile

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # A background job of a non-interactive shell (nohup, `cmd &`, some CI runners) starts with Ctrl-C
        # ignored, and every process it starts inherits that: the Ctrl-C tests would wait for an interrupt
        # that can never arrive. Handled here, the signal is at its default again in each child after exec.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # under pytest-xdist: each worker measures on its own
    if worker or LOCK_ENV not in os.environ:
        os.environ[LOCK_ENV] = str(Path(_made(tempfile.mkdtemp(prefix=f"speedopt-test-lock-{worker or ''}"))) / "measure.lock")
    if worker or STATE_ENV not in os.environ:  # trials' leftover manifests: never in the user's ~/.cache
        os.environ[STATE_ENV] = _made(tempfile.mkdtemp(prefix=f"speedopt-test-state-{worker or ''}"))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker and workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        # Each worker's trainers get their share of the cores, as each gets its own host lock. torch's
        # OpenMP threads spin at their barriers: two tests that each ran one per core here made the classic
        # trainer 9x slower (a trial 10.8 s alone, 97 s beside a two-thread torch loop, 9.3 s with 1 thread).
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        # A Python that writes no bytecode compiles speedopt's modules again in each of the hundreds of
        # processes the suite starts (measured here: 0.35 s each; installed packages have theirs from pip).
        # The suite writes it as Python does by default, in the git-ignored __pycache__ folders.
        sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that read the one shared search run on one pytest-xdist worker (``--dist loadgroup``), so the
    search is made once per run, not once per worker."""
    for item in items:
        if "small_study" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("small_study"))

_CURRENT: pytest.Item | None = None
#: Commands that start trainer jobs: in a slow test they run through the real entry point, except searches.
TRAINS = frozenset({"search", "worker", "trial", "ceilings", "verify", "prepare"})
#: Commands that fork their jobs from a warm worker: in a slow test they run in-process, inside one warm
#: worker that the whole session shares (:func:`shared_warm_worker`), as several searches of one Python API
#: caller do. The trainer is imported once per session, not once per search (about 8 s each here).
SHARED_WARM = frozenset({"search", "worker"})
_SHARED: dict[str, Any] = {}


def shared_warm_worker(engine: str = "ultralytics") -> Any:
    """The session's warm worker for ``engine`` (the package's code), started on first use, closed at the end of
    the session; None where it cannot start (jobs then run cold). A search in another environment, or on a
    checkout (``--yolov5-dir``), starts its own."""
    from speedopt import engines
    from speedopt.engines import EngineSpec
    from speedopt.measure import _warm
    from speedopt.offline import cache_dir

    env = engines.get(engine).environment(cache_dir())
    worker = _SHARED.get(engine)
    if worker is None or not worker.matches(EngineSpec(engines.engine_name(engine)), env):
        if worker is not None:
            worker.close()
        try:
            worker = _warm.start(EngineSpec(engines.engine_name(engine)), env)
        except (OSError, RuntimeError):
            worker = None
        _SHARED[engine] = worker
    return worker


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import shutil

    for worker in _SHARED.values():
        if worker is not None:
            worker.close()
    for folder in _MADE:  # the session's own lock and state folders (each xdist worker removes its own)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _CURRENT
    _CURRENT = item


# Trials in tests are tiny: small images, a few steps. Real trainer, real data, CPU.
#: Search flags for a test that counts trials: every config is measured to its end, whatever measures faster
#: here (no stop at the ceiling, no pruning), so no assertion depends on this machine's noise.
EVERY_CONFIG = ("--no-stop-at-ceiling", "--prune-margin", "0")
TINY = ["--model", "yolov5n", "--imgsz", "128", "--batch", "4", "--steps", "3", "--warmup", "1", "--device", "cpu"]


@pytest.fixture(scope="session")
def demo_yaml(tmp_path_factory) -> Path:
    """A 48-image demo dataset at 160x120, shared by the whole session (read-only by convention)."""
    root = tmp_path_factory.mktemp("demo") / "shapes"
    return demo_data.generate(root, demo_data.DemoSpec(train=48, val=8, width=160, height=120, seed=1))


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    process: bool | None = None,
) -> subprocess.CompletedProcess:
    """Run the `speedopt` command line and capture what it printed (``env``: extra variables).

    In-process by default, through :func:`speedopt.cli.main` (what ``python -m speedopt`` calls), with
    the working folder, the environment, ``TMPDIR`` and the signal handlers set for the call and put back
    after it: refusals and error lines cost milliseconds, not a new Python. ``process=True`` starts the
    real entry point in a subprocess, as a user would: for a test about the process itself (signals,
    exit on a parent's death, what the entry point imports). In a ``slow`` test a command that trains
    (:data:`TRAINS`) runs in a subprocess unless told otherwise: its time is the trainer's, and it proves
    the entry point; a search or a worker runs in-process, its jobs forked from the session's shared warm
    worker (:data:`SHARED_WARM`); one that only reads a study (report, best, export, ...) runs in-process.
    """
    slow = _CURRENT is not None and _CURRENT.get_closest_marker("slow") is not None
    command = args[0] if args else ""
    warm = slow and command in SHARED_WARM  # a fast test starts no warm worker
    if process is None:
        process = slow and command in TRAINS and not warm
    if process:
        return run_process(*args, cwd=cwd, timeout=timeout, env=env)
    if warm and "--yolov5-dir" not in args:
        from speedopt.measure import _warm

        engine = args[args.index("--engine") + 1] if "--engine" in args[:-1] else "ultralytics"
        with _warm.using(shared_warm_worker(engine)):
            return run_in_process(*args, cwd=cwd, env=env)
    return run_in_process(*args, cwd=cwd, env=env)


def run_process(
    *args: str, cwd: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The real `speedopt` entry point in a subprocess, as a user would run it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "speedopt", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_in_process(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """:func:`speedopt.cli.main` in this process, its stdout and stderr captured; an uncaught exception
    prints its traceback to the captured stderr and exits 1, as the interpreter would."""
    import contextlib
    import io
    import signal
    import tempfile
    import traceback

    from speedopt.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_tmp = dict(os.environ), os.getcwd(), tempfile.tempdir
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    os.environ.update(env or {})
    tempfile.tempdir = None  # read TMPDIR again, as a new process would
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: --help, --version, a usage error
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tmp
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["speedopt", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def small_study(demo_yaml, tmp_path_factory):
    """A 3-trial search, its finals and its report (so a dashboard note), in SQLite.

    The baseline is yolov5s at 128 px and every other trial yolov5n at 96 px, with quality off: probes
    this small learn nothing (mAP50-95 0.0000), so with them every other trial's accuracy is unknown and
    nothing but the baseline could be recommended (that path: tests/quality/test_judge.py); quality off
    makes them recommendable, "accuracy not checked". Nothing here depends on which config happens to
    measure faster (``--no-ablation``: whether an ablation runs would; its real test is in
    tests/study/test_ablation.py). Probes with a verdict: tests/quality/test_judge.py.
    """
    from speedopt.measure import _warm

    work = tmp_path_factory.mktemp("small-study")
    url = f"sqlite:///{work}/small.db"
    with _warm.using(shared_warm_worker()):  # in-process, its jobs forked from the session's warm worker
        done = run_in_process(
            "search", "--data", str(demo_yaml), "--trials", "3", "--storage", url, "--study", "small",
            "--baseline", "model=yolov5s imgsz=128 batch=4 workers=0", "--fix", "imgsz=96", "--fix", "model=yolov5n",
            "--fix", "freeze=0", "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu",
            "--no-stop-at-ceiling", "--quality", "off", "--finalists", "1", "--repeats", "2",
            "--no-ablation", cwd=work,
        )
    assert done.returncode == 0, done.stderr
    (work / "search.out").write_text(done.stdout)  # what the search printed, for the tests that compare it
    return work, url, "small"


def checkpoint_file(path: Path) -> Path:
    """A minimal torch checkpoint in the zip format (``{"model": None, "ema": None}``), written without torch:
    what speedopt's inspection (:func:`speedopt.checkpoint.check_checkpoint`) accepts, for tests where only
    the path matters."""
    import pickle
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{path.stem}/data.pkl", pickle.dumps({"model": None, "ema": None}, protocol=2))
        archive.writestr(f"{path.stem}/version", "3\n")
    return path


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _warm_jobs(engine: str):
    """Jobs of ``engine`` in the calling module fork from the session's warm worker, as a search's jobs do: the
    trainer is imported once per session, not once per job (the cold path, a fresh Python per job, is what the
    CLI's ``trial`` tests and ``benchmarks/trial_overhead.py`` run)."""
    from speedopt.measure import _warm

    worker = shared_warm_worker(engine)
    assert worker is not None, "the warm worker did not start"
    with _warm.using(worker):
        yield worker


@pytest.fixture(scope="module")
def warm_ultralytics():
    """A warm worker for the Ultralytics engine's jobs, for one test module (see :func:`_warm_jobs`)."""
    yield from _warm_jobs("ultralytics")


@pytest.fixture(scope="module")
def warm_yolov5():
    """A warm worker for the classic engine's jobs, for one test module (see :func:`_warm_jobs`)."""
    yield from _warm_jobs("yolov5")


@pytest.fixture
def shared_warm():
    """A test's searches through the Python API fork their jobs from the session's warm worker, as the
    CLI's searches in slow tests do (:func:`run_cli`)."""
    from speedopt.measure import _warm

    with _warm.using(shared_warm_worker()):
        yield
