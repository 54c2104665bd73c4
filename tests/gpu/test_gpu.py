"""What only a GPU can show: AMP, CUDA OOM as a status, NVML telemetry, memory prediction, verify, DDP, and the
newer knobs (issue 31): torch.compile on CUDA, bf16 where the GPU has it, channels_last on and off.

Run on a GPU machine by ``benchmarks/gpu_check.sh`` (``pytest -m gpu``); skipped elsewhere.
"""

import json

import optuna
import pytest

from speedopt.study import flat_attrs
from tests.conftest import run_cli

GPU_TRIAL = ["trial", "--model", "yolov5n", "--imgsz", "320", "--workers", "2", "--steps", "5", "--warmup", "2", "--json"]


def _trial(demo_yaml, *args: str) -> dict:
    done = run_cli(*GPU_TRIAL, "--data", str(demo_yaml), *args, timeout=600)
    return json.loads(done.stdout)


def test_amp_on_and_off_both_measure_and_amp_uses_less_memory(demo_yaml):
    on = _trial(demo_yaml, "--device", "0", "--batch", "32", "--amp", "on")
    off = _trial(demo_yaml, "--device", "0", "--batch", "32", "--amp", "off")
    assert on["status"] == off["status"] == "ok", (on["message"], off["message"])
    assert on["config"]["amp"] is True and off["config"]["amp"] is False
    assert on["peak_gpu_mem_mb"] < off["peak_gpu_mem_mb"]


def test_nvml_telemetry_is_measured_and_plausible(demo_yaml):
    result = _trial(demo_yaml, "--device", "0", "--batch", "16")
    assert result["status"] == "ok"
    assert 0 <= result["gpu_util_mean"] <= 100 and result["peak_gpu_mem_mb"] > 50
    # the absolute yardstick beside NVML's busy share: the share of the card's dense fp16 peak (AMP on), where the table
    # lists the card, or why not
    assert result["gflops_per_image"] > 0
    if result["peak_share"] is not None:
        assert 0 < result["peak_share"] < 1 and result["peak_precision"] == "fp16" and "dense fp16 peak" in result["peak_basis"]
    else:
        assert result["peak_basis"].startswith("peak unknown: "), result["peak_basis"]


def test_a_batch_that_cannot_fit_is_oom_and_the_search_goes_on(demo_yaml, tmp_path):
    huge = run_cli("trial", "--data", str(demo_yaml), "--device", "0", "--model", "yolov5x", "--imgsz", "1280",
                   "--batch", "4096", "--workers", "0", "--steps", "2", "--warmup", "1", "--json", timeout=900)
    result = json.loads(huge.stdout)
    assert huge.returncode == 1 and result["status"] == "oom", result["message"]
    space = tmp_path / "space.yaml"
    space.write_text("batch: [16, 4096]\nmodel: [yolov5x]\nimgsz: [1280]\nworkers: [0]\ncache: [none]\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = run_cli("search", "--data", str(demo_yaml), "--device", "0", "--space", str(space), "--quality", "probe",
                   "--probe-epochs", "1", "--probe-fraction", "0.25", "--probe-grow", "60", "--trials", "3", "--steps", "3", "--repeats", "0",
                   "--baseline", "model=yolov5x imgsz=1280 batch=16 workers=0", "--storage", url, "--no-report", cwd=tmp_path,
                   timeout=1500)
    assert "Traceback" not in done.stderr
    statuses = [t.user_attrs.get("status") for s in optuna.study.get_all_study_names(url)
                for t in optuna.load_study(study_name=s, storage=url).trials]
    assert "ok" in statuses and ({"oom", "infeasible"} & set(statuses)), statuses  # predicted or measured: never a crash


def test_peak_gpu_memory_is_predicted_within_15_percent(demo_yaml, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("batch: [8, 16, 32, 64]\nworkers: [2]\ncache: [none]\namp: [on]\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = run_cli("search", "--data", str(demo_yaml), "--device", "0", "--space", str(space), "--quality", "probe",
                   "--probe-epochs", "1", "--probe-fraction", "0.25", "--probe-grow", "60", "--trials", "4", "--steps", "5", "--repeats", "0",
                   "--baseline", "model=yolov5n imgsz=320 batch=8 workers=2", "--storage", url, "--no-report",
                   cwd=tmp_path, timeout=1500)
    assert done.returncode == 0, done.stderr
    errors = []
    for name in optuna.study.get_all_study_names(url):
        for trial in optuna.load_study(study_name=name, storage=url).trials:
            a = flat_attrs(trial.user_attrs)
            if a.get("status") == "ok" and a.get("predicted_peak_mb"):
                errors.append(abs(a["peak_gpu_mem_mb"] - a["predicted_peak_mb"]) / a["peak_gpu_mem_mb"])
    assert errors and max(errors) < 0.15, errors


def test_verify_runs_the_printed_command_on_the_gpu(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = run_cli("search", "--data", str(demo_yaml), "--device", "0", "--quality", "off", "--trials", "2", "--steps", "5",
                   "--repeats", "0", "--baseline", "model=yolov5n imgsz=320 batch=16 workers=2", "--storage", url,
                   "--study", "gpu-verify", "--no-report", cwd=tmp_path, timeout=1500)
    assert done.returncode == 0, done.stderr
    verify = run_cli("verify", "--storage", url, "--study", "gpu-verify", "--epochs", "1", cwd=tmp_path, timeout=900)
    assert verify.returncode == 0, verify.stderr + verify.stdout
    assert "error" in verify.stdout


@pytest.mark.parametrize("engine", ["ultralytics"])
def test_ddp_two_gpus_measures_each_rank(demo_yaml, engine):
    result = _trial(demo_yaml, "--device", "0,1", "--gpus", "2", "--batch", "32", "--engine", engine)
    assert result["status"] == "ok" and result["config"]["gpus"] == 2, result["message"]
    assert len(result["rank_images_per_s"]) == 2 and result["images_per_s"] > 0


def test_compile_on_cuda_measures_apart_and_keeps_the_loss(demo_yaml):
    result = _trial(demo_yaml, "--device", "0", "--batch", "16", "--compile", "default")
    assert result["status"] == "ok", result["message"]
    assert result["config"]["compile"] == "default" and result["compile_s"] is not None and result["compile_s"] > 0
    assert result["compile_loss_gap"] is not None and result["compile_loss_gap"] <= 0.01


def test_bf16_runs_where_the_gpu_has_it_and_is_refused_where_not(demo_yaml, tmp_path):
    from speedopt import machine

    if machine.bf16_supported("0"):
        result = _trial(demo_yaml, "--device", "0", "--batch", "16", "--amp", "bf16")
        assert result["status"] == "ok" and result["config"]["amp"] == "bf16", result["message"]
    else:  # a search's space cannot list it there: one line, exit 2
        space = tmp_path / "space.yaml"
        space.write_text("amp: [on, bf16]\n")
        done = run_cli("search", "--data", str(demo_yaml), "--device", "0", "--space", str(space), "--quality", "off",
                       "--storage", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
        assert done.returncode == 2 and "bf16 needs a GPU with bfloat16" in done.stderr


@pytest.mark.parametrize("value", ["on", "off", "default"])
def test_channels_last_is_run_as_asked_and_the_default_recorded_as_it_ran(demo_yaml, value):
    result = _trial(demo_yaml, "--device", "0", "--batch", "16", "--channels-last", value)
    assert result["status"] == "ok", result["message"]
    assert result["config"]["channels_last"] == ("on" if value == "default" else value)  # the trainer's default: on for CUDA
