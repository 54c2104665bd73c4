"""What limits a trial, from its own numbers: each kind and each piece of advice, forced by its inputs."""

import pytest

from speedopt.knobs import Knobs
from speedopt.machine import Gpu, MachineFingerprint, MachineKey
from speedopt.measure import TrialResult
from speedopt.reporting import Projection, bottleneck_of
from speedopt.status import Status

CPU = MachineFingerprint(MachineKey("cpu", 8, 32, ()), ram_total_gb=32.0)
GPU = MachineFingerprint(MachineKey("cpu", 8, 32, ("H200",)), ram_total_gb=32.0, gpus=(Gpu("H200", 10_000),))


def _result(device="cpu", **figures):
    config = figures.pop("config", Knobs(workers=2, cache="none", amp=False))
    base = dict(images_per_s=10.0, step_s_median=0.5, data_wait_fraction=0.05, cpu_util_mean=90.0, peak_ram_mb=1000.0)
    return TrialResult(Status.OK, "", config, config, device, "ultralytics", **{**base, **figures})


def test_failed_trials_keep_their_status_and_oom_is_memory_bound():
    oom = TrialResult(Status.OOM, "CUDA out of memory", Knobs(), Knobs(), "0", "ultralytics")
    assert bottleneck_of(oom, GPU).kind == "memory-bound"
    error = TrialResult(Status.ERROR, "boom", Knobs(), Knobs(), "cpu", "ultralytics")
    assert bottleneck_of(error, CPU).kind == "error"


def test_near_the_gpu_or_host_memory_is_memory_bound():
    assert bottleneck_of(_result("0", peak_gpu_mem_mb=9_500.0, gpu_util_mean=99.0), GPU).kind == "memory-bound"
    assert "95%" in bottleneck_of(_result("0", peak_gpu_mem_mb=9_500.0), GPU).evidence
    assert bottleneck_of(_result(peak_ram_mb=31 * 1024.0), CPU).kind == "memory-bound"


def test_cache_fill_that_dominates_the_projection():
    projection = Projection(10, 1000, 10.0, 200.0, 100.0, None, 1200.0, ())
    d = bottleneck_of(_result(), CPU, projection)
    assert d.kind == "cache-fill-bound" and "17%" in d.evidence


@pytest.mark.parametrize(
    "config, advice",
    [
        (Knobs(workers=2, cache="none"), "more dataloader workers (now 2, 8 cores)"),
        (Knobs(workers=8, cache="none"), "cache=ram (or disk)"),
        (Knobs(workers=8, cache="ram"), "pre-resized copy"),
    ],
)
def test_data_bound_advice_goes_workers_then_cache_then_resize(config, advice):
    d = bottleneck_of(_result(data_wait_fraction=0.6, config=config), CPU)
    assert d.kind == "data-bound" and advice in d.advice and "60%" in d.evidence


@pytest.mark.parametrize(
    "amp, util, advice",
    [(False, 99.0, "amp=on"), (True, 40.0, "a larger batch"), (True, 99.0, "a smaller model or imgsz")],
)
def test_compute_bound_on_a_gpu(amp, util, advice):
    d = bottleneck_of(_result("0", gpu_util_mean=util, config=Knobs(amp=amp)), GPU)
    assert d.kind == "compute-bound" and advice in d.advice


def test_compute_bound_on_the_cpu():
    d = bottleneck_of(_result(), CPU)
    assert d.kind == "compute-bound" and "the CPU runs the model" in d.advice and "5%" in d.evidence


def test_data_bound_on_images_far_above_imgsz_is_decode_bound_and_points_at_prepare():
    from speedopt.reporting._bottleneck import Images

    big = Images(mean_bytes=1.2 * 2**20, long_side=1920)
    d = bottleneck_of(_result(data_wait_fraction=0.6, config=Knobs(imgsz=320, workers=8)), CPU, None, big, "1.9x measured")
    assert d.kind == "decode-bound" and "6.0 x larger than imgsz=320" in d.evidence and "long side 1920 px" in d.evidence
    assert "speedopt prepare --imgsz 320" in d.advice and "1.9x measured" in d.advice
    # The same wait on images near imgsz, or on a prepared copy, is plain data-bound.
    near = Images(mean_bytes=40_000, long_side=480)
    assert bottleneck_of(_result(data_wait_fraction=0.6, config=Knobs(imgsz=320, workers=8)), CPU, None, near).kind == "data-bound"
    copy = Images(mean_bytes=40_000, long_side=1920, prepared=True)
    assert bottleneck_of(_result(data_wait_fraction=0.6, config=Knobs(imgsz=320, workers=8)), CPU, None, copy).kind == "data-bound"
    # Not waiting for data: compute-bound, whatever the image size.
    assert bottleneck_of(_result(data_wait_fraction=0.05, config=Knobs(imgsz=320)), CPU, None, big).kind == "compute-bound"


def test_the_gain_a_copy_bought_is_read_from_the_twin_trial_with_every_other_knob_equal():
    from speedopt.quality import Feasibility
    from speedopt.reporting._images import prepare_gain
    from speedopt.study import TrialRecord

    def record(number, speed, **knobs):
        config = Knobs(imgsz=160, workers=0, amp=False, **knobs)
        return TrialRecord(number, _result(images_per_s=speed, config=config), Feasibility.FEASIBLE)

    done = [record(0, 28.0), record(1, 40.0, cache="ram"), record(2, 42.0, data="resized"), record(3, 40.0, cache="ram", data="resized")]
    own = prepare_gain(done, done[0].config)
    assert "1.50x for this config" in own and "trial 2 42.0 vs trial 0 28.0" in own
    assert "1.25x" in prepare_gain(done)  # no config given: the median over both pairs (1.5 and 1.0)
    assert prepare_gain(done[:2]) == ""  # no pair: nothing claimed
