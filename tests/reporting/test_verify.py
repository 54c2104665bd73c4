"""`speedopt verify`: the trainer's results.csv read back, the comparison's arithmetic, the run loop, and a real run."""

import signal
import sys
import textwrap
import time

import optuna
import pytest
import yaml
from optuna.trial import TrialState, create_trial

import speedopt
from speedopt import data as demo_data
from speedopt.cli import main
from speedopt.knobs import Knobs
from speedopt.reporting import Verification, recommend, verified_section
from speedopt.reporting._trainer_run import (
    MARKER,
    Launch,
    Seen,
    cumulative_times,
    ending,
    epoch_seconds,
    finished_at,
    launch,
    leading_count,
    offline_env,
    parse_results,
    run_trainer,
)
from speedopt.search import SearchConfig, plan
from speedopt.status import Status
from speedopt.study import schema

# Ultralytics' save_metrics: cumulative seconds since training started, %.6g; the last row half written.
ULTRALYTICS_CSV = (
    "epoch,time,train/box_loss,metrics/mAP50-95(B),lr/pg0\n"
    "1,12.5,1.2,0.01,0.001\n"
    "2,24.0,1.1,0.02,0.001\n"
    "3,36.2,1.0,0.03,0.0"
)
# The classic loggers pad every field to 20 characters and have no time column.
CLASSIC_CSV = (
    f"{'epoch':>20},{'train/box_loss':>20},{'metrics/mAP_0.5':>20}\n"
    f"{0:>20},{0.066282:>20},{0:>20}\n"
    f"{1:>20},{0.066171:>20},{0.1:>20}\n"
)


def _verification(**change):
    base = dict(
        study="s", status=Status.OK, message="2 of 2 epochs recorded", command="yolo detect train data=d.yaml epochs=3",
        engine="ultralytics", trial=4, epochs=3, fraction=None, train_images=1000, epoch_s=(11.0, 10.0, 14.0),
        predicted_images_per_s=125.0, val_s=2.0, timing="from the time column of the trainer's results.csv",
        started="2026-01-01T00:00:00+00:00", wall_s=60.0,
    )
    return Verification(**{**base, **change})


def test_results_csv_rows_are_read_when_complete_and_stripped():
    rows = parse_results(ULTRALYTICS_CSV)
    assert len(rows) == 2 and rows[1]["time"] == "24.0"  # the unfinished third line waits for its newline
    classic = parse_results(CLASSIC_CSV)
    assert [r["epoch"] for r in classic] == ["0", "1"] and classic[1]["metrics/mAP_0.5"] == "0.1"
    assert parse_results("") == [] and parse_results("epoch,time\n") == []


def test_epoch_times_come_from_the_time_column_or_from_when_rows_appeared():
    assert cumulative_times(parse_results(ULTRALYTICS_CSV)) == [12.5, 24.0]
    assert cumulative_times(parse_results(CLASSIC_CSV)) is None
    assert epoch_seconds([12.5, 24.0, 36.5]) == pytest.approx((12.5, 11.5, 12.5))
    # classic: rows seen at 105.0 and 109.5 (monotonic), training started (the log's marker) at 100.0
    finished, timing = finished_at(parse_results(CLASSIC_CSV), [105.0, 109.5], 100.0, 90.0)
    assert epoch_seconds(finished) == pytest.approx((5.0, 4.5)) and MARKER in timing
    finished, timing = finished_at(parse_results(CLASSIC_CSV), [105.0, 109.5], None, 90.0)
    assert finished == pytest.approx([15.0, 19.5]) and "includes set-up" in timing


def test_prediction_measurement_and_errors():
    v = _verification()
    assert v.predicted_epoch_s == pytest.approx(1000 / 125.0 + 2.0)  # 10 s
    assert v.measured_epoch_s == pytest.approx(11.0)  # the median of all three epochs
    assert v.measured_images_per_s == pytest.approx(1000 / (11.0 - 2.0))
    assert v.epoch_error == pytest.approx(0.10)
    assert v.images_per_s_error == pytest.approx((1000 / 9.0) / 125.0 - 1)
    assert "median of 3 epochs (all)" in v.epochs_basis and "2.00 s timed validation pass" in v.images_per_s_basis


