"""The stand-in engine: a small conv net trained on the dataset's images, to exercise speedopt itself.

Neither real trainer runs DDP without CUDA, so on a machine without GPUs the multi-process path of a
trial (the ``gpus`` knob, the launcher, the ranks' clean-up) runs with this engine: it reads the
data.yaml's train images with OpenCV in a torch DataLoader (``workers``, ``batch``, ``imgsz`` as
asked; under DDP each rank takes ``batch // gpus``, as both trainers do), trains a tiny conv net
(wider for larger model scales) and, launched as a rank by ``torch.distributed.run``, wraps it in
``DistributedDataParallel`` on ``gloo`` (``nccl`` on CUDA) with the launch's collective timeout. The
step clock runs around each batch as in the real engines. It judges no accuracy (no probe), has no
cache modes and no frozen layers: a search on it measures the data path and the launcher, not YOLOv5.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from typing import Any

from speedopt.engines._base import Clock, Engine, EngineReport, TrainRun
from speedopt.engines._common import PG_TIMEOUT_ENV, SameBatch, ddp_rank, drain, images_read, to_device, workers_note
from speedopt.knobs import MODEL_SCALES
from speedopt.status import TrialFinished

_WIDTH = dict(zip(MODEL_SCALES, (8, 16, 32, 48, 64), strict=True))
_DEFAULT_PG_TIMEOUT_S = 1800.0  # torch's default for gloo


class StandinEngine(Engine):
    name = "standin"
    ddp_devices = ("cuda", "cpu")
    trains_yolov5 = False
    supports_ceilings = True

    def version(self) -> str | None:
        from speedopt.version import __version__

        return __version__

    def fixed_knobs(self, device: str) -> dict[str, tuple[Any, str]]:
        why = "the stand-in engine has no {}"
        return {**super().fixed_knobs(device), "cache": ("none", why.format("cache modes")), "freeze": (0, why.format("frozen layers"))}

    def train(self, run: TrainRun, clock: Clock) -> EngineReport:
        import torch
        from torch import nn

        torch.manual_seed(run.seed)
        _, world = ddp_rank()
        device = _device(run.device)
        loader = _loader(run, world)
        model: nn.Module = _net(_WIDTH.get(run.knobs.model, 16)).to(device)
        if world > 1:
            model = nn.parallel.DistributedDataParallel(model)  # all-reduces the gradients in each backward pass
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        batches: Any = SameBatch(loader, lambda batch: to_device(batch, device)) if run.mode == "compute" else loader
        try:
            if run.mode == "data":
                drain(loader, clock, lambda batch: int(batch[0].shape[0]))
            for epoch in range(max(1, run.epochs)):  # the clock ends training (TrialFinished) long before the last epoch
                set_epoch = getattr(loader.sampler, "set_epoch", None)
                if set_epoch is not None:  # DistributedSampler: a new shuffle each epoch
                    set_epoch(epoch)
                for images, targets in batches:
                    clock.batch_start()
                    images, targets = images.to(device), targets.to(device)
                    optimizer.zero_grad(set_to_none=True)
                    nn.functional.mse_loss(model(images), targets).backward()
                    optimizer.step()
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    clock.batch_end(int(images.shape[0]))
            raise RuntimeError(f"the stand-in engine ran out of its {run.epochs} epochs before the clock's window ended")
        except TrialFinished:
            pass
        finally:
            iterator = getattr(loader, "_iterator", None)
            if iterator is not None:
                iterator._shutdown_workers()  # persistent workers go now, not at interpreter exit
        files = loader.dataset.files
        ran = dataclasses.replace(run.knobs, workers=loader.num_workers, gpus=world)
        mean_bytes, long_side = images_read(files)
        return EngineReport(
            knobs=ran, images_used=len(files), notes=workers_note(run.knobs.workers, ran.workers, "the loader ran"),
            label_scan_s=0.0, image_bytes_mean=mean_bytes, image_long_side=long_side,
        )


def _device(device: str) -> Any:
    """``cpu``, or this rank's GPU of ``device`` (``0,1``: LOCAL_RANK picks one) with the process group joined."""
    import torch
    import torch.distributed as dist

    _, world = ddp_rank()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cpu") if device == "cpu" else torch.device("cuda", int(device.split(",")[local]))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        timeout = float(os.environ.get(PG_TIMEOUT_ENV) or _DEFAULT_PG_TIMEOUT_S)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout))
    return dev


class _Images:
    """The train images, decoded with OpenCV and resized to imgsz x imgsz; the target is each image's mean colour."""

    def __init__(self, files: list[str], imgsz: int):
        self.files, self.imgsz = files, imgsz

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import cv2
        import numpy as np
        import torch

        image = cv2.imread(self.files[index])
        if image is None:
            raise RuntimeError(f"cannot decode {self.files[index]}")
        image = cv2.resize(image, (self.imgsz, self.imgsz), interpolation=cv2.INTER_LINEAR)
        array = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float().div_(255)
        return array, array.mean(dim=(1, 2))


def _loader(run: TrainRun, world: int) -> Any:
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    from speedopt.data import load

    files = list(run.train_subset) or [str(p) for p in load(run.data_yaml).train_images[: run.images]]
    dataset = _Images(files, run.knobs.imgsz)
    sampler = DistributedSampler(dataset, seed=run.seed) if world > 1 else None
    workers = run.knobs.workers
    return DataLoader(
        dataset, batch_size=max(1, run.knobs.batch // world), shuffle=sampler is None, sampler=sampler,
        num_workers=workers, drop_last=True, persistent_workers=workers > 0,
        prefetch_factor=2 if workers else None, generator=torch.Generator().manual_seed(run.seed),
    )


def _net(width: int) -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.SiLU(),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.BatchNorm2d(2 * width), nn.SiLU(),
        nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, 3),
    )
