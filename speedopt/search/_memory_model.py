"""Peak memory predicted before a trial runs: a line in the batch size through two short measured trials.

AutoBatch profiles one knob (batch) at a few sizes and fits a line; speedopt does the same for every
memory signature the search meets. GPU memory depends on the model, imgsz, AMP, frozen layers and the
GPUs' share of the batch, not on workers or the cache: two short trials of the real trainer at two
small batches (:data:`FIT_STEPS` measured steps, no workers, no cache) give the peak the trial itself
records (``torch.cuda.max_memory_reserved``), and the line through them predicts every other batch
(:class:`MemoryFit`). A config predicted above :data:`LIMIT` of the GPU's memory is infeasible without
running. On the CPU the same machinery predicts peak RAM (with dataloader workers) for ``cache=ram``:
the line at the same workers, plus the decoded images the trial caches (the trainers' own estimate,
without their safety margin), against the RAM available. Each measured trial keeps its prediction, so
the report shows predicted against measured.

A fit costs two short trials, so it runs only where it can decide something (:func:`speedopt.search._memory.could_bind`):
on a GPU, where the search varies batch or where :func:`bound`, an upper bound on the peak with no trial, comes near the
GPU's memory. Fits never compile (:func:`fit_knobs`): compile is decided once, on the winner, at the end of a search.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from speedopt.data import Dataset
from speedopt.knobs import COMPILE_OFF, KNOBS, Knobs

LIMIT = 0.90  # a config predicted above this share of the memory is infeasible
FIT_STEPS = 2  # measured steps of each fitting trial (after one warm-up step)
GPU_BATCHES = (8, 16)
CPU_BATCHES = (2, 4)


def kind_of(device: str) -> str:
    """``gpu`` (peak GPU memory) or ``ram`` (peak host RAM with workers, on the CPU)."""
    return "ram" if device == "cpu" else "gpu"


#: The stored keys' format (a study keeps its fits by key): the knobs each kind of peak depended on when keys were
#: first stored, written as below; a knob the registry adds to a kind since follows as `` knob=value``, only where it
#: differs from its default, so every key stored before it still matches.
_KEY_FORMAT = {"gpu": ("model", "imgsz", "amp", "freeze", "gpus"), "ram": ("model", "imgsz", "freeze", "workers", "data")}


def memory_key(knobs: Knobs, device: str) -> str:
    """The knobs peak memory depends on (the registry's :attr:`~speedopt.knobs.Knob.memory`; GPU: model, imgsz, amp,
    freeze, gpus, channels_last; RAM: model, imgsz, freeze, workers, data). Not compile: a fit never compiles."""
    kind = kind_of(device)
    values = knobs.to_dict()
    newer = "".join(f" {k.name}={values[k.name]}" for k in KNOBS.values()
                    if kind in k.memory and k.name not in _KEY_FORMAT[kind] and values[k.name] != k.default)
    if kind == "gpu":
        return f"gpu {knobs.model} {knobs.imgsz} amp={knobs.amp} freeze={knobs.freeze} gpus={knobs.gpus}{newer}"
    return f"ram {knobs.model} {knobs.imgsz} freeze={knobs.freeze} workers={knobs.workers} data={knobs.data}{newer}"


def fit_knobs(knobs: Knobs, device: str, batch: int) -> Knobs:
    """The knobs of one fitting trial: the signature at ``batch``, no cache, never compiled (GPU: no workers either)."""
    workers = 0 if kind_of(device) == "gpu" else knobs.workers
    return dataclasses.replace(knobs, batch=batch * knobs.gpus, cache="none", workers=workers, compile=COMPILE_OFF)


def fit_batches(device: str) -> tuple[int, int]:
    """The two batch sizes (per GPU) measured for a fit."""
    return GPU_BATCHES if kind_of(device) == "gpu" else CPU_BATCHES


@dataclass(frozen=True)
class MemoryFit:
    """Peak memory (MB) as a line in the batch, through two measured points of one memory signature."""

    key: str
    kind: str  # gpu or ram
    batches: tuple[int, int]
    peaks_mb: tuple[float, float]

    @property
    def slope_mb(self) -> float:
        """MB per image of batch (never below 0: noise must not predict less memory for a larger batch)."""
        (b1, b2), (m1, m2) = self.batches, self.peaks_mb
        return max(0.0, (m2 - m1) / (b2 - b1)) if b2 != b1 else 0.0

    def predict(self, batch: int) -> float:
        """Predicted peak MB at ``batch`` on the line."""
        return self.peaks_mb[0] + self.slope_mb * (batch - self.batches[0])

    def basis(self) -> str:
        (b1, b2), (m1, m2) = self.batches, self.peaks_mb
        return f"line through batch {b1}: {m1:.0f} MB and batch {b2}: {m2:.0f} MB ({self.slope_mb:.1f} MB per image)"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "batches": list(self.batches), "peaks_mb": list(self.peaks_mb)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryFit:
        b1, b2 = (int(b) for b in data["batches"])
        m1, m2 = (float(m) for m in data["peaks_mb"])
        return cls(str(data["key"]), str(data["kind"]), (b1, b2), (m1, m2))


@dataclass(frozen=True)
class Prediction:
    """A trial's predicted peak memory, and what it was predicted from."""

    kind: str
    peak_mb: float
    basis: str


