"""The trial table shows what the trial read: its label scan and the images its trainer listed."""

from rich.console import Console

from speedopt.cli._render import trial_table
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.status import Status


def _text(result: TrialResult) -> str:
    console = Console(width=200, record=True)
    console.print(trial_table(result))
    return console.export_text()


def test_the_label_scan_and_the_images_read_are_shown_when_recorded():
    knobs = Knobs(imgsz=320, data="resized")
    shown = _text(TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", label_scan_s=0.0,
                              image_bytes_mean=40 * 2**10, image_long_side=320))
    assert "0.0 s (read from the label cache)" in shown and "long side 320 px, 40 KiB each" in shown
    assert "data=resized" in shown
    old = _text(TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics"))  # a record made before these figures
    assert "read from the label cache" not in old


def test_the_yardstick_is_shown_with_its_basis_or_why_unknown():
    # No GPU here: the share is one a trial on "NVIDIA H200" records (its basis as measure._peak writes it).
    knobs = Knobs(amp="bf16")
    shown = _text(TrialResult(Status.OK, "", knobs, knobs, "0", "ultralytics", images_per_s=291.0, gflops_per_image=72.0,
                              flops_basis="estimate: 3 x the forward FLOPs, the trainer's count (x)", peak_share=0.0212,
                              peak_precision="bf16", peak_basis="the H200 SXM's dense bf16 peak, 989.5 TFLOP/s (NVIDIA's datasheet)"))
    assert "72 GFLOPs, estimate: 3 x the forward FLOPs" in shown
    assert "2.1% of the H200 SXM's dense bf16 peak, 989.5 TFLOP/s (NVIDIA's datasheet): 21 TFLOP/s per GPU (estimate" in shown
    cpu = _text(TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", peak_basis="peak unknown on a CPU"))
    assert "peak unknown on a CPU" in cpu and "GPU busy (NVML)" in cpu
