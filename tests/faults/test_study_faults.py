"""Faults in what a study stores and in how runs share it (issue 44, items 9 to 11): a hostile import's NaN
measurements, two runs of one study racing through its finals, and the study's bill.

The studies here are made without a trainer (a protocol and measured trials written as ``speedopt search``
writes them), in real Optuna storages: SQLite, and PostgreSQL where ``SPEEDOPT_TEST_POSTGRES`` names a server.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

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
    from speedopt.study import Finals, Repeat, schema

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
    from speedopt.search._clock import Clock
    from speedopt.study import schema

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
    from speedopt.search._clock import Clock
    from speedopt.study import payback, schema

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
    assert bill.total_s < 1.0 and "took 0 s" in payback(bill, None, 100, "")  # not in the total the payback divides
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
