"""One trial: prepare and check the request here, then measure it in an isolated subprocess.

The subprocess (:mod:`speedopt.trial_process`) gets a clean CUDA context, and its dataloader
workers and RAM cache die with it. It runs in its own session under a timeout; its run folders
live in a private temporary folder removed afterwards; disk-cache files it adds to the dataset are
removed too (an existing ``.npy`` is read by the trainer in *every* cache mode, so leftovers would
falsify later trials). Files the user already had are never touched.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from speedopt import dataset as dataset_mod
from speedopt import engines, isolation, knobs as knobs_mod, machine
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measurement import Status, TrialResult
from speedopt.offline import cache_dir

RAM_CACHE_MARGIN = 1.0  # as Ultralytics' check_cache_ram: the estimate must fit twice into available RAM
DEFAULT_EPOCHS = 100  # the trainer's default; sets the LR schedule and optimizer choice as the full run would


@dataclass(frozen=True)
class TrialRequest:
    """A checked, ready-to-run trial: crosses into the trial process as JSON."""

    data_yaml: str
    knobs: Knobs  # as they will run (normalised, adjusted to this machine)
    requested: Knobs  # as the user asked
    device: str
    engine: str = "ultralytics"
    yolov5_dir: str | None = None  # the classic engine's checkout (absolute); None: the yolov5 package
    steps: int = 20
    warmup: int = 5
    timeout_s: float = 900.0
    epochs: int = DEFAULT_EPOCHS
    images: int = 0  # train images the trial uses
    images_total: int = 0
    seed: int = 0
    cache_dir: str = ""
    notes: tuple[str, ...] = ()
    infeasible: str | None = None  # reason, when the request must not run at all

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> TrialRequest:
        data = json.loads(text)
        data["knobs"] = Knobs(**data["knobs"])
        data["requested"] = Knobs(**data["requested"])
        data["notes"] = tuple(data["notes"])
        return cls(**data)


def prepare(
    data: str,
    requested: Knobs,
    device: str | None = None,
    engine: str = "ultralytics",
    steps: int = 20,
    warmup: int = 5,
    timeout_s: float = 900.0,
    epochs: int = DEFAULT_EPOCHS,
    seed: int = 0,
    ram_limit_bytes: int | None = None,
    yolov5_dir: str | None = None,
) -> TrialRequest:
    """Check every input (raising UsageError) and decide how the trial runs on this machine."""
    if steps < 2:
        raise UsageError(f"--steps must be at least 2 (measured steps), got {steps}")
    if warmup < 1:
        raise UsageError(f"--warmup must be at least 1 (the first batches build workers and caches), got {warmup}")
    if timeout_s <= 0:
        raise UsageError(f"--timeout must be positive seconds, got {timeout_s}")
    eng = engines.get(engine, yolov5_dir=yolov5_dir)
    if eng.version() is None:
        raise UsageError(f"the {engine} trainer is not installed; {eng.install_hint or f'pip install {engine}'}")
    ds = dataset_mod.load(data)
    knobs, notes = knobs_mod.validate(requested)
    dev = machine.parse_device(device)
    for knob, (value, why) in eng.fixed_knobs(dev).items():
        knobs = dataclasses.replace(knobs, **{knob: value})
        notes.append(f"{knob}={_knob_text(value)}: {why}")
    if knobs.amp and dev == "cpu":
        knobs = dataclasses.replace(knobs, amp=False)
        notes.append("amp=off: AMP needs CUDA and this trial runs on the CPU")
    total = len(ds.train_images)
    needed = (warmup + steps) * knobs.batch
    images = min(total, needed)
    if images < total:
        notes.append(f"trains on {images} of {total} images: enough for {warmup}+{steps} batches of {knobs.batch}")
    infeasible = None
    if knobs.cache == "ram":
        need = dataset_mod.estimate_ram_cache_bytes(ds.train_images, knobs.imgsz) * (1 + RAM_CACHE_MARGIN)
        free = psutil.virtual_memory().available
        if ram_limit_bytes is not None:
            free = min(free, ram_limit_bytes)
        if need > free:
            infeasible = (
                f"cache=ram needs about {need / 2**30:.1f} GiB for {total} images at imgsz={knobs.imgsz} "
                f"(estimate from 30 sampled images, with the trainer's 100% margin) "
                f"but only {free / 2**30:.1f} GiB is available"
                + (" (--ram-limit)" if ram_limit_bytes is not None and free == ram_limit_bytes else "")
            )
    return TrialRequest(
        data_yaml=str(ds.yaml_path),
        knobs=knobs,
        requested=requested,
        device=dev,
        engine=engine,
        yolov5_dir=str(Path(yolov5_dir).expanduser().resolve()) if yolov5_dir else None,
        steps=steps,
        warmup=warmup,
        timeout_s=timeout_s,
        epochs=epochs,
        images=images,
        images_total=total,
        seed=seed,
        cache_dir=str(cache_dir()),
        notes=tuple(notes),
        infeasible=infeasible,
    )


def _knob_text(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _npy_files(request: TrialRequest) -> set[Path]:
    """Disk-cache files beside the images this trial uses (the trainer caches the val split too)."""
    ds = dataset_mod.load(request.data_yaml)
    images = ds.train_images[: request.images] + ds.val_images
    return {p.with_suffix(".npy") for p in images if p.with_suffix(".npy").exists()}


def _without_run(request: TrialRequest, status: Status, message: str, **extra: Any) -> TrialResult:
    return TrialResult(
        status=status,
        message=message,
        config=request.knobs.to_dict(),
        requested=request.requested.to_dict(),
        device=request.device,
        engine=request.engine,
        engine_version=engines.get(request.engine, yolov5_dir=request.yolov5_dir).version(),
        notes=request.notes,
        steps=request.steps,
        warmup=request.warmup,
        images_total=request.images_total,
        **extra,
    )


def run(request: TrialRequest, progress: Callable[[dict[str, Any]], None] | None = None) -> TrialResult:
    """Measure the request in a subprocess; always returns a result, whatever happens inside."""
    if request.infeasible:
        return _without_run(request, Status.INFEASIBLE, request.infeasible)
    eng = engines.get(request.engine, yolov5_dir=request.yolov5_dir)
    npy_before = _npy_files(request) if request.knobs.cache == "disk" else set()
    try:
        done = isolation.run_isolated(
            "speedopt.trial_process",
            request.to_json(),
            eng.environment(Path(request.cache_dir)),
            request.timeout_s,
            progress,
        )
    finally:
        if request.knobs.cache == "disk":
            for leftover in _npy_files(request) - npy_before:
                leftover.unlink(missing_ok=True)
    return _collect(request, done)


def _collect(request: TrialRequest, done: isolation.Finished) -> TrialResult:
    tail, wall = done.log_tail, done.wall_s
    if done.timed_out:
        state = done.last_progress or {"phase": "setup"}
        where = state["phase"] + (f" {state['done']}/{state['of']}" if "done" in state else "")
        return _without_run(
            request, Status.TIMEOUT, f"trial exceeded --timeout {request.timeout_s:g} s during {where}", wall_s=wall, log_tail=tail
        )
    if done.result is not None:
        data = {**done.result, "wall_s": wall}
        if data["status"] != Status.OK.value:
            data["log_tail"] = tail
        return TrialResult.from_dict(data)
    status, message = done.failure()
    return _without_run(request, status, message, wall_s=wall, log_tail=tail)
