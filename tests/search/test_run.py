"""Real searches of the Ultralytics trainer on the demo data, on CPU, with real SQLite storages."""

import importlib.metadata
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from speedopt.quality import CACHE_STUDY
from speedopt.study import flat_attrs, schema
from tests.conftest import EVERY_CONFIG, run_cli

# Search mechanics only: accuracy probes are tested in test_quality.py.
FAST = ["--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu", "--seed", "1", "--no-report", "--quality", "off", "--repeats", "0",
        *EVERY_CONFIG]  # every trial runs to its end: these tests count them
BASELINE = "model=yolov5n imgsz=128 batch=4 workers=0"


@pytest.fixture
def space_file(tmp_path):
    path = tmp_path / "space.yaml"
    # Quality off: accuracy knobs stay at the baseline's (listing several would be refused); on CPU the
    # Ultralytics engine runs 0 workers. The space: three cache modes, three configs.
    path.write_text("model: [yolov5n]\nfreeze: [0]\ncache: [none, ram, disk]\n")

    return path


def _study(url):
    (summary,) = [s for s in optuna.get_all_study_summaries(url) if s.study_name != CACHE_STUDY]
    return optuna.load_study(study_name=summary.study_name, storage=url)


def _running_has_params(url: str) -> bool:
    """One trial runs, with its params, and its job has reported a phase: its objective runs (a trial only just created
    has params but not yet its worker record, and a job process seen then is the previous trial's, still exiting: a
    kill there leaves a trial no process of this host claims, which the heartbeat, not the resume, recovers; CI,
    2026-12-06)."""
    try:
        running = _study(url).get_trials(states=(TrialState.RUNNING,))
    except Exception:  # the study not created yet, or its database busy: look again
        return False
    return len(running) == 1 and bool(running[0].params) and "phase" in running[0].user_attrs


def _job_kind(process):
    """The kind of job a speedopt job process runs ("trial", "labels", ...), None for any other process. A job
    runs in its private folder (its working directory holds the request), started cold (``-m
    speedopt.measure._child``) or forked from the search's warm worker (``-m speedopt.measure._warm``)."""
    try:
        if not _speedopt_process(process.cmdline()):
            return None
        return json.loads((Path(process.cwd()) / "request.json").read_text()).get("kind")
    except (psutil.Error, OSError, ValueError):
        return None


def _speedopt_process(argv):
    return "speedopt.measure._child" in argv or "speedopt.measure._warm" in argv


def _trial_processes(root):
    """Every job process, and warm worker, of a search run under ``root`` still running (a job runs in its
    private folder in the search's TMPDIR, the warm worker in the search's working folder): another test's
    jobs, under pytest-xdist, are not this test's."""

    def under_root(p):
        try:
            return Path(p.cwd()).is_relative_to(root)
        except psutil.Error:
            return False

    return [p for p in psutil.process_iter(["cmdline"]) if _speedopt_process(p.info["cmdline"] or []) and under_root(p)]


