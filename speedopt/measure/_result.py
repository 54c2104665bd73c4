"""What one trial measured: the record that crosses from the trial to the study, the report and the CLI."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from speedopt.knobs import Knobs
from speedopt.measure._peak import CPU_UNKNOWN, ESTIMATE, percent
from speedopt.status import Status


@dataclass(frozen=True)
class TrialResult:
    """One trial's outcome and measurements; ``None`` where a figure was not measured."""

    status: Status
    message: str
    config: Knobs  # as run: every knob read back from the trainer
    requested: Knobs  # as asked
    device: str
    engine: str
    engine_version: str | None = None
    notes: tuple[str, ...] = ()
    images_per_s: float | None = None  # in total: under DDP (config.gpus > 1) the sum over the ranks
    rank_images_per_s: tuple[float | None, ...] = ()  # under DDP, each rank's own (None: that rank reported none)
    step_s_median: float | None = None
    step_s_p90: float | None = None
    data_wait_fraction: float | None = None
    setup_s: float | None = None
    measured_s: float | None = None
    wall_s: float | None = None
    peak_ram_mb: float | None = None
    peak_gpu_mem_mb: float | None = None
    gpu_util_mean: float | None = None
    cpu_util_mean: float | None = None
    torch_threads: int | None = None  # torch's intra-op threads as the steps ran (the printed command's: measure._threads)
    steps: int | None = None  # measured steps (the adaptive window's length)
    warmup: int | None = None  # warm-up batches before the window
    max_steps: int | None = None
    ci_rel: float | None = None  # 90% CI half-width of the mean step time, relative to it
    converged: bool | None = None  # the CI reached +/-5% before max_steps, and the rate stopped drifting
    step_s: tuple[float, ...] = field(default=(), repr=False)  # each measured step's seconds, in order
    warmup_s: tuple[float, ...] = field(default=(), repr=False)  # each warm-up batch's seconds, in order
    compile_s: float | None = None  # torch.compile's one-time cost: the warm-up steps beyond steady ones (compile trials)
    compile_loss_gap: float | None = None  # compiled vs eager loss on the first batch, relative (compile trials)
    optimizer: str = ""  # as the trainer resolved optimizer=auto for the user's whole run ("": not recorded)
    optimizer_args: tuple[str, ...] = ()  # the trainer arguments that train it in a run of any length
    optimizer_step_s: float | None = None  # one optimizer step (with the EMA update), median seconds
    accumulate: int | None = None  # batches per optimizer step in the window: the run's steady cadence
    optimizer_steps: int | None = None  # optimizer steps inside the measured window (steps / accumulate at that cadence)
    # The absolute yardstick (measure._peak): the model's GFLOPs per trained image, an estimate with its basis (3 x
    # the trainer's forward count), and the share of the GPU's dense datasheet peak reached for the precision run
    # (per GPU: rank 0's images/s on its GPU); None with the reason in peak_basis ("peak unknown on a CPU").
    gflops_per_image: float | None = None
    flops_basis: str = ""
    peak_share: float | None = None
    peak_tflops: float | None = None  # the dense peak compared against, TFLOP/s
    peak_precision: str = ""  # fp32, tf32, fp16 or bf16: the precision the trial's math ran in
    peak_basis: str = ""
    images_used: int | None = None
    images_total: int | None = None
    train_build_s: float | None = None  # train dataset build (label scan + cache fill) for images_used
    val_build_s: float | None = None
    val_images: int | None = None
    label_scan_s: float | None = None  # set-up time spent scanning labels (0.0: read from a cache; None: not recorded)
    image_bytes_mean: float | None = None  # the train images the trainer read: mean file size
    image_long_side: int | None = None  # and their mean long side (pixels, decoded size)
    predicted_peak_mb: float | None = None  # before running: GPU memory (on a GPU) or RAM (cache=ram on the CPU)
    predicted_kind: str | None = None  # "gpu": compare with peak_gpu_mem_mb; "ram": with peak_ram_mb
    predicted_basis: str = ""  # the line it came from (search._memory_model.MemoryFit)
    network_blocked: tuple[str, ...] = ()
    measure_started_at: float | None = None  # epoch seconds: the measurement held the host lock from here
    measure_ended_at: float | None = None
    log_tail: str = field(default="", repr=False)

    @property
    def per_gpu_images_per_s(self) -> float | None:
        """Images/s per process (per GPU): the total over ``config.gpus``."""
        return None if self.images_per_s is None else self.images_per_s / max(1, self.config.gpus)

    @property
    def achieved_tflops(self) -> float | None:
        """TFLOP/s per GPU the measured images/s amount to (an estimate: :attr:`gflops_per_image`'s basis)."""
        rate = self.per_gpu_images_per_s
        return None if rate is None or not self.gflops_per_image else rate * self.gflops_per_image / 1000.0

    @property
    def peak_percent(self) -> str | None:
        """The share of the device's peak as printed (3.1%), or None where the peak is unknown."""
        return None if self.peak_share is None else percent(self.peak_share)

    @property
    def peak_estimate(self) -> str:
        """The share of the peak as a phrase with its basis: "2.1% of its bf16 peak (estimate: 3 x the forward FLOPs,
        the trainer's count)"; "" where the peak is unknown."""
        if self.peak_share is None:
            return ""
        return f"{percent(self.peak_share)} of its {self.peak_precision} peak ({ESTIMATE})"

    @property
    def peak_unknown(self) -> str:
        """Why the share of the device's peak is unknown ("peak unknown on a CPU", also for a CPU trial recorded
        before the share was); "" where it is known or was not recorded."""
        if self.peak_share is not None:
            return ""
        return self.peak_basis or (CPU_UNKNOWN if self.device == "cpu" else "")

    @property
    def prediction_error(self) -> float | None:
        """(measured - predicted) / measured for the predicted peak memory (None: not predicted or not measured)."""
        measured = self.peak_gpu_mem_mb if self.predicted_kind == "gpu" else self.peak_ram_mb
        if self.predicted_peak_mb is None or not measured:
            return None
        return (measured - self.predicted_peak_mb) / measured

    @property
    def ok(self) -> bool:
        """Measured: the trial ran its steps and has a throughput."""
        return self.status is Status.OK and self.images_per_s is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the ``--json`` output and the trial's stored attrs)."""
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        data["config"] = self.config.to_dict()
        data["requested"] = self.requested.to_dict()
        data["notes"] = list(self.notes)
        data["network_blocked"] = list(self.network_blocked)
        data["step_s"] = list(self.step_s)
        data["warmup_s"] = list(self.warmup_s)
        data["rank_images_per_s"] = list(self.rank_images_per_s)
        data["optimizer_args"] = list(self.optimizer_args)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """Inverse of :meth:`to_dict`; keys it does not know are ignored (study attrs hold more), and a
        record that names only status and config (another tool's study) reads with empty text fields. A NaN or an
        infinity (a damaged or hostile import) reads as not measured: None, or left out of a series."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {"message": "", "device": "", "engine": "", **{k: _finite(v) for k, v in data.items() if k in known}}
        values["status"] = Status(values["status"])
        values["config"] = Knobs.from_dict(data["config"])
        values["requested"] = Knobs.from_dict(data.get("requested") or data["config"])
        values["notes"] = tuple(values.get("notes", ()))
        values["network_blocked"] = tuple(values.get("network_blocked", ()))
        values["step_s"] = tuple(v for v in values.get("step_s") or () if v is not None)
        values["warmup_s"] = tuple(v for v in values.get("warmup_s") or () if v is not None)
        values["rank_images_per_s"] = tuple(values.get("rank_images_per_s", ()))
        values["optimizer_args"] = tuple(str(v) for v in values.get("optimizer_args") or ())

        return cls(**values)


def _finite(value: Any) -> Any:
    """A stored value with NaN and infinities read as None (in a list: each item)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return [_finite(v) for v in value] if isinstance(value, list | tuple) else value
