"""What only a GPU can show: AMP (with NVML telemetry), bf16, channels_last, deterministic off, memory prediction,
verify of the printed command, compile decided once at the end of a search, DDP (2 GPUs) and CUDA OOM as a status.

Run on a GPU machine by ``benchmarks/gpu_check.sh``: one pytest process, tests in this file's order, one at a time
(never two trials on one GPU at once), each under ``GPU_TEST_LIMIT_S`` (90 s, tests/gpu/conftest.py); skipped
elsewhere. yolov5n at 320 px, 5 measured steps; the trials fork from the session's warm worker (torch and the
trainer imported once), except the OOM one, which runs last, in a process of its own.

Time per test on one H100 or H200: ESTIMATES, not measurements, from issue 46's figures (a cold trial about 16 s
with its imports, the tier's first four tests 65 s on an H200; a compiled trial 104 s) and what each test runs:
  amp on/off              ~30 s  the warm worker's start (~10 s) and 2 forked trials (~10 s each)
  channels_last off       ~10 s  1 forked trial
  bf16                    ~10 s  1 forked trial
  deterministic off       ~10 s  1 forked trial
  memory prediction       ~45 s  a search: set-up, a memory fit (2 short jobs), 2 trials at batch 32
  verify                  ~30 s  the printed `yolo` command, 1 epoch, in a fresh Python
  compile at the end      60-90 s  a search of 2 eager trials, then one compile decision (cold: the riskiest
                                 against its 90 s limit; a timeout here says the decision does not fit)
  DDP                     skipped on one GPU
  OOM                     ~30 s  yolov5x at 1280 px, batch 128, in its own `speedopt trial` process
  whole tier              ~235-265 s, with pytest's start (gpu_check.sh gives it 285 s)
"""

import json

import optuna
import pytest

from speedopt.study import flat_attrs
from tests.conftest import run_cli, run_in_process, shared_warm_worker

TRIAL_TIMEOUT_S = "75"  # the trial's own limit (its job killed), inside the test's 90 s
GPU_TRIAL = ["trial", "--model", "yolov5n", "--imgsz", "320", "--workers", "2", "--steps", "5", "--warmup", "2",
             "--device", "0", "--timeout", TRIAL_TIMEOUT_S, "--json"]
#: A search's flags for a test: short trials, no ceiling jobs, no stop at the ceiling, no pruning, no report.
SHORT_SEARCH = ["--device", "0", "--steps", "5", "--max-steps", "5", "--warmup", "2", "--trial-timeout", "60",
                "--ceiling-rank", "off", "--no-stop-at-ceiling", "--prune-margin", "0", "--no-report"]


