"""The one job runner: every way a child process ends maps to one status, in one place."""

import signal
import time

import pytest

from speedopt.knobs import Knobs
from speedopt.measure import JobOutcome, ProbeJob, TrialProgress, ValidateJob, run_job
from speedopt.measure._jobs import job_from_json, job_to_json
from speedopt.measure._request import TrialRequest
from speedopt.measure._runner import _ending, _Exit
from speedopt.status import Status

JOB = ProbeJob(engine="ultralytics", yolov5_dir=None, data_yaml="d.yaml", knobs=Knobs(), device="cpu", timeout_s=7, cache_dir="/c")


def _exit(**change):
    base = dict(result=None, timed_out=False, returncode=0, log_tail="last line", wall_s=1.0, last_progress=None)
    return _Exit(**{**base, **change})


def test_the_childs_own_result_wins():
    assert _ending(_exit(result={"status": "infeasible", "message": "no"}), JOB) == (Status.INFEASIBLE, "no")


def test_progress_is_read_once_from_what_the_child_writes():
    update = TrialProgress.from_dict({"phase": "measure", "done": 3, "of": 20, "rate": 41.5})
    assert update == TrialProgress("measure", 3, 20, images_per_s=41.5) and update.text() == "measure 3/20"
    assert TrialProgress.from_dict({"phase": "labels"}).text() == "labels"
    assert TrialProgress.from_dict({"done": True, "of": "x", "rate": "fast"}) == TrialProgress()  # nothing mistyped gets in
    assert TrialProgress().text() == "setup"


def test_timeout_names_the_option_and_the_phase():
    status, message = _ending(_exit(timed_out=True, last_progress=TrialProgress("epoch", 2, 5)), JOB)
    assert status is Status.TIMEOUT and message == "probe exceeded --probe-timeout 7 s during epoch 2/5"
    trial = TrialRequest(data_yaml="d", knobs=Knobs(), requested=Knobs(), device="cpu", timeout_s=4)
    assert _ending(_exit(timed_out=True), trial)[1] == "trial exceeded --timeout 4 s during setup"


def test_sigkill_without_a_result_is_the_oom_killer():
    status, message = _ending(_exit(returncode=-signal.SIGKILL), JOB)
    assert status is Status.OOM and "out-of-memory killer" in message


def test_other_signals_and_exit_codes_are_errors_with_the_last_log_line():
    assert _ending(_exit(returncode=-signal.SIGSEGV), JOB) == (Status.ERROR, "process killed by SIGSEGV: last line")
    assert _ending(_exit(returncode=3), JOB) == (Status.ERROR, "process exited with code 3: last line")


def test_jobs_round_trip_through_json():
    trial = TrialRequest(data_yaml="d", knobs=Knobs(batch=4), requested=Knobs(), device="cpu", notes=("a",))
    validate = ValidateJob("ultralytics", None, "d.yaml", Knobs(), "cpu", 5.0, "/c", weights="/w.pt")
    for job in (JOB, validate, trial):
        assert job_from_json(job_to_json(job)) == job


@pytest.mark.slow  # starts child jobs
def test_a_real_child_that_fails_reports_error_and_one_that_hangs_is_killed(tmp_path):
    missing = ProbeJob("ultralytics", None, str(tmp_path / "none.yaml"), Knobs(model="yolov5n"), "cpu", 60, str(tmp_path))
    done = run_job(missing, "test")
    assert done.status is Status.ERROR and done.message and done.figures == {}
    started = time.monotonic()
    slow = ProbeJob("ultralytics", None, str(tmp_path / "none.yaml"), Knobs(model="yolov5n"), "cpu", 0.3, str(tmp_path))
    done = run_job(slow, "test")
    assert done.status is Status.TIMEOUT and "--probe-timeout 0.3 s" in done.message
    assert time.monotonic() - started < 20
    assert done.started_at <= done.ended_at


def test_typed_views_are_none_unless_ok():
    failed = JobOutcome(Status.ERROR, "x", {}, 1.0, "", (), 0.0, 1.0)
    assert failed.scores() is None and failed.validation() is None
    ok = JobOutcome(Status.OK, "x", {"map50": 0.5, "map50_95": 0.3, "images": 8, "val_s": 1.5, "val_images": 4}, 1.0, "", (), 0.0, 1.0)
    assert ok.scores().map50_95 == 0.3 and ok.validation().seconds == 1.5


def test_a_child_killed_by_sigkill_is_oom_not_error(tmp_path):
    """What the kernel's OOM killer does to a job (SIGKILL, no result) maps to oom, for every kind of job."""
    import os
    import threading

    import psutil

    job = ValidateJob("ultralytics", None, str(tmp_path / "none.yaml"), Knobs(model="yolov5n"), "cpu", 60, str(tmp_path))
    found: list[int] = []

    def kill_the_child() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not found:
            for p in psutil.Process().children(recursive=True):
                try:
                    if "speedopt.measure._child" in " ".join(p.cmdline()):
                        found.append(p.pid)
                        os.kill(p.pid, signal.SIGKILL)
                except (psutil.Error, ProcessLookupError):
                    continue
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_child)
    killer.start()
    done = run_job(job, "test")
    killer.join()
    assert found, "the child never started"
    assert done.status is Status.OOM and "out-of-memory killer" in done.message
