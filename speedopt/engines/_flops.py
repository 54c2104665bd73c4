"""A model's forward FLOPs per image at a trial's imgsz, counted as its trainer counts them.

The trainers print their model's GFLOPs in its summary (Ultralytics ``model_info``, which calls ``get_flops``;
classic ``model_info``). Both count with ``thop`` on the model: Ultralytics through ``get_flops(model, imgsz)``
(stride-aware proxies in ``ultralytics-thop``), classic YOLOv5 with thop on a stride-sized proxy image scaled by
``(imgsz / stride)**2``, exact for a fully convolutional net. ``get_flops`` gives 0 when its thop is missing or
fails, as it does where the classic ``thop`` package (its ``profile`` has no ``stride`` argument) shadows
``ultralytics-thop``; the count then falls back to the classic rule, on the same model, and says so.
Counted after the measured window (the trainer's model as it trained, unwrapped from DDP and torch.compile),
so nothing it does is timed. Used by :meth:`speedopt.engines.Engine.train`; the share of the device's peak is
:mod:`speedopt.measure._peak`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Counter = tuple[str, Callable[[Any, int], float]]  # the trainer's own count: (its name, count(model, imgsz) -> GFLOPs)


def unwrapped(model: Any) -> Any:
    """The plain model under DDP / DataParallel and torch.compile's wrapper."""
    import torch

    parallel = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    while True:
        inner = getattr(model, "_orig_mod", None)
        if inner is None and isinstance(model, parallel):
            inner = model.module
        if inner is None:
            return model
        model = inner


def forward_gflops(model: Any, imgsz: int, counter: Counter | None = None) -> tuple[float | None, str]:
    """GFLOPs of one forward pass at ``imgsz`` and how they were counted; (None, why) when nothing could count them.

    ``counter``: the trainer's own (Ultralytics ``get_flops``); without one, or where it counts nothing, thop
    on a stride-sized proxy scaled to ``imgsz`` (classic ``model_info``'s rule)."""
    core = unwrapped(model)
    fell_back = ""
    if counter is not None:
        name, count = counter
        try:
            counted = float(count(core, imgsz))
        except Exception:  # the trainer's count is its own: a failure here means no figure, never a failed trial
            counted = 0.0
        if counted > 0:
            return counted, f"{name} at imgsz {imgsz}"
        fell_back = f"; {name} counted nothing here, as it does where its thop is missing or another thop shadows it"
    try:
        import thop
    except ImportError:
        return None, f"no thop installed, which the trainer counts FLOPs with{fell_back}"
    try:
        import torch

        first = next(core.parameters())
        stride = max(int(core.stride.max()), 32) if hasattr(core, "stride") else 32
        proxy = torch.empty((1, first.shape[1], stride, stride), device=first.device, dtype=first.dtype)
        macs = float(thop.profile(core, inputs=(proxy,), verbose=False)[0])
    except Exception as exc:
        return None, f"thop failed on the trainer's model ({type(exc).__name__}: {str(exc)[:120]}){fell_back}"
    gflops = 2 * macs / 1e9 * (imgsz / stride) ** 2  # thop counts multiply-accumulates: 2 FLOPs each
    return gflops, f"thop on a {stride} px proxy scaled to imgsz {imgsz}, as classic YOLOv5's model_info counts{fell_back}"
