"""The real optuna-dashboard over HTTP on 127.0.0.1, serving a study made by a real search."""

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt.study import schema
from tests.conftest import EVERY_CONFIG, free_port


def _serve(work, url, *extra):
    port = free_port()
    log = open(work / f"dashboard-{port}.log", "w")  # a file, not a pipe: request logs never block the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "speedopt", "dashboard", "--storage", url, "--port", str(port), *extra],
        cwd=work, stdout=log, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/meta", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"dashboard did not start: {open(log.name).read()[-2000:]}")
            time.sleep(0.3)
    return proc, base


def _chromium(chromium, tmp_path):
    """Headless Debian chromium, offline, a private profile, 15 s of virtual time for the single-page app."""
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900", "--virtual-time-budget=15000"]


@pytest.fixture(scope="module")
def dashboard(small_study):
    work, url, name = small_study
    proc, base = _serve(work, url)
    yield base, name
    proc.terminate()
    proc.wait(timeout=10)


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.mark.slow
def test_api_has_the_study_its_trials_objective_and_note(dashboard):
    base, name = dashboard
    summaries = _get(f"{base}/api/studies")["study_summaries"]
    (summary,) = [s for s in summaries if s["study_name"] == name]
    detail = _get(f"{base}/api/studies/{summary['study_id']}")
    assert detail["objective_names"] == ["images/s"]
    # 3 complete (the search's --trials 3); a proposal that repeated a measured config is a pruned trial beside them
    assert sum(str(t["state"]).lower() == "complete" for t in detail["trials"]) == 3
    attrs = {a["key"]: a["value"] for a in detail["trials"][0]["user_attrs"]}  # few, named: the key figures readable
    assert set(attrs) == {"status", "images_per_s", "data_wait_fraction", "config", "feasible", "map_loss",
                          "measurement", "accuracy", "role", "phase", "worker"}
    shown = re.search(r'"peak_ram_mb": ([\d.]+)', attrs["measurement"])  # within the 1,024 characters the dashboard shows
    assert shown and float(shown[1]) > 0 and '"probes_run": ' in attrs["accuracy"]
    note = detail["note"]["body"]
    assert note.startswith(f"# speedopt report: {name}") and "## 2. Baseline vs recommended" in note
    links = re.findall(r"!\[[^\]]*\]\((/artifacts/\d+/[0-9a-f-]+)\)", note)  # the report's figures, as artifacts
    assert len(links) >= 2 and "_(figure:" not in note, note
    for link in links:
        with urllib.request.urlopen(f"{base}{link}", timeout=30) as answer:
            assert answer.status == 200 and answer.read(8) == b"\x89PNG\r\n\x1a\n"
    first = detail["trials"][0]  # each trial's note: its one-screen summary, with the unit
    assert first["note"]["body"].startswith("## Trial 0 (the baseline: your settings)")
    assert f"**{first['values'][0]:.1f} images/s**" in first["note"]["body"]
    # the baseline ran yolov5s at 128 px where the search fixes yolov5n at 96: it says so, and the report's
    # importance leaves it out
    assert re.search(r"not a point of the searched space: it ran (model=yolov5s|imgsz=128), which the search fixes at", first["note"]["body"])
    # the finals (1 finalist, 2 rounds) rewrote the notes of the configs they measured again
    assert re.search(r"- finals: [\d.]+ images/s median of 2 rounds \(min-max [\d.]+-[\d.]+\), measured beside the finalists", first["note"]["body"])
    assert any(re.search(r"- finals: .*x\*\* the baseline beside it \(interval [\d.]+-[\d.]+x\)", t["note"]["body"]) for t in detail["trials"][1:])
    assert re.search(r"Left out of the importance: trial 0 \(it ran (model=yolov5s|imgsz=128)", note)
    # params as they ran, in one space: the baseline's other model and image size are values of model and imgsz
    measured = [t for t in detail["trials"] if str(t["state"]).lower() == "complete"]  # not a repeated proposal, pruned
    params = [{p["name"]: p["param_external_value"] for p in t["params"]} for t in measured]
    assert (params[0]["model"], params[0]["imgsz"]) == ("yolov5s", "128")
    assert all((p["model"], p["imgsz"]) == ("yolov5n", "96") for p in params[1:]) and all("cache" in p for p in params)
    importances = _get(f"{base}/api/studies/{summary['study_id']}/param_importances")["param_importances"][0]
    assert {i["name"] for i in importances} >= {"model", "imgsz"}, importances