def _trial(demo_yaml, *args: str) -> dict:
    """``speedopt trial --json`` in this process, its job forked from the session's warm worker."""
    from speedopt.measure import _warm

    with _warm.using(shared_warm_worker()):
        done = run_in_process(*GPU_TRIAL, "--data", str(demo_yaml), *args)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def _search(*args: str, cwd) -> str:
    """``speedopt search`` in this process, its jobs forked from the session's warm worker; what it printed."""
    done = run_cli("search", *SHORT_SEARCH, *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def _stored_trials(url: str) -> list[dict]:
    """Every trial of every study in the storage (the search's and its fits'), as flat attrs."""
    return [flat_attrs(t.user_attrs) for name in optuna.study.get_all_study_names(url)
            for t in optuna.load_study(study_name=name, storage=url).trials]


def test_amp_on_and_off_both_measure_and_amp_uses_less_memory(demo_yaml):
    """Also NVML telemetry, the share of the GPU's peak, and channels_last left to the trainer: recorded as it ran (on, for CUDA training)."""
    on = _trial(demo_yaml, "--batch", "32", "--amp", "on")
    off = _trial(demo_yaml, "--batch", "32", "--amp", "off")
    assert on["status"] == off["status"] == "ok", (on["message"], off["message"])
    assert on["config"]["amp"] is True and off["config"]["amp"] is False
    assert on["peak_gpu_mem_mb"] < off["peak_gpu_mem_mb"]
    for result in (on, off):
        assert 0 <= result["gpu_util_mean"] <= 100 and result["peak_gpu_mem_mb"] > 50
        assert result["config"]["channels_last"] == "on"  # asked: default
        # the absolute yardstick beside NVML's busy share: the share of the card's dense peak for the precision it
        # ran, where the table lists the card, or why not
        assert result["gflops_per_image"] > 0
        if result["peak_share"] is not None:
            assert 0 < result["peak_share"] < 1 and "dense" in result["peak_basis"]
        else:
            assert result["peak_basis"].startswith("peak unknown: "), result["peak_basis"]
    assert on["peak_precision"] in ("fp16", None)


def test_channels_last_off_is_run_as_asked(demo_yaml):
    result = _trial(demo_yaml, "--batch", "16", "--channels-last", "off")
    assert result["status"] == "ok", result["message"]
    assert result["config"]["channels_last"] == "off"


def test_bf16_runs_where_the_gpu_has_it_and_is_refused_where_not(demo_yaml, tmp_path):
    from speedopt import machine

    if machine.bf16_supported("0"):
        result = _trial(demo_yaml, "--batch", "16", "--amp", "bf16")
        assert result["status"] == "ok" and result["config"]["amp"] == "bf16", result["message"]
    else:  # a search's space cannot list it there: one line, exit 2
        space = tmp_path / "space.yaml"
        space.write_text("amp: [on, bf16]\n")
        done = run_cli("search", "--data", str(demo_yaml), "--device", "0", "--space", str(space), "--quality", "off",
                       "--storage", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
        assert done.returncode == 2 and "bf16 needs a GPU with bfloat16" in done.stderr


def test_deterministic_off_is_asked_and_run(demo_yaml):
    result = _trial(demo_yaml, "--batch", "16", "--deterministic", "off")
    assert result["status"] == "ok", result["message"]
    assert result["requested"]["deterministic"] is False and result["config"]["deterministic"] is False


@pytest.fixture(scope="module")
def batch32_study(demo_yaml, tmp_path_factory) -> str:
    """A search at batch 32, quality off (the batch stays the baseline's): its memory fit measures batch 8 and 16,
    so both trials' peaks are predicted off that line. Its set-up counts in the first test that reads it."""
    work = tmp_path_factory.mktemp("gpu-study")
    space = work / "space.yaml"
    space.write_text("workers: [2, 4]\ncache: [none]\n")
    url = f"sqlite:///{work / 's.db'}"
    _search("--data", str(demo_yaml), "--space", str(space), "--quality", "off", "--trials", "2", "--repeats", "0",
            "--baseline", "model=yolov5n imgsz=320 batch=32 workers=2", "--storage", url, "--study", "gpu-study",
            cwd=work)
    return url


def test_peak_gpu_memory_is_predicted_within_15_percent(batch32_study):
    errors = [abs(a["peak_gpu_mem_mb"] - a["predicted_peak_mb"]) / a["peak_gpu_mem_mb"]
              for a in _stored_trials(batch32_study) if a.get("status") == "ok" and a.get("predicted_peak_mb")]
    assert errors and max(errors) < 0.15, errors


def test_verify_runs_the_printed_command_on_the_gpu(batch32_study, tmp_path):
    verify = run_cli("verify", "--storage", batch32_study, "--study", "gpu-study", "--epochs", "1", "--timeout", "75",
                     cwd=tmp_path, timeout=85)
    assert verify.returncode == 0, verify.stderr + verify.stdout
    assert "error" in verify.stdout


def test_compile_is_decided_once_at_the_end_and_no_trial_compiles(demo_yaml, tmp_path):
    """A space listing compile modes: every trial runs eager, and one decision on the winner closes the search."""
    space = tmp_path / "space.yaml"
    space.write_text("compile: [off, default]\nworkers: [2, 4]\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    printed = _search("--data", str(demo_yaml), "--space", str(space), "--quality", "off", "--trials", "2",
                      "--finalists", "1", "--repeats", "1", "--no-ablation",
                      "--baseline", "model=yolov5n imgsz=320 batch=16 workers=2", "--storage", url, cwd=tmp_path)
    configs = [a["config"] for a in _stored_trials(url) if a.get("config")]
    assert configs and all(c["compile"] == "off" for c in configs), configs
    decision = [line for line in printed.splitlines() if line.startswith("torch.compile:")]
    assert decision and ("compile=default" in decision[0] or "keep eager" in decision[0]), printed[-3000:]


@pytest.mark.parametrize("engine", ["ultralytics"])
def test_ddp_two_gpus_measures_each_rank(demo_yaml, engine):
    result = _trial(demo_yaml, "--device", "0,1", "--gpus", "2", "--batch", "32", "--engine", engine)
    assert result["status"] == "ok" and result["config"]["gpus"] == 2, result["message"]
    assert len(result["rank_images_per_s"]) == 2 and result["images_per_s"] > 0


def test_a_batch_that_cannot_fit_ends_oom_as_a_status(tmp_path):
    """Last in the file, so it runs last: nothing waits behind the memory it takes, and its own `speedopt trial`
    process (the trial's job a child of it) gives all of it back when it ends.

    Ultralytics caps the batch at the train set (a 48-image set ran yolov5x at 1280 px "batch 4096" as 48, and
    it fit in 141 GB), so the set here holds the whole batch. That a search goes on past an oom trial is the
    CPU suite's (tests/search/test_ablation.py, tests/search/test_finals.py)."""
    from speedopt import data as demo_data

    images = demo_data.generate(tmp_path / "shapes", demo_data.DemoSpec(train=128, val=4, width=160, height=120, seed=2))
    huge = run_cli("trial", "--data", str(images), "--device", "0", "--model", "yolov5x", "--imgsz", "1280",
                   "--batch", "128", "--workers", "4", "--steps", "2", "--warmup", "1", "--timeout", "75", "--json",
                   process=True, timeout=85)
    result = json.loads(huge.stdout)
    assert huge.returncode == 1 and result["status"] == "oom", result["message"]
