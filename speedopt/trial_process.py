"""The inside of one trial: ``python -m speedopt.trial_process WORKDIR``.

Reads the request, trains through the engine with telemetry running, and writes the result
whatever happens (see :mod:`speedopt.isolation` for the files, the network guard and the
die-with-parent watch that keeps a killed search from leaving trials behind).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from speedopt import engines, isolation
from speedopt.engines import TrainRun
from speedopt.measurement import Status, StepClock, TrialResult, status_of
from speedopt.telemetry import Sampler
from speedopt.trial import TrialRequest


def measure(request: TrialRequest, workdir: Path, blocked: list[str]) -> TrialResult:
    """Run the request through its engine and turn what happened into a TrialResult."""
    engine = engines.get(request.engine, yolov5_dir=request.yolov5_dir)
    isolation.child_progress(workdir, phase="setup")

    def progress(phase: str, done: int, of: int) -> None:
        isolation.child_progress(workdir, phase=phase, done=done, of=of)

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
        status, message = status_of(exc)
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
        train_build_s=report.train_build_s,
        val_build_s=report.val_build_s,
        val_images=report.val_images,
        network_blocked=tuple(blocked),
        **base,
    )


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    text, blocked = isolation.child_start(workdir)
    result = measure(TrialRequest.from_json(text), workdir, blocked)
    isolation.child_finish(workdir, result.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
