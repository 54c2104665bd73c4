"""What limits a trial, in numbers, and which knob to turn first.

Kinds: ``memory-bound`` (out of memory, or within 10 % of the GPU's or host's memory),
``cache-fill-bound`` (building the cache is a large share of the projected run), ``decode-bound``
(data-bound on images at least twice imgsz: each is decoded at full size only to be shrunk),
``data-bound`` (the step waits for the dataloader a large share of the time), ``compute-bound``
(the rest: the model's forward/backward dominates), or the trial's failed status.
"""

from __future__ import annotations

from dataclasses import dataclass

from speedopt.machine import MachineFingerprint
from speedopt.measure import TrialResult
from speedopt.reporting._projection import Projection
from speedopt.status import Status

DATA_BOUND = 0.30  # share of step time spent waiting for batches
DECODE_RATIO = 2.0  # images this many times imgsz (long side) or more: decoding them is wasted work


@dataclass(frozen=True)
class Images:
    """The train images a trial read: mean file size and mean decoded size (from the study's records)."""

    mean_bytes: float
    long_side: int  # pixels, decoded
    prepared: bool = False  # a copy speedopt prepare made

    def ratio(self, imgsz: int) -> float:
        """How many times imgsz the long side is."""
        return self.long_side / imgsz

    def text(self) -> str:
        return f"long side {self.long_side} px, {self.mean_bytes / 2**10:.0f} KiB each on average"
NEAR_LIMIT = 0.90  # share of memory in use
CACHE_FILL_SHARE = 0.10  # share of the projected run spent building the cache


@dataclass(frozen=True)
class Bottleneck:
    """What limits a trial (``kind``), the numbers that say so, and the knob to turn first."""

    kind: str
    evidence: str
    advice: str


def bottleneck_of(
    result: TrialResult,
    machine: MachineFingerprint,
    projection: Projection | None = None,
    images: Images | None = None,
    prepare_gain: str = "",
) -> Bottleneck:
    """Classify one trial from its own measurements and the machine it ran on; ``images`` are the train
    images it read, ``prepare_gain`` what this study measured for a resized copy (a phrase, or "")."""
    cfg = result.config
    cores = machine.key.cpu_cores
    if result.status is Status.OOM:
        return Bottleneck("memory-bound", result.message, "lower batch (or imgsz); with cache=ram, fewer workers or cache=disk")
    if result.status is not Status.OK:
        return Bottleneck(result.status.value, result.message, "see the message; the config was not measured")
    gpus = machine.gpus
    if result.peak_gpu_mem_mb and gpus:
        share = result.peak_gpu_mem_mb / gpus[0].memory_mb
        if share >= NEAR_LIMIT:
            return Bottleneck(
                "memory-bound",
                f"peak GPU memory {result.peak_gpu_mem_mb:.0f} MB is {100 * share:.0f}% of {gpus[0].memory_mb} MB",
                "this batch is at the limit: a larger batch or imgsz will run out of memory",
            )
    ram_mb = machine.ram_total_gb * 1024
    if result.peak_ram_mb and result.peak_ram_mb / ram_mb >= NEAR_LIMIT:
        return Bottleneck(
            "memory-bound",
            f"peak host RAM {result.peak_ram_mb:.0f} MB is {100 * result.peak_ram_mb / ram_mb:.0f}% of {ram_mb:.0f} MB",
            "fewer workers, or cache=disk instead of ram",
        )
    if projection and projection.total_s and projection.build_s / projection.total_s >= CACHE_FILL_SHARE:
        return Bottleneck(
            "cache-fill-bound",
            f"building the dataset/cache takes {projection.build_s:.0f} s, {100 * projection.build_s / projection.total_s:.0f}% "
            f"of the projected {projection.epochs}-epoch run",
            "cache=none, or cache=disk once and reuse it across runs",
        )
    wait = result.data_wait_fraction or 0.0
    util = f"CPU {result.cpu_util_mean:.0f}%" if result.cpu_util_mean is not None else "CPU -"
    if result.gpu_util_mean is not None:
        util = f"GPU {result.gpu_util_mean:.0f}%, {util}"
    if wait >= DATA_BOUND and images is not None and not images.prepared and images.ratio(cfg.imgsz) >= DECODE_RATIO:
        gain = f" ({prepare_gain})" if prepare_gain else ""
        return Bottleneck(
            "decode-bound",
            f"images {images.ratio(cfg.imgsz):.1f} x larger than imgsz={cfg.imgsz} ({images.text()}), decoded at full "
            f"size every epoch; waits for data {100 * wait:.0f}% of each step ({util})",
            f"a pre-resized copy: `speedopt prepare --imgsz {cfg.imgsz}`, or search with --prepare png{gain}",
        )
    if wait >= DATA_BOUND:
        if cfg.workers < cores:
            advice = f"more dataloader workers (now {cfg.workers}, {cores} cores)"
        elif cfg.cache == "none":
            advice = "cache=ram (or disk) so images are not decoded every epoch"
        else:
            advice = "smaller imgsz or a pre-resized copy of the dataset: decoding and augmenting large images is the limit"
        return Bottleneck("data-bound", f"waits for data {100 * wait:.0f}% of each step ({util})", advice)
    if gpus and result.device != "cpu":
        if not cfg.amp:
            advice = "amp=on (mixed precision)"
        elif result.gpu_util_mean is not None and result.gpu_util_mean < 70:
            advice = "a larger batch: the GPU is not kept busy"
        else:
            advice = "a smaller model or imgsz, within the mAP-loss constraint"
    else:
        advice = "the CPU runs the model itself: a smaller model or imgsz within the mAP-loss constraint, or a GPU"
    return Bottleneck(
        "compute-bound",
        f"waits for data only {100 * wait:.0f}% of each step; median step {result.step_s_median or 0.0:.3f} s ({util})",
        advice,
    )