@pytest.mark.slow
def test_search_completes_with_baseline_first_and_resumes(demo_yaml, tmp_path):
    # The default space with --quality off (FAST): on a CPU the trainer runs 0 workers and the accuracy knobs
    # stay at the baseline's, so the three cache modes are the space.
    args = ["search", "--data", str(demo_yaml), "--trials", "3", "--baseline", BASELINE, *FAST]
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    url = f"sqlite:///{tmp_path}/studies/speedopt.db"  # the default storage, relative to the working dir
    study = _study(url)
    assert study.study_name.startswith("shapes-cpu-")
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 3
    first = trials[0]
    assert first.number == 0 and first.user_attrs["role"] == "baseline"
    assert first.user_attrs["config"]["imgsz"] == 128 and first.user_attrs["config"]["batch"] == 4
    version = importlib.metadata.version("ultralytics")
    for t in trials:  # every config of this space runs on this machine: each trial must measure ok
        a = flat_attrs(t.user_attrs)
        assert a["status"] == "ok", a["message"]
        assert a["images_per_s"] > 0 and t.value == pytest.approx(a["images_per_s"])
        assert 0 <= a["data_wait_fraction"] <= 1 and a["setup_s"] > 0 and a["peak_ram_mb"] > 0
        assert a["engine"] == "ultralytics" and a["engine_version"] == version
        assert {k: a["config"][k] for k in t.params} == t.params  # what ran is what the sampler chose
        assert a["measure_started_at"] < a["measure_ended_at"]
        assert a["feasible"] is True and t.constraints == {"0": 0.0, "1": 0.0}  # quality off: every measured trial is feasible
        assert set(t.params) <= {"workers", "cache"} and a["probes_run"] == 0  # quality off: system knobs only, no probe
        assert (a["config"]["model"], a["config"]["imgsz"], a["config"]["batch"], a["config"]["freeze"]) == ("yolov5n", 128, 4, 0)
    attrs = study.user_attrs
    assert attrs["dataset"]["train_images"] == 48 and attrs["dataset"]["train_bytes"] > 0
    assert attrs["machine"]["key"]["cpu_cores"] == len(os.sched_getaffinity(0))
    assert attrs["machine"]["ram_total_gb"] > 0 and "disk_free_gb" in attrs["machine"]
    assert attrs["baseline"]["model"] == "yolov5n" and attrs["space"]["cache"] == {"choices": ["none", "ram", "disk"]}
    assert attrs["engine"] == "ultralytics" and attrs["speedopt_version"]
    assert study.metric_names == ["images/s"]
    assert schema.read_ceilings(study) == {} and schema.read_ceilings_for(study) == {}  # --no-report: no ends' ceilings
    assert CACHE_STUDY not in [s.study_name for s in optuna.get_all_study_summaries(url)]  # no probe ever ran
    assert "quality off" in done.stdout
    assert "yolo detect train" in done.stdout
    assert "no speedup claimed" in done.stdout and "x (interval" not in done.stdout  # --repeats 0: no finals, no claim
    best = max((t for t in trials if t.user_attrs["status"] == "ok"), key=lambda t: t.value)
    assert f"recommended: trial {best.number}:" in done.stdout


    again = run_cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "3 of 3 trials complete" in again.stderr
    assert len(_study(url).trials) == len(study.trials)  # nothing re-run

    changed = run_cli(*[a if a != BASELINE else "model=yolov5n imgsz=96" for a in args], cwd=tmp_path)
    assert changed.returncode == 2 and "--study NEW_NAME" in changed.stderr
    assert len(_study(url).trials) == len(study.trials)  # the study is untouched


