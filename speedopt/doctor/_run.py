"""``speedopt doctor``: every pre-flight check in one pass (:func:`diagnose`), and the ones a search must pass."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from speedopt import engines, machine
from speedopt.data import fingerprint, load
from speedopt.doctor import _dataset, _disk, _gpu, _host
from speedopt.doctor._check import Check, Diagnosis, Level
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import ram_cache_need


@dataclass(frozen=True)
class DoctorOptions:
    """What to check: the dataset (optional), the device, and the knobs of the run the user has in mind."""

    data: str | None = None
    device: str | None = None
    engine: str = "ultralytics"
    knobs: Knobs = field(default_factory=Knobs)  # the trainers' defaults: workers 8, batch 16, imgsz 640
    read_budget_s: float = 3.0  # the measured read throughput's time
    shm_path: Path = _host.SHM


def diagnose(options: DoctorOptions, on_check: Callable[[Check], None] | None = None) -> Diagnosis:
    """Run every check (each one's failure is a finding, never an exception); ``on_check`` hears each as it ends."""
    found: list[Check] = []

    def add(check: Check) -> None:
        found.append(check)
        if on_check:
            on_check(check)

    for step in (_gpu.torch_build, _gpu.gpus_visible, lambda: _gpu.device(options.device)):
        add(step())
    gpus = 0 if _device_kind(options.device) == "cpu" else max(1, machine.cuda_device_count())
    prefetch = engines.get(options.engine).prefetch_batches
    add(_host.cores(options.knobs, gpus))
    add(_host.affinity(gpus, _host.allowed_cpus(), os.cpu_count() or 1))
    add(_host.shm(options.knobs, prefetch, options.shm_path))
    for check in _data_checks(options):
        add(check)
    add(_dataset.loggers(options.engine))
    return Diagnosis(tuple(found))


def _device_kind(text: str | None) -> str:
    try:
        return "cpu" if machine.parse_device(text) == "cpu" else "cuda"
    except UsageError:
        return "cpu"


def _data_checks(options: DoctorOptions) -> list[Check]:
    """RAM and /dev/shm for cache=ram, the filesystem, read throughput and decode waste: with --data only (RAM and
    /dev/shm are reported without it)."""
    imgsz, shm = options.knobs.imgsz, _host.shm_usage(options.shm_path)
    if options.data is None:
        return [_host.ram(None, imgsz), _host.shm_cache(None, options.knobs, shm, options.shm_path)]
    try:
        ds = load(options.data)
    except UsageError as exc:
        exists = Path(options.data).exists()
        return [Check("dataset", Level.FAIL, str(exc)), *([] if exists else [_disk.filesystem(Path(options.data))])]
    fp = fingerprint(ds)
    images = ds.train_images
    folder = images[0].parent if images else ds.yaml_path.parent
    return [
        _dataset.dataset(ds, fp),
        _host.ram(ram_cache_need(ds, imgsz), imgsz),
        _host.shm_cache(ds.ram_cache_bytes(imgsz), options.knobs, shm, options.shm_path),
        _disk.filesystem(folder),
        _disk.read_speed(images, options.read_budget_s),
        _dataset.decode_waste(ds, fp, imgsz),
    ]


def refuse_fatal(device: str | None) -> None:
    """Raise the doctor's line (UsageError) when a search must not start: see :func:`speedopt.doctor._gpu.fatal`."""
    found = _gpu.fatal(device)
    if found is not None:
        raise UsageError(f"speedopt doctor: {found.line()}")
