"""The absolute yardstick: a trial's model FLOPs per trained image and the share of its device's peak they reach.

FLOPs per trained image are an estimate: 3 x the forward FLOPs of the trainer's model at the trial's imgsz, as
the trainer itself counts them (the engine's :attr:`~speedopt.engines.EngineReport.forward_gflops`; the backward
pass costs about twice the forward). Frozen layers skip the weight gradients and, being the first layers, the
input gradients too, so with ``freeze`` > 0 the estimate is an upper bound, and its basis says so.

The peak is the device's dense (no 2:4 sparsity) datasheet peak for the precision the trial ran, from
:data:`PEAKS`, a small table of NVIDIA GPUs matched by the name torch or NVML reports. The precision rule:
``amp=bf16`` runs bf16, ``amp=on`` fp16 (the trainers' autocast dtype on CUDA), ``amp=off`` tf32 where the GPU
has TF32 tensor cores and cuDNN may use them (torch's default ``torch.backends.cudnn.allow_tf32=True``;
convolutions are nearly all of YOLOv5's FLOPs), fp32 otherwise. The share is per GPU: a rank's own images/s
against its own GPU's peak. A CPU, a GPU the table does not list, or a precision it has no figure for gives
"peak unknown" with the reason: never a made-up number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from speedopt.knobs import Precision

PeakPrecision = Literal["fp32", "tf32", "fp16", "bf16"]
BACKWARD_FACTOR = 3.0  # a trained image: its forward, and a backward of about twice the forward
CPU_UNKNOWN = "peak unknown on a CPU"
ESTIMATE = f"estimate: {BACKWARD_FACTOR:g} x the forward FLOPs, the trainer's count"  # the basis, wherever a share is printed


@dataclass(frozen=True)
class GpuPeak:
    """One GPU's dense datasheet peaks in TFLOP/s (None: the GPU has no tensor cores for that precision)."""

    name: str
    fp32: float
    tf32: float | None
    fp16: float | None
    bf16: float | None

    def of(self, precision: PeakPrecision) -> float | None:
        return {"fp32": self.fp32, "tf32": self.tf32, "fp16": self.fp16, "bf16": self.bf16}[precision]


# Dense peaks in TFLOP/s: NVIDIA's datasheets list tensor-core figures "with sparsity"; these are half of them.
# H100 SXM/PCIe/NVL, H200 SXM/NVL: H100 and H200 datasheets. B200: HGX B200 datasheet (per GPU). A100 (40 and
# 80 GB, SXM and PCIe alike): A100 datasheet. A10, L4, L40S, T4, V100: their datasheets (T4 and V100: fp16 tensor
# cores only; "mixed precision" is their fp16 figure). RTX 4090 / 3090: the Ada and Ampere GA102 whitepapers,
# FP16 and BF16 tensor with FP32 accumulate (what torch's autocast runs), TF32 tensor dense.
PEAKS: tuple[tuple[str, GpuPeak], ...] = (
    (r"\bH100\b.*\bNVL\b", GpuPeak("H100 NVL", 60.0, 417.5, 835.5, 835.5)),
    (r"\bH100\b.*\bPCIe\b", GpuPeak("H100 PCIe", 51.0, 378.0, 756.5, 756.5)),
    (r"\bH100\b", GpuPeak("H100 SXM", 67.0, 494.5, 989.5, 989.5)),
    (r"\bH200\b.*\bNVL\b", GpuPeak("H200 NVL", 60.0, 417.5, 835.5, 835.5)),
    (r"\bH200\b", GpuPeak("H200 SXM", 67.0, 494.5, 989.5, 989.5)),
    (r"\bB200\b", GpuPeak("B200", 75.0, 1100.0, 2250.0, 2250.0)),
    (r"\bA100\b", GpuPeak("A100", 19.5, 156.0, 312.0, 312.0)),
    (r"\bA10\b", GpuPeak("A10", 31.2, 62.5, 125.0, 125.0)),
    (r"\bL40S\b", GpuPeak("L40S", 91.6, 183.0, 362.05, 362.05)),
    (r"\bL4\b", GpuPeak("L4", 30.3, 60.0, 121.0, 121.0)),
    (r"\bT4\b", GpuPeak("T4", 8.1, None, 65.0, None)),
    (r"\bV100\b.*\bPCIE\b", GpuPeak("V100 PCIe", 14.0, None, 112.0, None)),
    (r"\bV100\b", GpuPeak("V100 SXM2", 15.7, None, 125.0, None)),
    (r"^(NVIDIA )?(GeForce )?RTX 4090$", GpuPeak("RTX 4090", 82.6, 82.6, 165.2, 165.2)),
    (r"^(NVIDIA )?(GeForce )?RTX 3090$", GpuPeak("RTX 3090", 35.6, 35.6, 71.0, 71.0)),
)
#: GPUs asked about often whose vendor publishes no datasheet peaks: named, so the reason is exact.
UNPUBLISHED = {r"\bA10G\b": "NVIDIA publishes no datasheet for the A10G (an AWS variant of the A10)"}