def predict(fit: MemoryFit, knobs: Knobs, images: Dataset | None = None, used: int = 0) -> Prediction:
    """The peak of ``knobs`` (per GPU under DDP); with cache=ram on the CPU plus the decoded images the trial caches
    (the first ``used`` train images of ``images``, and the val split, as the trainers cache both)."""
    peak, basis = fit.predict(knobs.batch // max(1, knobs.gpus)), fit.basis()
    if fit.kind == "ram" and knobs.cache == "ram" and images is not None:
        cached = images.ram_cache_bytes(knobs.imgsz, (*images.train_images[:used], *images.val_images)) / 2**20
        peak += cached
        basis += f" + {cached:.0f} MB of decoded images cached at imgsz={knobs.imgsz}"
    return Prediction(fit.kind, peak, basis)


#: What :func:`bound` starts from: the classic YOLOv5 README's batch sizes for COCO at imgsz 640 with AMP, "shown for
#: V100-16GB" (``train.py --batch-size``): each scale trained at that batch within :data:`PRIOR_CARD_MB`.
PRIOR_BATCH = {"yolov5n": 128, "yolov5s": 64, "yolov5m": 40, "yolov5l": 24, "yolov5x": 16}
PRIOR_CARD_MB = 16384.0
PRIOR_IMGSZ = 640
#: For what those runs do not hold: the Ultralytics trainer's anchor-free head and its assigner (which grows with the
#: boxes per image), the allocator's reserve over what is allocated (a trial records ``max_memory_reserved``).
PRIOR_MARGIN = 2.0


def bound(knobs: Knobs) -> Prediction | None:
    """An upper bound on the peak GPU memory (per GPU) of ``knobs`` with no trial, from :data:`PRIOR_BATCH`; None for a
    model that is not a built-in scale (only a fit can say).

    At the README's batch B the peak, fixed part c (weights, optimiser, CUDA context) plus s per image, fits 16 GiB.
    The per-image part grows with the batch per GPU, the pixels and fp32 (x2 without AMP): ratio r. For r >= 1,
    c + s*B*r <= (c + s*B)*r, so 16 GiB x r bounds the peak; below 1 the whole 16 GiB does. Frozen layers only lower it.
    """
    scale = PurePath(knobs.model).stem.lower().removesuffix("u")  # a scale, its .yaml/.pt, Ultralytics' yolov5su.pt
    if scale not in PRIOR_BATCH:
        return None
    per_gpu = knobs.batch / max(1, knobs.gpus)
    ratio = per_gpu / PRIOR_BATCH[scale] * (knobs.imgsz / PRIOR_IMGSZ) ** 2 * (1 if knobs.amp else 2)
    peak = PRIOR_MARGIN * PRIOR_CARD_MB * max(1.0, ratio)
    basis = (f"bound with no trial: {scale} trains batch {PRIOR_BATCH[scale]} at imgsz {PRIOR_IMGSZ} with AMP in 16 GiB "
             f"(the YOLOv5 README's V100 batch), scaled by {max(1.0, ratio):.2f} and x{PRIOR_MARGIN:g}")
    return Prediction("gpu", peak, basis)


def refusal(prediction: Prediction, available_mb: float) -> str | None:
    """Why the config must not run (None when it may): predicted above :data:`LIMIT` of the memory there is."""
    if prediction.peak_mb <= LIMIT * available_mb:
        return None
    what = "GPU memory" if prediction.kind == "gpu" else "RAM"
    return (
        f"predicted peak {what} {prediction.peak_mb:.0f} MB is over {100 * LIMIT:.0f}% of the {available_mb:.0f} MB "
        f"available ({prediction.basis}); not run"
    )
