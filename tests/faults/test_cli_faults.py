"""Faults of the command line itself (issue 44, items 6, 8, 12, 13 and its loose ends): absurd numbers, SIGTERM,
unknown modes, names from storage that would drive a terminal, and OS errors that lost their path."""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from optuna.trial import TrialState

from speedopt.cli import build_parser
from tests.conftest import run_cli
from tests.faults.conftest import Faults, no_traceback, one_line_error
from tests.faults.test_storage_faults import TINY, _env, _study, _wait_running

# -- item 6: every numeric option of every command has sane bounds -------------------------------------------

#: Values no option may take: far too large, negative, not a number, infinite, beyond a float.
ABSURD = ("1" + "0" * 12, "1" + "0" * 40, "-1000000000", "nan", "inf", "-inf", "1e309", "nan%", "1e400%")


def _numeric_options() -> list[tuple[str, str, argparse.Action]]:
    """(command, flag, action) of every option, of every command the CLI builds, whose type reads a number: one
    that takes a plain number (1, 2, 0.5, ...) and refuses a word. Walked from the parsers, so a new option is checked without a new test."""
    found = []
    root = build_parser()
    commands = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    for command, parser in commands.choices.items():
        for action in parser._actions:
            if not action.option_strings or not callable(action.type):
                continue
            parse = action.type
            reads_number = False
            for text in ("1", "2", "8", "100", "0.5", "0.05"):
                try:
                    value = parse(text)
                except (argparse.ArgumentTypeError, ValueError, TypeError):
                    continue
                # a number, or a number kept as written (--max-map-loss: 0.01 or 2%), not a mode that 1 names
                reads_number = reads_number or (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
                    value == text and _is_number(action.default))
            try:
                parse("word")
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                refuses_word = True
            else:
                refuses_word = False
            if reads_number and refuses_word:
                found.append((command, action.option_strings[-1], action))
    return found


def _is_number(text: object) -> bool:
    try:
        float(str(text))
    except ValueError:
        return False
    return True


NUMERIC = _numeric_options()


def test_the_walk_finds_the_numeric_options_of_every_command() -> None:
    flags = {(command, flag) for command, flag, _ in NUMERIC}
    assert len(flags) >= 50, sorted(flags)  # the walk itself works: 50+ options today
    for expected in [("search", "--probe-seeds"), ("search", "--probe-epochs"), ("search", "--probe-share"),
                     ("search", "--risk"), ("search", "--confirm-seeds"), ("search", "--epochs"), ("search", "--max-map-loss"), ("trial", "--timeout"), ("verify", "--fraction"),
                     ("dashboard", "--port"), ("prepare", "--jobs"), ("demo-data", "--train"), ("doctor", "--read-seconds")]:
        assert expected in flags, expected


@pytest.mark.parametrize(("command", "flag"), sorted({(c, f) for c, f, _ in NUMERIC}))
def test_an_absurd_number_is_refused_at_parse_time_in_one_line(command: str, flag: str) -> None:
    # Issue 44 item 6: --probe-seeds 10**9 was accepted, and the plan's tuple(range(seeds)) grew to 22 GB before the
    # kernel killed the search; --probe-epochs 10**12 was accepted too. Each value is refused by the option's own
    # type, before anything else runs: the line names the option (not a missing --data, which is what the parser
    # would say of an option it let through).
    for value in ABSURD:
        done = run_cli(command, f"{flag}={value}")
        line = one_line_error(done, f"argument {flag}:", "must be")
        assert len(line) < 300, line


def test_the_bounds_let_the_usual_values_through() -> None:
    parser = build_parser()
    args = parser.parse_args(["search", "--data", "d.yaml", "--probe-seeds", "8", "--probe-epochs", "300", "--seed", "4294967295",
                              "--min-gain", "5%", "--probe-share", "1", "--stop-at-ceiling", "0", "--timeout", "86400",
                              "--max-map-loss", "2%", "--ram-limit", "0.5"])
    assert (args.probe_seeds, args.probe_epochs, args.seed, args.min_gain, args.probe_share) == (8, 300, 2**32 - 1, 0.05, 1.0)
    assert (args.stop_at_ceiling, args.timeout, args.max_map_loss, args.ram_limit) == (0.0, 86400.0, "2%", 0.5)
    assert parser.parse_args(["dashboard", "--port", "65535"]).port == 65535
    risky = parser.parse_args(["search", "--data", "d.yaml", "--risk", "5%", "--confirm-seeds", "4"])
    assert (risky.risk, risky.confirm_seeds) == (0.05, 4)
    for bad in (["--risk", "1"], ["--risk", "0"], ["--confirm-seeds", "1"]):  # a risk of 100% or 0% promises nothing
        line = one_line_error(run_cli("search", "--data", "d.yaml", *bad), f"argument {bad[0]}:", "must be")
        assert len(line) < 300, line


