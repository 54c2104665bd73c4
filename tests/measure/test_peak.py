"""The absolute yardstick's arithmetic: the peak table, the precision rule, the share, and the FLOPs basis.

No GPU exists here: the GPU cases feed device names as torch or NVML report them ("NVIDIA H200") into the
functions; the real trainer's count is checked by the slow trial tests (tests/measure/test_trial.py)."""

import pytest

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.measure._peak import peak_of, peak_share, percent, precision_run, trained_gflops
from speedopt.status import Status


@pytest.mark.parametrize(
    ("device", "entry"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-40GB", "A100"), ("NVIDIA A100 80GB PCIe", "A100"), ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"), ("Tesla T4", "T4"), ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"), ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        # neighbours that are other cards: never matched to a near name
        ("NVIDIA A10G", None), ("NVIDIA L40", None), ("Tesla V100S-PCIE-32GB", None), ("NVIDIA GeForce RTX 3090 Ti", None),
        ("NVIDIA GeForce RTX 4090 D", None), ("NVIDIA GeForce GTX 1080", None),
    ],
)
def test_the_table_matches_each_card_by_its_reported_name_and_no_neighbour(device, entry):
    found = peak_of(device)
    assert (found.name if found else None) == entry


def test_the_precision_is_the_one_the_math_ran_in():
    h100, t4 = peak_of("NVIDIA H100 80GB HBM3"), peak_of("Tesla T4")
    assert precision_run("bf16", h100) == "bf16" and precision_run(True, h100) == "fp16"
    assert precision_run(False, h100) == "tf32"  # cuDNN convolutions may use TF32 tensor cores (torch's default)
    assert precision_run(False, h100, cudnn_tf32=False) == "fp32"
    assert precision_run(False, t4) == "fp32"  # no TF32 tensor cores
    assert precision_run(False, None) == "fp32"


def test_the_share_of_the_peak_is_images_x_flops_over_the_dense_peak():
    # issue 46's H200 study: yolov5s at 640 (about 24 GFLOPs forward, 72 per trained image), 291 images/s in bf16
    share = peak_share("NVIDIA H200", "bf16", 291.0, 72.0)
    assert share.peak_tflops == 989.5 and share.precision == "bf16"
    assert share.share == pytest.approx(291 * 72 / 1000 / 989.5)  # 2.1%
    assert percent(share.share) == "2.1%" and "dense bf16 peak, 989.5 TFLOP/s" in share.basis
    assert peak_share("NVIDIA H200", "bf16", None, 72.0).share is None  # nothing measured: no share, the peak known


@pytest.mark.parametrize(
    ("device", "amp", "says"),
    [
        (None, False, "peak unknown on a CPU"),
        ("NVIDIA GeForce GTX 1080", True, "peak unknown: NVIDIA GeForce GTX 1080 is not in speedopt's table"),
        ("NVIDIA A10G", True, "peak unknown: NVIDIA publishes no datasheet for the A10G"),
        ("Tesla T4", "bf16", "peak unknown: the T4 datasheet lists no bf16 figure"),
    ],
)
def test_an_unknown_peak_says_why_and_makes_up_no_number(device, amp, says):
    share = peak_share(device, amp, 100.0, 10.0)
    assert share.share is None and share.peak_tflops is None and share.basis.startswith(says)


def test_a_trained_image_is_three_forwards_an_upper_bound_with_frozen_layers():
    gflops, basis = trained_gflops(8.0, "thop at imgsz 640", 0)
    assert gflops == 24.0 and basis == "estimate: 3 x the forward FLOPs, the trainer's count (thop at imgsz 640)"
    _, frozen = trained_gflops(8.0, "thop", 10)
    assert "freeze=10: the frozen layers skip their backward, so this is an upper bound" in frozen
    assert trained_gflops(0.0, "no thop installed", 0) == (None, "not counted: no thop installed")
    assert trained_gflops(None, "", 0) == (None, "not counted")


def test_percent_keeps_the_digits_a_share_warrants():
    assert [percent(s) for s in (0.95, 0.0312, 0.0042, 1.0)] == ["95%", "3.1%", "0.42%", "100%"]


def test_a_stored_trial_from_before_the_yardstick_still_reads():
    knobs = Knobs()
    old = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=10.0).to_dict()
    for key in ("gflops_per_image", "flops_basis", "peak_share", "peak_tflops", "peak_precision", "peak_basis"):
        old.pop(key)
    back = TrialResult.from_dict(old)
    assert back.gflops_per_image is None and back.achieved_tflops is None and back.peak_percent is None
    assert back.peak_unknown == "peak unknown on a CPU"  # a CPU's peak is unknown whenever it was recorded
    gpu = TrialResult.from_dict({**old, "device": "0"})
    assert gpu.peak_unknown == ""  # not recorded: nothing is claimed
    now = TrialResult(Status.OK, "", knobs, knobs, "0", "ultralytics", images_per_s=291.0, gflops_per_image=72.0, peak_share=0.0212)
    assert TrialResult.from_dict(now.to_dict()) == now and now.achieved_tflops == pytest.approx(20.952)