def peak_of(device_name: str) -> GpuPeak | None:
    """The table's entry for a GPU named as torch or NVML names it ("NVIDIA H100 80GB HBM3"), or None."""
    name = device_name.strip()
    return next((peak for pattern, peak in PEAKS if re.search(pattern, name, re.IGNORECASE)), None)


def precision_run(amp: Precision, peak: GpuPeak | None, cudnn_tf32: bool = True) -> PeakPrecision:
    """The precision a trial's math ran in (the module docstring's rule); ``cudnn_tf32``: torch's
    ``torch.backends.cudnn.allow_tf32`` as the trial ran."""
    if amp == "bf16":
        return "bf16"
    if amp:
        return "fp16"
    return "tf32" if cudnn_tf32 and peak is not None and peak.tf32 is not None else "fp32"


def trained_gflops(forward_gflops: float | None, how: str, freeze: int) -> tuple[float | None, str]:
    """GFLOPs per trained image from the trainer's forward count, with its basis (or why there is none)."""
    if not forward_gflops or forward_gflops <= 0:
        return None, f"not counted: {how}" if how else "not counted"
    basis = f"{ESTIMATE} ({how})"
    if freeze:
        basis += f"; freeze={freeze}: the frozen layers skip their backward, so this is an upper bound"
    return BACKWARD_FACTOR * forward_gflops, basis


def percent(share: float) -> str:
    """A share as a percentage with the digits a share of a peak warrants: 95%, 3.1%, 0.42%."""
    value = 100 * share
    return f"{value:.0f}%" if value >= 9.95 else f"{value:.1f}%" if value >= 0.995 else f"{value:.2g}%"


@dataclass(frozen=True)
class PeakShare:
    """The share of the device's dense peak a trial reached, or why it is unknown (``share`` None)."""

    share: float | None
    precision: PeakPrecision
    peak_tflops: float | None
    basis: str  # the peak and where it is from, or "peak unknown ..." with the reason


def peak_share(
    device_name: str | None, amp: Precision, images_per_s: float | None, gflops_per_image: float | None,
    cudnn_tf32: bool = True,
) -> PeakShare:
    """images/s x FLOPs per trained image / the device's dense peak for the precision run (``device_name`` None:
    the CPU). ``images_per_s``: this GPU's own (a DDP rank's), not a total over several."""
    peak = peak_of(device_name) if device_name else None
    precision = precision_run(amp, peak, cudnn_tf32)
    if not device_name:
        return PeakShare(None, precision, None, CPU_UNKNOWN)
    if peak is None:
        unlisted = f"{device_name} is not in speedopt's table of dense peaks"
        why = next((text for pattern, text in UNPUBLISHED.items() if re.search(pattern, device_name)), unlisted)
        return PeakShare(None, precision, None, f"peak unknown: {why}")
    top = peak.of(precision)
    if top is None:
        return PeakShare(None, precision, None, f"peak unknown: the {peak.name} datasheet lists no {precision} figure")
    basis = f"the {peak.name}'s dense {precision} peak, {top:g} TFLOP/s (NVIDIA's datasheet)"
    if not images_per_s or not gflops_per_image:
        return PeakShare(None, precision, top, f"{basis}; no share: nothing measured or counted")
    return PeakShare(images_per_s * gflops_per_image / 1000.0 / top, precision, top, basis)
