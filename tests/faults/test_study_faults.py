"""Faults in what a study stores and in how runs share it (issue 44, items 9 to 11): a hostile import's NaN
measurements, two runs of one study racing through its finals, and the study's bill.

The studies here are made without a trainer (a protocol and measured trials written as ``speedopt search``
writes them), in real Optuna storages: SQLite, and PostgreSQL where ``SPEEDOPT_TEST_POSTGRES`` names a server.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.faults.conftest import Faults, no_traceback, one_line_error

NAN, INF = float("nan"), float("inf")


def _hostile_study(faults: Faults, url: str, trials: tuple[float, ...] = (12.0, NAN, INF, 15.0), figures: float = NAN) -> optuna.Study:
    """A study as `speedopt search` leaves it, made without a trainer, whose stored numbers are NaN and infinities
    where measurements belong: trial 0 the baseline at 12 images/s, one trial per other entry of ``trials`` (each
    with its step figures ``figures``), and finals whose last round holds an infinity."""
    from speedopt.measure import TrialResult
    from speedopt.quality import Feasibility, Verdict, signature
    from speedopt.search import SearchConfig, plan
    from speedopt.status import Status
    from speedopt.study import Finals, schema
    from speedopt.study.record_types import Repeat

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    protocol = plan(SearchConfig(data=str(faults.dataset()), device="cpu", quality="off", storage=url)).protocol
    study = optuna.create_study(study_name="hostile", storage=url, direction="maximize")
    schema.write_protocol(study, protocol)
    for i, ips in enumerate(trials):
        knobs = protocol.baseline if i == 0 else dataclasses.replace(protocol.baseline, workers=i)
        result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=ips, steps=10,
                             data_wait_fraction=0.2 if i == 0 else figures, step_s_median=figures, setup_s=figures,
                             wall_s=figures, ci_rel=figures, step_s=(0.1, figures, 0.2), images_used=16, train_build_s=figures)
        trial = study.ask()
        if i == 0:
            trial.set_user_attr(schema.ROLE, "baseline")
        for key, value in schema.measurement_attrs(result.to_dict()).items():  # as stored by another tool: unfiltered
            trial.set_user_attr(key, value)
        schema.write_verdict(trial, Verdict(signature(knobs), Feasibility.FEASIBLE, reason="quality off").attrs())
        study.tell(trial, 12.0 + i)
    rounds = (Repeat(0, 0, Status.OK, 10.0), Repeat(0, 3, Status.OK, 15.0), Repeat(1, 0, Status.OK, 10.0), Repeat(1, 3, Status.OK, INF))
    schema.write_finals(study, Finals((0, 3), 2, rounds, 0.0))
    return study


def _strict_json(text: str) -> object:
    """``text`` parsed as JSON proper: NaN and Infinity, which Python writes and JSON does not have, refused."""

    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: {constant} in {text}")

    return json.loads(text, parse_constant=refuse)


# --- item 9: NaN measurements ------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "says"), [
    ("measurement", ["trial 1", "images_per_s", "nan"]),
    ("finals", ["its user attr", "finals", "inf"]),
])
def test_import_refuses_a_study_holding_nan_measurements(faults: Faults, where: str, says: list[str]) -> None:
    # Item 9: an export with NaN measurements imported without a word; its report then ended in a traceback
    # (ValueError: cannot convert float NaN to integer), its `best --format json` printed NaN.
    source = faults.root / "export.db"
    trials = (12.0, NAN, 14.0, 15.0) if where == "measurement" else (12.0, 13.0, 14.0, 15.0)
    study = _hostile_study(faults, f"sqlite:///{source}", trials, figures=0.5)
    if where == "measurement":  # trial 1's images/s is the one number that is not finite
        study.set_user_attr("finals", None)
    target = faults.work / "target.db"
    faults.watch(faults.root)
    one_line_error(faults.run("import", str(source), "--storage", f"sqlite:///{target}"),
                   "refusing to import", "'hostile'", *says, "not a finite number", "nothing was imported")
    assert not target.exists()
    faults.unchanged()


def test_readers_of_a_study_holding_nan_measurements_never_crash_nor_print_nan(faults: Faults) -> None:
    # Item 9: the same numbers in a storage another tool wrote (no import to refuse them): every reader takes a
    # NaN or an infinity for "not measured". The report is written whole, `best --format json` is JSON.
    import speedopt
    from speedopt.study import find_study, records, schema

    url = f"sqlite:///{faults.root / 's.db'}"
    study = _hostile_study(faults, url)
    study.set_user_attr("val_time_" + "0" * 16, {"status": "ok", "val_s": NAN, "val_images": 4, "save_s": NAN})
    done = records(find_study(url, "hostile"))
    assert [r.number for r in done if r.result.ok] == [0, 3]  # NaN and infinite images/s: not measured
    assert all(r.result.step_s == (0.1, 0.2) and r.result.step_s_median is None for r in done[1:])
    assert schema.read_val_time(study, "0" * 16) is None  # a NaN-second pass: not timed (timed again when asked)

    written = speedopt.report("hostile", storage=url, out_dir=str(faults.work / "reports"), measure_validation=False)
    text = Path(written.markdown).read_text()
    assert "## 5. Trials" in text and "| 1 | " in text and "| 2 | " in text  # whole, every trial in it
    assert not any(word in text.lower().split() for word in ("nan", "inf", "nanx", "infx")), text

    best = faults.run("best", "--storage", url, "--format", "json")
    no_traceback(best)
    assert best.returncode == 0, best.stderr
    shown = _strict_json(best.stdout)
    assert isinstance(shown, dict) and shown["trial"] in (0, 3)
    assert shown["images_per_s"] is not None and math.isfinite(shown["images_per_s"])


# --- item 11: the bill -----------------------------------------------------------------------------------


def _bare_study(url: str, name: str = "billed") -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name=name, storage=url, direction="maximize")


def test_a_run_that_measures_nothing_adds_nothing_to_the_bill(tmp_path: Path) -> None:
    # Item 11: each rerun of a finished study added its warm worker's start (and its stages' bookkeeping) to the
    # bill: 27 -> 31 -> 35 s, the payback growing with nothing measured.
    from speedopt.isolation import measuring
    from speedopt.study import schema
    from speedopt.study._clock import Clock

    study = _bare_study(f"sqlite:///{tmp_path / 'b.db'}")
    for _ in range(2):  # two reruns: a warm worker started, every stage passed through, no job
        clock = Clock()
        clock.bind(study)
        clock.add("start", 4.0)
        for stage in ("labels", "trials", "finals", "ablation"):
            with clock.stage(stage):  # type: ignore[arg-type]
                pass
        assert schema.read_bill(study).seconds == {}
    clock = Clock()  # a run that measures: its start is billed with its work
    clock.bind(study)
    clock.add("start", 4.0)
    with clock.stage("trials"), measuring("billed"):
        pass
    bill = schema.read_bill(study)
    assert bill.seconds.get("start") == 4.0 and "trials" in bill.seconds and bill.waited_s == 0.0
    assert schema.read_bill(study) == bill  # stored once, read back the same


def test_time_waiting_for_the_host_lock_is_billed_apart_not_as_a_stage(tmp_path: Path) -> None:
    # Item 11: a newcomer run's bill showed 1 min 49 s of "labels" that was mostly waiting for another search's lock.
    import subprocess
    import sys

    from speedopt.isolation import lock_path, measuring
    from speedopt.study import schema
    from speedopt.study._bill import Payback
    from speedopt.study._clock import Clock

    hold = "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(2.0)"
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    study = _bare_study(f"sqlite:///{tmp_path / 'b.db'}")
    clock = Clock()
    clock.bind(study)
    holder = subprocess.Popen([sys.executable, "-c", hold, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with clock.stage("trials"), clock.stage("labels"), measuring("billed"):  # waits for the other process
            pass
    finally:
        holder.wait(timeout=30)
    bill = schema.read_bill(study)
    assert bill.seconds.get("labels", 0.0) < 0.5 and bill.seconds.get("trials", 0.0) < 0.5, bill  # no stage's work
    assert 1.0 <= bill.waited_s < 10.0, bill
    assert bill.total_s < 1.0 and "took 0 s" in Payback(bill.total_s, None, 100, "").text()  # not in the total the payback divides
    assert "waiting for the host lock" in bill.lines()[-1]  # said, on its own line


@pytest.mark.slow
def test_rerunning_a_finished_study_leaves_its_bill_as_it_was(small_study, demo_yaml: Path, tmp_path: Path) -> None:
    # Item 11, end to end: the rerun of a finished search (no trial, no finals round left) billed its warm worker's
    # start and its stages' bookkeeping each time (27 -> 31 -> 35 s seen, the payback growing with nothing measured).
    import shutil

    from speedopt.study import find_study, schema
    from tests.conftest import run_cli

    work, shared, name = small_study
    shutil.copy(shared.removeprefix("sqlite:///"), tmp_path / "copy.db")  # the shared study stays as it is
    url = f"sqlite:///{tmp_path / 'copy.db'}"
    before = schema.read_bill(find_study(url, name))
    assert before.total_s > 0
    same = (  # the shared study's own command (tests/conftest.py, small_study)
        "search", "--data", str(demo_yaml), "--trials", "3", "--storage", url, "--study", name,
        "--baseline", "model=yolov5s imgsz=128 batch=4 workers=0", "--fix", "imgsz=96", "--fix", "model=yolov5n",
        "--fix", "freeze=0", "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu",
        "--no-stop-at-ceiling", "--quality", "off", "--finalists", "1", "--repeats", "2", "--no-ablation", "--no-report",
    )
    for _ in range(2):
        done = run_cli(*same, cwd=work)
        assert done.returncode == 0, done.stderr
        assert schema.read_bill(find_study(url, name)) == before, done.stdout


# --- item 10: runs of one study racing ----------------------------------------------------------------------

PG = os.environ.get("SPEEDOPT_TEST_POSTGRES")  # set by .ci/run, which starts a real server on loopback
STORAGES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(not PG, reason="no PostgreSQL server: .ci/run starts one"))]
#: images/s of the finals' configs by their workers: the baseline (0) and the candidate (2), a round's noise apart.
SPEEDS = {0: [10.0, 10.4, 9.8, 10.1], 2: [10.3, 10.2, 10.5, 9.9]}


def _url(kind: str, tmp_path: Path) -> str:
    return str(PG) if kind == "postgresql" else f"sqlite:///{tmp_path / 'race.db'}"


def _measured(study: optuna.Study, workers: int, images_per_s: float, role: str | None = None) -> None:
    """One trial measured ok and judged to keep accuracy, as a search stores it."""
    from speedopt.knobs import Knobs
    from speedopt.measure import TrialResult
    from speedopt.quality import Feasibility, Verdict, signature
    from speedopt.status import Status
    from speedopt.study import schema

    knobs = Knobs(workers=workers)
    trial = study.ask()
    if role:
        trial.set_user_attr(schema.ROLE, role)
    schema.write_measurement(trial, TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=images_per_s).to_dict())
    schema.write_verdict(trial, Verdict(signature(knobs), Feasibility.FEASIBLE, reason="quality off").attrs())
    study.tell(trial, images_per_s)


def _run_finals(url: str, name: str, start: Any, out: Any) -> None:
    """One run's finals (a process of its own, as a second resume is): 4 rounds of trial 1 beside the baseline,
    each measurement 0.2 s; it puts how many it measured, the finals it ended with and what it was told."""
    import time

    from speedopt.measure import TrialResult
    from speedopt.search import _finals as finals_mod
    from speedopt.status import Status
    from speedopt.study import Need, open_storage, records

    study = optuna.load_study(study_name=name, storage=open_storage(url, Need.WRITE))
    calls: list[int] = []
    said: list[str] = []

    def measure(knobs: Any) -> TrialResult:
        time.sleep(0.2)
        calls.append(knobs.workers)
        speed = SPEEDS[knobs.workers][sum(1 for c in calls if c == knobs.workers) - 1]
        return TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=speed)

    start.wait()
    finals = finals_mod.run(study, records(study), 1, 4, measure, note=said.append)
    out.put((len(calls), None if finals is None else finals.to_attr(), said))


def _recover(url: str, name: str, start: Any, out: Any) -> None:
    """One run's recovery of the study's trials (a process of its own); it puts the trials it retried."""
    from speedopt.search._recovery import recover_interrupted
    from speedopt.study import Need, open_storage

    storage = open_storage(url, Need.WRITE)
    study = optuna.load_study(study_name=name, storage=storage)
    start.wait()
    out.put(recover_interrupted(study, storage))


def _race(target: Any, url: str, name: str, runs: int) -> list[Any]:
    """``runs`` processes started at once on one study; what each put, in the order they finished."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(runs), context.Queue()
    processes = [context.Process(target=target, args=(url, name, start, out)) for _ in range(runs)]
    for p in processes:
        p.start()
    results = [out.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(timeout=30)
        assert p.exitcode == 0
    return results


@pytest.mark.slow  # spawned processes
@pytest.mark.parametrize("kind", STORAGES)
def test_two_resumes_racing_through_the_finals_take_their_decisions_once(kind: str, tmp_path: Path) -> None:
    # Item 10: two resumes of one study each measured the finals and took their own sequential decisions; the
    # stored record kept neither run's, and one run's log contradicted its summary. Now the first run to start
    # them owns them; the other waits, measures nothing and reads the same finals.
    import uuid

    from speedopt.study import schema
    from speedopt.study.names import study_names

    url, name = _url(kind, tmp_path), f"race-{uuid.uuid4().hex[:8]}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    _measured(study, 0, 10.0, role="baseline")
    _measured(study, 2, 10.6)
    results = _race(_run_finals, url, name, runs=2)
    stored = schema.read_finals(study)
    assert stored is not None and stored.complete
    measured = sorted(calls for calls, _, _ in results)
    assert measured == [0, len(stored.measured)], results  # one run measured every round, the other none
    assert all(finals == stored.to_attr() for _, finals, _ in results)  # both read the one record
    waited = next(said for calls, _, said in results if calls == 0)
    assert any("another run owns them" in line for line in waited), waited
    from speedopt.study import is_claim

    every = [s.study_name for s in optuna.get_all_study_summaries(study._storage)]
    assert not any(is_claim(n) for n in every), every  # the claim went with its run
    assert name in study_names(study._storage)


@pytest.mark.slow  # spawned processes
@pytest.mark.parametrize("kind", STORAGES)
def test_runs_recovering_one_failed_trial_at_once_retry_it_once(kind: str, tmp_path: Path) -> None:
    # Item 10: on PostgreSQL both resumes retried the same killed worker's trial. A trial failed on another host
    # more than the grace period ago is everyone's to retry: three runs see it at once, one retries it.
    import datetime as dt
    import uuid

    from optuna.distributions import IntDistribution
    from optuna.trial import TrialState, create_trial

    from speedopt.defaults import GRACE_S

    url, name = _url(kind, tmp_path), f"retry-{uuid.uuid4().hex[:8]}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    failed = create_trial(state=TrialState.FAIL, params={"workers": 2}, distributions={"workers": IntDistribution(0, 8)},
                          user_attrs={"worker": {"host": "another-host", "pid": 4242, "started": 1.0}})
    failed.datetime_start = dt.datetime.now() - dt.timedelta(seconds=10 * GRACE_S)
    failed.datetime_complete = dt.datetime.now() - dt.timedelta(seconds=5 * GRACE_S)
    study.add_trial(failed)
    results = _race(_recover, url, name, runs=3)
    retries = [t for t in study.get_trials() if t.system_attrs.get("failed_trial") == 0]
    assert len(retries) == 1, (results, [t.number for t in retries])
    assert sorted(map(len, results)) == [0, 0, 1] and retries[0].state == TrialState.WAITING