def test_the_python_api_refuses_unbounded_probe_seeds_too(demo_yaml) -> None:
    from speedopt import data
    from speedopt.errors import UsageError
    from speedopt.quality import make_policy

    ds = data.load(demo_yaml)
    for seeds in (10**9, 65):
        with pytest.raises(UsageError, match="--probe-seeds must be .* at most 64"):
            make_policy("probe", "0.01", 10, 0.25, None, ds, seeds=seeds)
        with pytest.raises(UsageError, match="--confirm-seeds must be .* at most 64"):
            make_policy("probe", "0.01", 10, 0.25, None, ds, confirm_seeds=seeds)
    for risk in (0.0, 1.0, float("nan")):
        with pytest.raises(UsageError, match="--risk must be a chance in"):
            make_policy("probe", "0.01", 10, 0.25, None, ds, risk=risk)
    with pytest.raises(UsageError, match="--probe-epochs must be an integer in"):
        make_policy("probe", "0.01", 10**12, 0.25, None, ds)
    for loss in ("inf", "nan", "1e308", "101%"):
        with pytest.raises(UsageError, match="--max-map-loss must be a loss in"):
            make_policy("off", loss, 10, 0.25, None, ds)
    assert math.isclose(make_policy("probe", "0.01", 10, 0.25, None, ds, seeds=64).seeds, 64)


# -- item 12: an unknown compile mode is refused, naming the installed ones ---------------------------------


def _modes() -> tuple[str, ...]:
    from speedopt import engines

    return engines.get("ultralytics").accepted("cpu")["compile"][0]


@pytest.mark.parametrize("command", ["trial", "ceilings"])
def test_an_unknown_compile_mode_is_refused_at_parse_time(command: str, demo_yaml) -> None:
    # Issue 44 item 12: `trial --compile bogus` ran, and ended infeasible blaming a missing C++ compiler.
    done = run_cli(command, "--data", str(demo_yaml), "--device", "cpu", "--compile", "bogus")
    line = one_line_error(done, "argument --compile", "unknown compile mode 'bogus'", *_modes())
    assert "C++" not in line


def test_a_fixed_unknown_compile_mode_is_refused_not_dropped(demo_yaml, tmp_path) -> None:
    # Issue 44 item 12: `search --fix compile=bogus` dropped the value with a note and searched on.
    storage = tmp_path / "s.db"
    done = run_cli("search", "--data", str(demo_yaml), "--device", "cpu", "--fix", "compile=bogus",
                   "--storage", f"sqlite:///{storage}", cwd=tmp_path)
    one_line_error(done, "argument --fix", "unknown compile mode 'bogus'", *_modes())
    assert not storage.exists()


def test_the_search_plan_refuses_a_fixed_mode_the_trainer_does_not_take(demo_yaml) -> None:
    # The Python API has no argparse: the plan refuses a pinned value outside the engine's accepted list, as it
    # refuses one listed in --space, instead of dropping it with a note.
    from speedopt.errors import UsageError
    from speedopt.search import SearchConfig, plan

    config = SearchConfig(data=str(demo_yaml), device="cpu", quality="off", fix=("compile=bogus",))
    with pytest.raises(UsageError, match=r"--fix compile=bogus, which the ultralytics trainer here does not take") as refused:
        plan(config)
    assert all(mode in str(refused.value) for mode in _modes())
    fine = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", fix=("compile=default",)))
    assert fine.protocol.space.domains["compile"].values() == ("default",)


# -- item 8: SIGTERM ends every long command as Ctrl-C does -----------------------------------------------------


def _speedopt_processes(tmp: object) -> list[psutil.Process]:
    """The processes still running under the case's private temp folder (a trial's child, a warm worker)."""
    found = []
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            env = p.info["environ"] or {}
        except psutil.Error:
            continue
        if env.get("TMPDIR") == str(tmp) and p.pid != os.getpid():
            found.append(p)
    return found


