"""Real trials of the Ultralytics trainer on the demo data, on CPU (no GPU exists here: the CUDA
paths - AMP on, GPU memory and utilisation - are not exercised by these tests)."""

import json
import time

import psutil
import pytest

from speedopt import measure
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.status import Status
from tests.conftest import TINY, run_cli


def _tree(root):
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def _tiny(**change):
    base = dict(model="yolov5n", imgsz=128, batch=4, workers=0)
    return Knobs(**{**base, **change})


@pytest.mark.slow
def test_cli_trial_json_is_plausible_and_leaves_no_trace(demo_yaml, tmp_path):
    before = _tree(demo_yaml.parent)
    done = run_cli("trial", "--data", str(demo_yaml), *TINY, "--workers", "2", "--amp", "on", "--deterministic", "off", "--json",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "ok", result
    assert result["images_per_s"] > 0
    assert 0 <= result["data_wait_fraction"] <= 1
    assert result["setup_s"] > 0 and result["peak_ram_mb"] > 0
    assert 0 < result["step_s_median"] <= result["step_s_p90"]
    assert result["peak_gpu_mem_mb"] is None and result["gpu_util_mean"] is None
    assert 0 <= result["cpu_util_mean"] <= 100
    assert result["engine"] == "ultralytics" and result["engine_version"]
    assert result["device"] == "cpu"
    assert result["config"]["amp"] is False and any("AMP needs CUDA" in n for n in result["notes"])
    assert result["config"]["imgsz"] == 128 and result["config"]["batch"] == 4
    # asked off, and run off: read back from torch's own state as the trainer's init_seeds left it
    assert result["requested"]["deterministic"] is False and result["config"]["deterministic"] is False
    # enough images for the longest window: 1 warm-up + 9 (3 x --steps) batches of 4 (no workers on CPU: no queue)
    assert result["images_used"] == 40 and result["images_total"] == 48
    assert 3 <= result["steps"] <= 9 and result["max_steps"] == 9 and result["warmup"] == 1
    # converged: the CI within 5% and the window's two halves within 5% of each other (drift): a CI within 5% alone
    # does not make it (CI once measured 0.049 with a drifting window, converged false)
    assert result["ci_rel"] > 0 and (result["ci_rel"] <= 0.05 or not result["converged"])
    assert result["network_blocked"] == []
    # The absolute yardstick: the trainer's model counted at imgsz 128, 3 x forward per trained image. Ultralytics lists
    # YOLOv5nu at 7.7 GFLOPs (640 px, 80 classes): 3 x 7.7 x (128/640)^2 = 0.92; the demo's 3 classes shrink the head.
    # Exactly: thop on the same architecture (nc=3) at the full 128 px, the count the trial's proxy rule scales to.
    import thop
    import torch
    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel("yolov5n.yaml", nc=3, verbose=False)
    full = 3 * 2 * thop.profile(model, inputs=(torch.empty(1, 3, 128, 128),), verbose=False)[0] / 1e9
    assert 0.7 < result["gflops_per_image"] < 0.95 and result["gflops_per_image"] == pytest.approx(full, rel=1e-6)
    assert result["flops_basis"].startswith("estimate: 3 x the forward FLOPs, the trainer's count (")
    assert result["peak_share"] is None and result["peak_tflops"] is None  # a CPU: never a made-up peak
    assert result["peak_basis"] == "peak unknown on a CPU" and result["peak_precision"] == "fp32"
    assert list(tmp_path.iterdir()) == []  # no run folders in the working directory
    after = _tree(demo_yaml.parent)
    added = set(after) - set(before)
    assert added <= {"labels/train.cache", "labels/val.cache"}  # the trainer's own label cache only
    assert all(after[k] == v for k, v in before.items() if not k.endswith(".cache"))


@pytest.mark.slow
def test_on_cpu_workers_run_as_yolo_detect_train_runs_them(demo_yaml, warm_ultralytics):
    # `yolo detect train` forces workers=0 on CPU whatever the command says: the trial runs what the real run will.
    request = measure.make_request(str(demo_yaml), _tiny(workers=2), measure.TrialOptions(device="cpu", steps=3, warmup=1))
    assert request.knobs.workers == 0 and any("yolo detect train" in n and "workers=0" in n for n in request.notes)
    result = measure.run_trial(request)
    assert result.status is Status.OK, result.message
    assert result.config.workers == 0 and result.requested.workers == 2



@pytest.mark.slow
@pytest.mark.parametrize("cache", ["none", "ram", "disk"])
def test_cache_modes_run_and_disk_cache_is_cleaned(demo_yaml, warm_ultralytics, cache):
    result = measure.run_trial(measure.make_request(str(demo_yaml), _tiny(cache=cache),
        measure.TrialOptions(device="cpu", steps=3, warmup=1)))
    assert result.status is Status.OK, result.message
    assert result.config.cache == cache
    assert not list(demo_yaml.parent.rglob("*.npy"))  # later trials would read leftover .npy in any mode


@pytest.mark.slow
def test_freeze_and_imgsz_are_read_back_from_the_trainer(demo_yaml, warm_ultralytics):
    request = measure.make_request(str(demo_yaml), _tiny(freeze=3, imgsz=100), measure.TrialOptions(device="cpu", steps=2, warmup=1))
    assert request.knobs.imgsz == 128 and any("multiple of 32" in n for n in request.notes)
    result = measure.run_trial(request)
    assert result.status is Status.OK, result.message
    assert result.config.freeze == 3 and result.config.imgsz == 128
    assert result.config.deterministic is True  # the trainer's default, read back from torch's state as it ran


@pytest.mark.slow
def test_timeout_kills_the_whole_trial(demo_yaml, warm_ultralytics):
    request = measure.make_request(str(demo_yaml), _tiny(workers=2), measure.TrialOptions(device="cpu", steps=50, warmup=1, timeout_s=4))
    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    result = measure.run_trial(request)
    assert result.status is Status.TIMEOUT
    assert "--timeout 4" in result.message
    time.sleep(0.5)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in mine]
    assert left == []


