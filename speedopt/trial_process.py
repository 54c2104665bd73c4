"""The inside of one trial: ``python -m speedopt.trial_process WORKDIR``.

Reads ``WORKDIR/request.json``, trains through the engine with telemetry running, and writes
``WORKDIR/result.json`` (atomically) whatever happens; progress goes to ``WORKDIR/progress.json``.
Network access is refused (see :mod:`speedopt.offline`). If the parent dies, this process kills
its own process group, so no trial or dataloader worker outlives a killed search.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from speedopt import engines
from speedopt.engines import TrainRun
from speedopt.measurement import Status, StepClock, TrialRejected, TrialResult
from speedopt.offline import forbid_network
from speedopt.telemetry import Sampler
from speedopt.trial import TrialRequest


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _die_with_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            time.sleep(0.5)

    threading.Thread(target=watch, name="speedopt-parent-watch", daemon=True).start()


def _classify(exc: BaseException) -> tuple[Status, str]:
    if isinstance(exc, TrialRejected):
        return exc.status, str(exc)
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, MemoryError) or "out of memory" in text.lower() or type(exc).__name__ == "OutOfMemoryError":
        return Status.OOM, first
    return Status.ERROR, first


def measure(request: TrialRequest, workdir: Path, blocked: list[str]) -> TrialResult:
    """Run the request through its engine and turn what happened into a TrialResult."""
    engine = engines.get(request.engine, yolov5_dir=request.yolov5_dir)
    progress_file = workdir / "progress.json"
    _write_json(progress_file, {"phase": "setup"})

    def progress(phase: str, done: int, of: int) -> None:
        _write_json(progress_file, {"phase": phase, "done": done, "of": of})

    gpu = None if request.device == "cpu" else int(request.device.split(",")[0])
    sampler = Sampler(gpu_index=gpu).start()
    clock = StepClock(request.warmup, request.steps, progress=progress)
    base = dict(
        requested=request.requested.to_dict(),
        device=request.device,
        engine=request.engine,
        engine_version=engine.version(),
        steps=request.steps,
        warmup=request.warmup,
        images_total=request.images_total,
    )
    started = time.perf_counter()
    try:
        engine.prepare(Path(request.cache_dir))
        run = TrainRun(
            data_yaml=request.data_yaml,
            knobs=request.knobs,
            device=request.device,
            images=request.images,
            images_total=request.images_total,
            epochs=request.epochs,
            workdir=workdir,
            seed=request.seed,
        )
        report = engine.train(run, clock)
        stats = clock.stats()
    except BaseException as exc:  # every failure becomes a status, never a crash
        sampler.stop()
        status, message = _classify(exc)
        return TrialResult(
            status=status,
            message=message,
            config=request.knobs.to_dict(),
            notes=request.notes,
            peak_ram_mb=sampler.peak_ram_mb,
            network_blocked=tuple(blocked),
            **base,
        )
    sampler.stop()
    cpu, gpu_util = sampler.means(stats.window)
    peak_gpu = None
    if request.device != "cpu":
        import torch

        peak_gpu = torch.cuda.max_memory_reserved(int(request.device)) / 2**20
    return TrialResult(
        status=Status.OK,
        message=f"measured {request.steps} steps after {request.warmup} warm-up steps",
        config=report.knobs.to_dict(),
        notes=request.notes + report.notes,
        images_per_s=stats.images_per_s,
        step_s_median=stats.step_s_median,
        step_s_p90=stats.step_s_p90,
        data_wait_fraction=stats.data_wait_fraction,
        setup_s=(clock.first_batch_at or started) - started,
        measured_s=stats.measured_s,
        peak_ram_mb=sampler.peak_ram_mb,
        peak_gpu_mem_mb=peak_gpu,
        gpu_util_mean=gpu_util,
        cpu_util_mean=cpu,
        images_used=report.images_used,
        network_blocked=tuple(blocked),
        **base,
    )


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    _die_with_parent()
    blocked: list[str] = []
    forbid_network(blocked)
    request = TrialRequest.from_json((workdir / "request.json").read_text())
    result = measure(request, workdir, blocked)
    _write_json(workdir / "result.json", result.to_dict())
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: trainer threads and loaders have nothing left to say


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