def test_the_epochs_in_the_trainers_warm_up_are_not_compared():
    """Issue 53: the trainer's first epochs step the optimizer more often than the trials measured; verify compares
    the run's epochs after them, and says how many it left out."""
    v = _verification(epochs=6, epoch_s=(20.0, 16.0, 14.0, 11.0, 10.0, 12.0), warmup_epochs=3)
    assert v.steady_epoch_s == (11.0, 10.0, 12.0) and v.measured_epoch_s == pytest.approx(11.0)
    assert "median of 3 epochs (all; the first 3 in the trainer's warm-up left out)" in v.epochs_basis
    short = _verification(epochs=2, epoch_s=(20.0, 16.0), warmup_epochs=2)  # the classic trainer: all of it warm-up
    assert short.measured_epoch_s == pytest.approx(18.0) and "none after it ran" in short.epochs_basis
    assert Verification.from_dict(v.to_dict()).measured_epoch_s == pytest.approx(11.0)


def test_an_untimed_validation_and_a_run_without_epochs():
    v = _verification(val_s=None, epoch_s=(10.0,), epochs=2)
    assert v.predicted_epoch_s == pytest.approx(8.0) and v.measured_images_per_s == pytest.approx(100.0)
    assert "not timed" in v.images_per_s_basis and "1 of 2 asked" in v.epochs_basis
    none = _verification(status=Status.TIMEOUT, epoch_s=())
    assert none.measured_epoch_s is None and none.epoch_error is None and none.images_per_s_error is None
    assert "no epoch finished" in none.epochs_basis
    assert _verification(val_s=20.0).measured_images_per_s is None  # the validation estimate exceeds the epoch


def test_leading_fraction_counts_as_ultralytics_does():
    assert leading_count(16, None) == 16 and leading_count(16, 0.5) == 8 and leading_count(10, 0.01) == 1
    assert leading_count(5, 0.5) == 2  # round() to even, as the trainer's own arithmetic


def test_how_a_run_ends():
    def seen(**change):
        base = dict(rows=[{"epoch": "1"}], seen_at=[1.0], train_started=0.5, started=0.0, returncode=0, timed_out=False,
                    log_tail="Traceback (most recent call last):\n  File x\nRuntimeError: boom\nmore text", wall_s=3.0,
                    logged_train_images=None)
        return Seen(**{**base, **change})

    assert ending(seen(), 1, 60)[0] is Status.OK
    assert ending(seen(rows=[]), 1, 60) == (Status.ERROR, "the trainer exited 0 but wrote no results.csv row in its run folder")
    status, message = ending(seen(timed_out=True, returncode=-9), 2, 60)
    assert status is Status.TIMEOUT and "--timeout 60 s (1 of 2 epochs recorded)" in message
    assert ending(seen(returncode=1), 1, 60) == (Status.ERROR, "the trainer exited with code 1 (1 of 1 epochs recorded): RuntimeError: boom")
    assert ending(seen(returncode=-signal.SIGKILL), 1, 60)[0] is Status.OOM
    assert "SIGSEGV" in ending(seen(returncode=-signal.SIGSEGV), 1, 60)[1]


def test_stored_record_round_trips_and_makes_the_report_section():
    study = optuna.create_study()
    assert verified_section(study) == []
    v = _verification()
    schema.write_verification(study, v.to_dict())
    assert Verification.from_dict(schema.read_verification(study)) == v
    section = "\n".join(verified_section(study))
    assert section.startswith("## Verified") and "yolo detect train data=d.yaml epochs=3" in section
    assert "| epoch time | 10.00 s | 11.00 s | +10.0 % |" in section and "median of 3 epochs (all)" in section


def test_bad_options_fail_before_any_storage_is_opened(tmp_path):
    missing = f"sqlite:///{tmp_path}/none.db"
    for options, match in (({"epochs": 0}, "--epochs"), ({"fraction": 0.0}, "--fraction"), ({"fraction": 1.5}, "--fraction"),
                           ({"timeout_s": -1.0}, "--timeout")):
        with pytest.raises(speedopt.UsageError, match=match):
            speedopt.verify(storage=missing, **options)
    assert not (tmp_path / "none.db").exists()


