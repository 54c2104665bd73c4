"""Multi-process trials (the knob ``gpus``) on CPU: the stand-in engine's gloo ranks through the real runner.

Neither real trainer runs DDP without CUDA; the stand-in engine trains a tiny net on the demo images
under the same launcher, runner and child entry point, so what is tested here is speedopt's part of a
DDP trial: the launch, each rank's figures, the merge, and that nothing is left after a kill.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from speedopt.errors import UsageError
from speedopt.isolation import marked
from speedopt.isolation._job import own_processes as _own_processes
from speedopt.knobs import Knobs
from speedopt.measure import TrialOptions, make_request
from speedopt.measure._ddp import merge_ranks
from speedopt.measure._launch import LAUNCH_ENV, port_free
from speedopt.measure._workdir import result_name, write_json
from tests.conftest import run_cli
from tests.measure.test_launch import _until

# Launches are found by their marker, on the whole host: under pytest-xdist (the slow tier's --dist loadgroup)
# every launch test runs on one worker, so that no test sees another's ranks as its own leftovers.
pytestmark = pytest.mark.xdist_group("launch")


def _ok(rate: float, notes: tuple[str, ...] = ()) -> dict:
    return {"status": "ok", "message": "measured", "figures": {"images_per_s": rate, "notes": list(notes)}}


def _leftovers() -> list:
    """Processes of this user that carry any launch's marker."""
    return marked()


# -- merging the ranks' results, no processes -------------------------------------------------------


def test_the_total_is_the_sum_of_the_ranks(tmp_path):
    write_json(tmp_path / result_name(0), _ok(10.0))
    write_json(tmp_path / result_name(1), _ok(12.0))
    merged = merge_ranks(tmp_path, 2)
    assert merged["figures"]["images_per_s"] == pytest.approx(22.0)
    assert merged["figures"]["rank_images_per_s"] == [10.0, 12.0]
    assert "22.0 images/s in total (10.0, 12.0 per rank)" in merged["message"]


def test_ranks_without_figures_count_as_rank_0_and_say_so(tmp_path):
    write_json(tmp_path / result_name(0), _ok(10.0))
    merged = merge_ranks(tmp_path, 4)
    assert merged["figures"]["images_per_s"] == pytest.approx(40.0)
    assert merged["figures"]["rank_images_per_s"] == [10.0, None, None, None]
    assert any("ranks 1, 2, 3 reported no figures" in n for n in merged["figures"]["notes"])


def test_a_failing_rank_is_the_trials_status_when_rank_0_has_none(tmp_path):
    write_json(tmp_path / result_name(1), {"status": "oom", "message": "CUDA out of memory", "figures": {}})
    merged = merge_ranks(tmp_path, 2)
    assert merged["status"] == "oom" and merged["message"] == "rank 1: CUDA out of memory"
    assert merge_ranks(tmp_path / "none", 2) is None


def test_rank_0s_own_failure_wins(tmp_path):
    write_json(tmp_path / result_name(0), {"status": "error", "message": "boom", "figures": {}})
    write_json(tmp_path / result_name(1), {"status": "oom", "message": "later", "figures": {}})
    assert merge_ranks(tmp_path, 2)["message"] == "rank 0: boom"


# -- requests ---------------------------------------------------------------------------------------


def test_a_ddp_request_fixes_its_window_and_says_how_the_batch_splits(demo_yaml):
    request = make_request(str(demo_yaml), Knobs(model="yolov5n", imgsz=64, batch=4, workers=0, gpus=2),
        TrialOptions(device="cpu", engine="standin", steps=4, warmup=1))
    assert request.device == "cpu" and request.max_steps == 4 and request.infeasible is None
    assert any("batch=4 is the total (2 per process)" in note for note in request.notes)