@pytest.mark.slow
def test_trainer_failure_is_an_error_status_not_a_crash(demo_yaml, warm_ultralytics, tmp_path):
    broken = tmp_path / "broken.yaml"
    # A model yaml in the trainers' own form (it passes speedopt's inspection) whose first layer reads from a layer
    # that does not exist: the trainer fails building it.
    broken.write_text("nc: 3\nbackbone: [[5, 1, Conv, [16, 3, 2]]]\nhead: [[-1, 1, Conv, [16, 3, 2]]]\n")
    result = measure.run_trial(measure.make_request(str(demo_yaml), _tiny(model=str(broken)),
        measure.TrialOptions(device="cpu", steps=2, warmup=1)))
    assert result.status is Status.ERROR
    assert result.message and result.log_tail


def test_ram_cache_that_cannot_fit_is_infeasible_without_running(demo_yaml):
    request = measure.make_request(str(demo_yaml), _tiny(cache="ram"),
        measure.TrialOptions(device="cpu", steps=2, warmup=1, ram_limit_gb=1 / 1024))
    started = time.monotonic()
    result = measure.run_trial(request)
    assert result.status is Status.INFEASIBLE and "cache=ram needs about" in result.message
    assert "(--ram-limit)" in result.message
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    "args, says",
    [
        (["--data", "missing/data.yaml"], "data.yaml not found"),
        (["--batch", "0"], "argument --batch: must be an integer at least 1"),
        (["--imgsz", "0"], "argument --imgsz: must be an integer at least 1"),
        (["--workers", "-1"], "argument --workers: must be an integer at least 0"),
        (["--model", "yolov5q"], "unknown model"),
        (["--device", "3"], "CUDA device 3 does not exist"),
        (["--device", "gpu"], "--device must be cpu"),
        (["--cache", "fast"], "invalid choice"),
        (["--steps", "1"], "--steps must be at least 2"),
    ],
)
def test_bad_input_exit_2_one_line(demo_yaml, tmp_path, args, says):
    argv = ["trial", "--data", str(demo_yaml), *TINY]
    for flag, value in zip(args[::2], args[1::2]):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_bad_dataset_exit_2(tmp_path):
    (tmp_path / "data.yaml").write_text("path: /nonexistent\ntrain: a\nval: b\nnames: [x]\n")
    done = run_cli("trial", "--data", str(tmp_path / "data.yaml"), *TINY, cwd=tmp_path)
    assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_prepare_rejects_bad_values_in_library_too(demo_yaml):
    with pytest.raises(UsageError):
        measure.make_request(str(demo_yaml), _tiny(), measure.TrialOptions(device="cpu", warmup=0))