def _stored_study(demo_yaml, url, engine="ultralytics"):
    proto = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", storage=url, engine=engine)).protocol
    study = optuna.create_study(study_name=f"v-{engine}", storage=url, direction="maximize")
    schema.write_protocol(study, proto)
    return study, proto


def test_a_study_without_a_recommendation_is_a_usage_error(demo_yaml, tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/s.db"
    _stored_study(demo_yaml, url)
    assert main(["verify", "--storage", url]) == 2
    assert "no recommendation yet" in capsys.readouterr().err


def test_the_classic_command_runs_its_module_on_a_leading_subset(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    study, proto = _stored_study(demo_yaml, url, engine="yolov5")
    attrs = {"status": "ok", "images_per_s": 10.0, "config": proto.baseline.to_dict(), "feasible": True, "role": "baseline"}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=10.0, user_attrs=attrs))
    rec = recommend(study)
    started = launch(rec, 2, 0.25, tmp_path)
    argv = started.argv
    assert argv[:3] == [sys.executable, "-m", "yolov5.train"] and argv[argv.index("--epochs") + 1] == "2"
    assert argv[-5:] == ["--project", str(tmp_path / "runs"), "--name", "verify", "--exist-ok"]
    subset = yaml.safe_load(open(argv[argv.index("--data") + 1]))
    listed = open(subset["train"]).read().split()
    everything = sorted(str(p) for p in demo_data.load(demo_yaml).train_images)
    assert listed == everything[: len(everything) // 4] and started.train_images == len(listed) == 12
    assert subset["names"] == yaml.safe_load(open(demo_yaml))["names"]
    assert started.shown == rec.command(2) and started.results == tmp_path / "runs" / "verify" / "results.csv"


def test_verify_runs_the_command_of_a_users_checkpoint_under_the_engines_safe_load(demo_yaml, tmp_path):
    """The printed command for a user's checkpoint starts with ULTRALYTICS_SAFE_LOAD=1 (as the trials loaded it):
    verify shows it so and runs the yolo executable itself, the switch in its environment, not as an argument."""
    from tests.conftest import checkpoint_file

    url = f"sqlite:///{tmp_path}/s.db"
    study, _ = _stored_study(demo_yaml, url)
    mine = Knobs(model=str(checkpoint_file(tmp_path / "mine.pt")), imgsz=96, batch=8, workers=0, amp=False)
    attrs = {"status": "ok", "images_per_s": 30.0, "config": mine.to_dict(), "feasible": True}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=30.0, user_attrs=attrs))
    rec = recommend(study)
    started = launch(rec, 1, 0.5, tmp_path)
    assert started.shown.startswith("ULTRALYTICS_SAFE_LOAD=1 yolo detect train ")
    assert started.argv[0].endswith("/yolo") and started.argv[1:3] == ["detect", "train"]
    assert not [w for w in started.argv if "SAFE_LOAD" in w] and offline_env(rec)["ULTRALYTICS_SAFE_LOAD"] == "1"


def test_the_ultralytics_command_keeps_the_full_runs_mosaic(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    study, _ = _stored_study(demo_yaml, url)
    fast = Knobs(model="yolov5n", imgsz=96, batch=8, workers=0, amp=False)
    attrs = {"status": "ok", "images_per_s": 30.0, "config": fast.to_dict(), "feasible": True}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=30.0, user_attrs=attrs))
    started = launch(recommend(study), 1, 0.5, tmp_path)
    assert started.argv[0].endswith("/yolo") and started.argv[1:3] == ["detect", "train"]
    assert {"epochs=1", "fraction=0.5", "close_mosaic=0", f"project={tmp_path / 'runs'}", "exist_ok=True"} <= set(started.argv)
    assert started.shown.startswith("yolo detect train ") and started.shown.endswith("epochs=1 fraction=0.5 close_mosaic=0")
    assert started.train_images == 24
    assert not any(w.startswith("optimizer=") for w in started.argv)  # auto resolves the same for both runs here