def test_a_batch_that_does_not_split_evenly_is_infeasible(demo_yaml):
    request = make_request(str(demo_yaml), Knobs(model="yolov5n", imgsz=64, batch=5, workers=0, gpus=2),
        TrialOptions(device="cpu", engine="standin"))
    assert request.infeasible and "batch=5 is not a multiple of gpus=2" in request.infeasible


def test_the_real_trainers_refuse_ddp_on_the_cpu(demo_yaml):
    with pytest.raises(UsageError, match="runs DDP on CUDA GPUs only"):
        make_request(str(demo_yaml), Knobs(model="yolov5n", imgsz=64, batch=4, gpus=2), TrialOptions(device="cpu"))


def test_a_search_over_gpus_with_a_real_trainer_on_the_cpu_is_one_line(demo_yaml, tmp_path):
    done = run_cli("search", "--data", str(demo_yaml), "--device", "cpu", "--fix", "gpus=2", "--storage",
                   f"sqlite:///{tmp_path / 's.db'}", "--quality", "off")
    assert done.returncode == 2, done.stderr
    assert "runs DDP on CUDA GPUs only" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "s.db").exists()


# -- real ranks -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_two_process_trial_measures_ok_with_each_ranks_throughput(demo_yaml):
    done = run_cli("trial", "--data", str(demo_yaml), "--engine", "standin", "--device", "cpu", "--gpus", "2",
                   "--model", "yolov5n", "--imgsz", "64", "--batch", "4", "--workers", "0", "--steps", "4",
                   "--warmup", "1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["config"]["gpus"] == 2
    ranks = result["rank_images_per_s"]
    assert len(ranks) == 2 and all(r > 0 for r in ranks)
    assert result["images_per_s"] == pytest.approx(sum(ranks))
    assert "2 ranks:" in result["message"]
    assert not _leftovers()


SEARCH = [
    "search", "--engine", "standin", "--device", "cpu", "--quality", "off", "--repeats", "0",
    "--baseline", "model=yolov5n imgsz=64 batch=4 workers=0", "--fix", "workers=0", "--prune-margin", "0",  # every config measured to its end
]


@pytest.mark.slow
def test_a_search_over_gpus_reports_the_scaling(demo_yaml, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("gpus: [1, 2]\n")
    done = run_cli(*SEARCH, "--data", str(demo_yaml), "--space", str(space), "--trials", "2", "--steps", "4",
                   "--warmup", "1", "--storage", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "no training command: the standin engine" in done.stdout
    report = next((tmp_path / "reports").glob("*.md")).read_text()
    table = report.split("## Multi-GPU scaling", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in table.splitlines() if line.startswith("| 1 |"))  # trial 1: the same config on 2 ranks
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "2" and cells[6] != "not measured" and cells[7].endswith("%")
    assert not _leftovers()


@pytest.mark.slow
def test_sigkill_of_the_search_leaves_no_rank_and_no_port(demo_yaml, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    search = subprocess.Popen(
        [sys.executable, "-m", "speedopt", *SEARCH, "--data", str(demo_yaml), "--baseline",
         "model=yolov5n imgsz=64 batch=4 workers=0 device=0,1", "--trials", "1",  # device=0,1: the baseline runs gpus=2
         "--steps", "100000", "--warmup", "1", "--storage", f"sqlite:///{tmp_path / 's.db'}"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        def ranks() -> list:
            return [(p, e) for p, e in _own_processes() if LAUNCH_ENV in e and "RANK" in e]

        assert _until(lambda: len(ranks()) >= 2, 120), "the two ranks never started"
        port = int(ranks()[0][1]["MASTER_PORT"])
        assert not port_free(port)
        time.sleep(2)  # measuring
        os.kill(search.pid, signal.SIGKILL)
        search.wait(timeout=10)
        killed_at = time.monotonic()
        assert _until(lambda: not _leftovers() and port_free(port), 15)
        assert time.monotonic() - killed_at < 10
    finally:
        if search.poll() is None:
            search.kill()
            search.wait()