def test_binds_to_loopback_by_default():
    from speedopt.cli import build_parser

    args = build_parser().parse_args(["dashboard"])
    assert args.host == "127.0.0.1"


@pytest.mark.slow
def test_study_page_renders_in_headless_chromium(dashboard, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("Debian's chromium is not installed here (.ci/run installs it where it can)")
    base, name = dashboard
    flags = _chromium(chromium, tmp_path)
    summaries = _get(f"{base}/api/studies")["study_summaries"]
    study_id = next(s["study_id"] for s in summaries if s["study_name"] == name)
    page = f"{base}/dashboard/studies/{study_id}"
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert name in dom.stdout  # the single-page app fetched the study and rendered it
    shot = tmp_path / "study.png"
    subprocess.run([*flags, f"--screenshot={shot}", page], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    note = subprocess.run([*flags, "--dump-dom", f"{page}/note"], capture_output=True, text=True, timeout=120)
    assert note.returncode == 0 and "speedopt report: " in note.stdout  # the study's note: the report, with its figures
    assert re.search(r'<img alt="optimisation history"[^>]+src="/artifacts/\d+/[0-9a-f-]+"', note.stdout), "the study note shows no figure"
    trial = f"{base}/dashboard/studies/{study_id}/trials?numbers=0"  # the trial list, on trial 0: its note
    dom = subprocess.run([*flags, "--dump-dom", trial], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "Trial 0 (the baseline: your settings)" in dom.stdout and "images/s" in dom.stdout
    shot = tmp_path / "trial.png"
    subprocess.run([*flags, "--window-size=1280,1600", f"--screenshot={shot}", trial], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.mark.slow  # serves the real dashboard
def test_best_trial_is_the_fastest_feasible_and_every_verdict_is_drawn_as_its_constraints_say(tmp_path):
    """Issue 56: optuna-dashboard reads a trial's constraints from the list ``constraints`` only. A trial stored now
    carries it (lost: written as the search writes it); trials of an older study (the named constraints only, and a
    never-judged accuracy change stored feasible then) are served with it, infeasible unless accuracy was kept."""
    url = f"sqlite:///{tmp_path}/best.db"
    study = optuna.create_study(study_name="rejected-fastest", storage=url, direction="maximize")
    lost = study.ask()  # as the search stores a verdict now
    for key, value in {"status": "ok", "images_per_s": 100.0, "feasible": False, "config": {"batch": 8}}.items():
        lost.set_user_attr(key, value)
    schema.write_constraints(lost, 0.0, 0.02)
    study.tell(lost, 100.0)
    older = (  # as a study stored them before issue 56: named constraints only
        (80.0, "unknown", "unknown", 1.0), (60.0, "unknown", "unprobed", 0.0), (50.0, True, "feasible", -0.01), (20.0, True, "feasible", -0.02)
    )
    for ips, feasible, verdict, map_loss in older:
        study.add_trial(create_trial(
            state=TrialState.COMPLETE, value=ips,
            user_attrs={"status": "ok", "images_per_s": ips, "feasible": feasible, "config": {"batch": 8}, "accuracy": {"verdict": verdict}},
            system_attrs={"constraints:measured": 0.0, "constraints:map_loss": map_loss},  # as Trial.set_constraint stores them
        ))
    assert study.trials[0].system_attrs["constraints"] == [0.0, 0.02]
    proc, base = _serve(tmp_path, url)
    try:
        study_id = _get(f"{base}/api/studies")["study_summaries"][0]["study_id"]
        detail = _get(f"{base}/api/studies/{study_id}")
        assert [t["number"] for t in detail["best_trials"]] == [3]  # the fastest kept
        served = {t["number"]: t["constraints"] for t in detail["trials"]}
        assert served == {0: [0.0, 0.02], 1: [0.0, 1.0], 2: [0.0, 1.0], 3: [0.0, -0.01], 4: [0.0, -0.02]}, served
        feasible = [n for n, c in served.items() if all(v <= 0 for v in c)]
        assert feasible == [3, 4]  # lost, unknown and never judged are drawn infeasible
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium:  # the page itself: the history plot's legend has its infeasible trials (only when there are any)
            dom = subprocess.run([*_chromium(chromium, tmp_path), "--dump-dom", f"{base}/dashboard/studies/{study_id}"],
                                 capture_output=True, text=True, timeout=120)
            assert dom.returncode == 0 and 'class="legendtext"' in dom.stdout, dom.stderr[-2000:]
            assert 'data-unformatted="Infeasible"' in dom.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow  # serves the real dashboard
def test_the_probe_cache_is_not_listed_and_study_prints_its_page(tmp_path):
    from speedopt.quality import CACHE_STUDY

    url = f"sqlite:///{tmp_path}/list.db"
    optuna.create_study(study_name="mine", storage=url, direction="maximize").set_user_attr(schema.SCHEMA, schema.SCHEMA_VERSION)
    optuna.create_study(study_name=CACHE_STUDY, storage=url)  # as the quality probes make it
    mine = optuna.storages.RDBStorage(url).get_study_id_from_name("mine")
    proc, base = _serve(tmp_path, url, "--study", "mine")
    try:
        assert [s["study_name"] for s in _get(f"{base}/api/studies")["study_summaries"]] == ["mine"]
        banner = next(line for p in tmp_path.glob("dashboard-*.log") for line in p.read_text().splitlines() if "speedopt dashboard:" in line)
        assert banner.endswith(f"{base}/dashboard/studies/{mine} (Ctrl+C stops)"), banner
        with urllib.request.urlopen(f"{base}/dashboard/studies/{mine}", timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("name", ["nope", "speedopt-probe-cache"])
@pytest.mark.slow  # serves the real dashboard
def test_study_that_is_not_the_users_is_one_line_and_exit_2(tmp_path, name):
    from speedopt.quality import CACHE_STUDY

    url = f"sqlite:///{tmp_path}/one.db"
    optuna.create_study(study_name="mine", storage=url, direction="maximize")
    optuna.create_study(study_name=CACHE_STUDY, storage=url)
    done = subprocess.run(
        [sys.executable, "-m", "speedopt", "dashboard", "--storage", url, "--port", str(free_port()), "--study", name],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"no study {name!r}" in done.stderr and "speedopt studies" in done.stderr


@pytest.mark.slow
def test_a_live_review_shows_the_running_trials_phase_and_new_trials(demo_yaml, tmp_path):
    """While a search runs, the dashboard's API (what its pages poll) has the running trial and its phase. The
    dashboard is up before the search starts (on the empty storage): one that started late on a loaded machine saw
    only finished trials (CI, 2026-12-06). Each trial measures 40 steps: with 6, a trial's phases lasted about as
    long as the dashboard's 2-s trial cache and a loaded CI machine saw no running trial at all (CI, 2026-12-06)."""
    url = f"sqlite:///{tmp_path}/live.db"
    optuna.storages.RDBStorage(url)  # the storage's tables, no study: the search makes its own
    proc, base = _serve(tmp_path, url)
    search = subprocess.Popen(
        [sys.executable, "-m", "speedopt", "search", "--data", str(demo_yaml), "--trials", "2", "--storage", url,
         "--study", "live", "--quality", "off", "--baseline", "model=yolov5n imgsz=96 batch=4 workers=0", "--steps", "40",
         "--warmup", "1", "--device", "cpu", "--repeats", "0", "--no-report", *EVERY_CONFIG],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        try:
            phases: set[str] = set()
            finished = 0
            while search.poll() is None and time.monotonic() < deadline + 300:
                summaries = _get(f"{base}/api/studies")["study_summaries"]
                if summaries:
                    trials = _get(f"{base}/api/studies/{summaries[0]['study_id']}")["trials"]
                    for t in trials:
                        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
                        if t["state"] == "Running" and "phase" in attrs:
                            phases.add(attrs["phase"])
                    finished = max(finished, sum(t["state"] == "Complete" for t in trials))
                time.sleep(0.5)
            assert search.wait(timeout=600) == 0
            study_id = _get(f"{base}/api/studies")["study_summaries"][0]["study_id"]
            # The dashboard serves a study's trials from its own cache for up to 2 s (optuna-dashboard's
            # get_trials, under 100 trials): the last poll may still show a trial that ended since as running.
            settled = time.monotonic() + 30
            trials = _get(f"{base}/api/studies/{study_id}")["trials"]
            while any(t["state"] == "Running" for t in trials) and time.monotonic() < settled:
                time.sleep(1)
                trials = _get(f"{base}/api/studies/{study_id}")["trials"]
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    finally:
        search.kill()
    assert phases & {"setup", "warmup", "measure"}, phases  # the running trial's phase, as the search saw it
    assert finished >= 1 and len(trials) == 2  # trials appeared as they finished, without a restart
    ended = [(t["number"], t["state"], {a["key"]: a["value"] for a in t["user_attrs"]}.get("phase")) for t in trials]
    assert all(phase is not None and phase.strip('"') == "done" for _, _, phase in ended), ended