@pytest.mark.slow
def test_sigterm_mid_trial_ends_a_search_as_ctrl_c_does(faults: Faults) -> None:
    # Issue 44 item 8: SIGTERM (`kill PID`, a scheduler's stop) killed a search silently (rc -15), its temp folder
    # left until the next start, while the docs promise one line and exit 130 for Ctrl-C or SIGTERM.
    data = faults.dataset()
    url = f"sqlite:///{faults.work}/s.db"
    args = ["search", "--data", str(data), "--storage", url, "--study", "term", "--trials", "2", "--repeats", "0", *TINY,
            "--steps", "40", "--max-steps", "40"]  # long enough to still be measuring when the signal comes
    env = {**os.environ, "TMPDIR": str(faults.tmp), "PYTHONUNBUFFERED": "1", **_env(faults)}
    proc = subprocess.Popen([sys.executable, "-m", "speedopt", *args], cwd=faults.work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = _wait_running(url, "term", proc)
    assert running.number == 0
    proc.send_signal(signal.SIGTERM)  # the search process alone, as `kill PID` does: not its process group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, err[-3000:]
    assert err.strip().splitlines()[-1] == "speedopt search: interrupted; run the same command to resume"
    assert err.count("interrupted") == 1
    deadline = time.monotonic() + 60
    while _speedopt_processes(faults.tmp) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _speedopt_processes(faults.tmp), "the trial's processes outlived the search"
    assert sorted(p.name for p in faults.tmp.iterdir()) == []  # cleaned at once, not at the next start
    assert [(t.number, t.state) for t in _study(url, "term").trials][:1] == [(0, TrialState.FAIL)]

    again = faults.run(*args, env=_env(faults), timeout=600)  # resumable: the same command finishes the study
    no_traceback(again)
    assert again.returncode == 0, again.stderr[-3000:]
    study = _study(url, "term")
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 2
    assert "trial 0 retried as trial" in again.stdout
    faults.unchanged()


# -- item 13: a name from storage is printed escaped -------------------------------------------------------------

HOSTILE = "shared\x1b]0;owned\x07\x1b[31m-red"  # sets the terminal's title, then paints it red


def test_studies_prints_a_stored_name_and_data_path_escaped(demo_yaml, tmp_path) -> None:
    # Issue 44 item 13: an imported study's name reached the terminal raw: `speedopt studies` printed its escape
    # sequences (a shared export could drive the user's terminal). A name with rich markup stays text too.
    import dataclasses

    import optuna

    from speedopt.search import SearchConfig, plan
    from speedopt.study import schema

    url = f"sqlite:///{tmp_path}/s.db"
    proto = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", storage=url)).protocol
    for name, data in ((HOSTILE, "/data/\x1b[2J/data.yaml"), ("[bold]plain[/bold]", str(demo_yaml))):
        study = optuna.create_study(study_name=name, storage=url, direction="maximize")
        schema.write_protocol(study, dataclasses.replace(proto, data=data))
    done = run_cli("studies", "--storage", url, cwd=tmp_path, env={"COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout, repr(done.stdout)
    assert repr(HOSTILE) in done.stdout and "\\x1b[2J" in done.stdout, done.stdout
    assert "[bold]plain[/bold]" in done.stdout  # shown as it is named, not read as markup


# -- also: an OS error's line names its path, or ends cleanly without one ------------------------------------


def test_a_full_disk_on_stdout_is_one_clean_line(tmp_path) -> None:
    # Issue 44: the ENOSPC line read "No space left on device:; free some disk space ..." (a write to a stream names
    # no path). /dev/full answers every write with ENOSPC: the command's stdout is that device here.
    import contextlib
    import io

    from speedopt.cli import main

    err = io.StringIO()
    full = open("/dev/full", "w", buffering=1)  # line-buffered: the printed path is written, and refused, at once
    try:
        with contextlib.redirect_stdout(full), contextlib.redirect_stderr(err):
            code = main(["demo-data", str(tmp_path / "d"), "--train", "1", "--val", "1", "--size", "32x32"])
    finally:
        with contextlib.suppress(OSError):
            full.close()
    assert code == 2
    assert err.getvalue() == "speedopt demo-data: error: No space left on device; free some disk space and run the same command again\n"


@pytest.mark.slow
def test_a_file_too_large_is_one_clean_line_with_its_fix(tmp_path) -> None:
    # Issue 44: the EFBIG line read "File too large:" and stopped. Here stdout is a file already at the process's
    # file size limit (RLIMIT_FSIZE, SIGXFSZ ignored as a shell's `ulimit -f` user would see it): the print fails.
    import resource

    limit = 1 << 20
    out = tmp_path / "out.txt"
    out.write_bytes(b"x" * limit)

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with open(out, "ab") as stdout:
        done = subprocess.run([sys.executable, "-m", "speedopt", "demo-data", str(tmp_path / "d"), "--train", "1", "--val", "1",
                               "--size", "32x32"], stdout=stdout, stderr=subprocess.PIPE, text=True, preexec_fn=limited,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["speedopt demo-data: error: File too large; a file grew past the file size limit "
                                        "(ulimit -f, or the filesystem's); raise it or write elsewhere"], done.stderr


def test_a_test_run_leaves_no_folders_in_the_temp_folder(tmp_path) -> None:
    # Issue 44: each test run left empty speedopt-test-state-* (and speedopt-test-lock-*) folders in the temp folder.
    # One short run of the suite's own conftest, with a private temp folder and none of this run's variables.
    from speedopt.isolation import LOCK_ENV, STATE_ENV

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (LOCK_ENV, STATE_ENV) and not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "tests/test_knobs.py", "-k", "imgsz_rounds_up"], capture_output=True, text=True, timeout=300,
                          env={**env, "TMPDIR": str(tmp)}, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert [p.name for p in tmp.iterdir() if p.name.startswith("speedopt-test-")] == []