def test_a_short_run_trains_the_optimizer_the_trials_recorded_for_the_full_run(demo_yaml, tmp_path):
    """Issue 53: the trial trained MuSGD (optimizer=auto for the whole run, as its trainer resolved it); a 1-epoch run
    on 24 images would resolve AdamW, so verify names the full run's optimizer on the command it runs and prints."""
    url = f"sqlite:///{tmp_path}/s.db"
    study, _ = _stored_study(demo_yaml, url)
    fast = Knobs(model="yolov5n", imgsz=96, batch=8, workers=0, amp=False)
    musgd = ["optimizer=MuSGD", "lr0=0.01", "warmup_bias_lr=0"]
    attrs = {"status": "ok", "images_per_s": 30.0, "config": fast.to_dict(), "feasible": True, "optimizer": "MuSGD",
             "optimizer_args": musgd}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=30.0, user_attrs=attrs))
    started = launch(recommend(study), 1, 0.5, tmp_path)
    assert started.argv[-len(musgd) - 3 : -3] == musgd and started.shown.endswith(" ".join(musgd))
    assert any("optimizer=AdamW" in n and "as the trials trained" in n for n in started.notes)


FAKE_TRAINER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    out = Path(sys.argv[1]); out.parent.mkdir(parents=True)
    time.sleep(0.3)
    print("Using 7 train, 3 val images for fraction=0.5")
    print("Starting training for 2 epochs...", flush=True)
    for epoch in (1, 2):
        time.sleep(0.5)
        with open(out, "a") as f:
            f.write(("epoch,loss\\n" if epoch == 1 else "") + f"{epoch},0.1\\n")
    time.sleep(float(sys.argv[2]))
    """
)


@pytest.mark.slow  # starts a child job
def test_the_run_loop_times_new_rows_from_the_marker_and_kills_on_timeout(tmp_path):
    results = tmp_path / "runs" / "verify" / "results.csv"
    notes = []
    launch = Launch([sys.executable, "-c", FAKE_TRAINER, str(results), "0"], "fake", results, 7, ())
    seen = run_trainer(launch, tmp_path, {"PYTHONUNBUFFERED": "1"}, 2, 30.0, notes.append)
    assert ending(seen, 2, 30.0)[0] is Status.OK and seen.logged_train_images == 7
    finished, timing = finished_at(seen.rows, seen.seen_at, seen.train_started, seen.started)
    assert epoch_seconds(finished) == pytest.approx((0.5, 0.5), abs=0.2) and "polled" in timing
    assert [n for n in notes if n.startswith("epoch")][-1].startswith("epoch 2/2: ")
    started = time.monotonic()
    hung = Launch([sys.executable, "-c", FAKE_TRAINER, str(tmp_path / "b" / "results.csv"), "600"], "fake", tmp_path / "b" / "results.csv", 7, ())
    seen = run_trainer(hung, tmp_path, {"PYTHONUNBUFFERED": "1"}, 2, 2.0, None)
    assert seen.timed_out and len(seen.rows) == 2 and time.monotonic() - started < 15


@pytest.mark.slow
def test_verify_runs_the_recommended_command_for_real(tmp_path, capsys, shared_warm):
    data_yaml = demo_data.generate(tmp_path / "shapes", demo_data.DemoSpec(train=16, val=8, width=160, height=120))
    url = f"sqlite:///{tmp_path}/s.db"
    speedopt.search(
        str(data_yaml), trials=1, steps=3, max_steps=3, warmup=1, quality="off", device="cpu",
        baseline="model=yolov5n imgsz=64 batch=4 workers=0", storage=url, ends=False,  # verify reads no ceiling
    )
    assert main(["verify", "--storage", url, "--epochs", "1"]) == 0
    out, err = capsys.readouterr()
    assert "verify: epoch 1/1: " in err
    assert out.startswith("verify: ok: 1 of 1 epochs recorded")
    assert "epoch time" in out and "images/s" in out and "median of 1 epoch (all)" in out
    stored = optuna.load_study(study_name=speedopt.best(storage=url).study, storage=url).user_attrs[schema.VERIFY]
    assert stored["status"] == "ok" and len(stored["epoch_s"]) == 1 and stored["epoch_s"][0] > 0
    assert stored["measured_epoch_s"] > 0 and stored["predicted_epoch_s"] > 0 and stored["epoch_error"] is not None
    assert stored["command"].startswith("yolo detect train ") and "epochs=1" in stored["command"]
    assert not list(tmp_path.glob("runs")) and not (tmp_path / "shapes" / "runs").exists()