@pytest.mark.slow
def test_ram_cache_that_does_not_fit_is_infeasible_and_the_study_goes_on(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    # 48 images of 160x120 at imgsz 160: ~5.5 MB with the trainer's 100 % margin; allow 1 MB.
    # The space holds one config besides the baseline (every knob pinned, workers 0 on CPU): cache=ram.
    done = run_cli(
        "search", "--data", str(demo_yaml), "--trials", "2", "--storage", url, "--baseline", BASELINE,
        "--fix", "cache=ram", "--fix", "imgsz=160", "--fix", "model=yolov5n", "--fix", "freeze=0",
        "--fix", "batch=4", "--ram-limit", "0.001", *FAST, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    trials = _study(url).get_trials(states=(TrialState.COMPLETE,))
    assert [t.user_attrs["status"] for t in trials] == ["ok", "infeasible"]
    assert "recommended: trial 0:" in done.stdout  # the study went on to a recommendation: the baseline

    for t in trials[1:]:
        assert "cache=ram needs about" in flat_attrs(t.user_attrs)["message"] and "--ram-limit" in flat_attrs(t.user_attrs)["message"]
        assert flat_attrs(t.user_attrs)["measure_started_at"] is None  # rejected without running
        assert t.value == 0.0 and t.constraints["0"] == 1.0  # measured


@pytest.mark.slow
def test_sigkill_mid_trial_then_resume(demo_yaml, space_file, tmp_path):
    """SIGKILL of the search in the middle of a trial, then a resume: the trial is failed and retried once with its
    knobs. Its trials measure 20 steps, and the kill follows the look that found one running at once: with 3 steps a
    trial could end between that look and the kill on a loaded machine (2026-12-06, once in 11 runs under load)."""
    url = f"sqlite:///{tmp_path}/s.db"
    longer = [*FAST[:FAST.index("--steps")], "--steps", "20", "--max-steps", "20", *FAST[FAST.index("--warmup"):]]
    argv = [sys.executable, "-m", "speedopt", "search", "--data", str(demo_yaml), "--trials", "3", "--storage", url,
            "--space", str(space_file), "--baseline", BASELINE, *longer]
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}  # the jobs' private folders: under this test's folder
    (tmp_path / "tmp").mkdir()
    search = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    child = None
    while time.monotonic() < deadline:
        kids = [p for p in psutil.Process(search.pid).children(recursive=True) if _job_kind(p) == "trial"]  # not the labels job
        # mid-trial: its job runs and its trial has its params (a kill between two trials, before the next one's
        # params, leaves nothing to retry with the same params)
        child = kids[0] if kids and _running_has_params(url) else None
        if child is not None:
            break
        time.sleep(0.2)
    assert child is not None, "no trial started"
    os.kill(search.pid, signal.SIGKILL)
    search.wait()
    _gone, alive = psutil.wait_procs([child], timeout=10)
    assert not alive, "the trial process outlived its killed parent"

    running = _study(url).get_trials(states=(TrialState.RUNNING,))
    assert len(running) == 1
    done = run_cli(*argv[3:], cwd=tmp_path, env={"TMPDIR": str(tmp_path / "tmp")})
    assert done.returncode == 0, done.stderr
    assert f"trial(s) {running[0].number} ended early (interrupted or killed): retried" in done.stderr
    study = _study(url)
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 3
    (failed,) = study.get_trials(states=(TrialState.FAIL,))
    assert failed.number == running[0].number
    retried = [t for t in study.trials if t.system_attrs.get("failed_trial") == failed.number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE
    assert retried[0].params == failed.params
    _gone, left = psutil.wait_procs(_trial_processes(tmp_path), timeout=30)  # the warm worker sees its search exit
    assert left == []


@pytest.mark.slow
def test_two_searches_on_one_host_never_measure_at_once(demo_yaml, space_file, tmp_path):
    procs = []
    for name in ("a", "b"):
        argv = [sys.executable, "-m", "speedopt", "search", "--data", str(demo_yaml), "--trials", "2",
                "--storage", f"sqlite:///{tmp_path}/{name}.db", "--space", str(space_file), "--baseline", BASELINE, *FAST]
        procs.append(subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert any("waiting for the host measurement lock" in err for _, err in outputs)
    spans = sorted(
        (flat_attrs(t.user_attrs)["measure_started_at"], flat_attrs(t.user_attrs)["measure_ended_at"])
        for name in ("a", "b")
        for t in _study(f"sqlite:///{tmp_path}/{name}.db").trials
    )
    assert len(spans) == 4
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, spans


@pytest.mark.slow
def test_finals_store_every_repeat_and_a_reproposed_config_is_not_measured_again(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    # Two configs (cache none, the baseline's, or disk), four trials asked: the sampler must propose measured
    # ones again, and trial 1 is the other config, the one finalist.
    args = ["search", "--data", str(demo_yaml), "--trials", "4", "--storage", url, "--baseline", BASELINE,
            *FAST, "--repeats", "2", "--finalists", "1", "--no-ablation"]
    space = tmp_path / "space.yaml"
    space.write_text("cache: [none, disk]\n")
    done = run_cli(*args, "--space", str(space), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    study = _study(url)
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert sorted(t.user_attrs["config"]["cache"] for t in complete) == ["disk", "none"]  # each config measured once
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert pruned and all(t.user_attrs["duplicate_of"] in (0, 1) for t in pruned)
    assert "search stopped early" in done.stdout and "space is used up" in done.stdout

    finals = study.user_attrs["finals"]
    assert finals["trials"] == [0, 1] and finals["repeats"] == 2
    measured = finals["measured"]
    # Sequential finals: a finalist whose first round misses the bar is dropped and the rounds end (which
    # config measures faster decides that, so either outcome is asserted); else both rounds, interleaved.
    if finals["end"] == 1:
        assert [(m["round"], m["trial"]) for m in measured] == [(0, 0), (0, 1)]
        assert "trial 1 dropped after round 1" in done.stdout and "in 1 of 2 interleaved rounds" in done.stdout
        assert "keep your settings: trial 0:" in done.stdout
    else:
        assert [(m["round"], m["trial"]) for m in measured] == [(0, 0), (0, 1), (1, 0), (1, 1)]  # interleaved
        assert "finals: 1 config(s) and the baseline in 2 interleaved rounds" in done.stdout
        assert "min-max of 2 paired rounds" in done.stdout
        assert "recommended: trial 1:" in done.stdout or "keep your settings: trial 0:" in done.stdout
    assert all(m["status"] == "ok" and m["images_per_s"] > 0 for m in measured)
    started = [m["started_at"] for m in measured]
    assert started == sorted(started)
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 2  # repeats are not new trials

    again = run_cli(*args, "--space", str(space), cwd=tmp_path)  # resuming measures nothing more
    assert again.returncode == 0, again.stderr
    assert len(_study(url).user_attrs["finals"]["measured"]) == len(measured) and "round 1/2" not in again.stderr
    assert "round 2/2" not in again.stderr
