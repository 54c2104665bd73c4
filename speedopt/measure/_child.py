"""The one child entry point: ``python -m speedopt.measure._child WORKDIR``.

Reads the job from ``WORKDIR/request.json``, dies with its parent, refuses the network, runs the job
through its engine, and writes ``result.json`` whatever happens: every exception becomes a status
through :func:`speedopt.status.status_of`, here and only here. Progress goes to ``progress.json``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from speedopt import engines
from speedopt.engines import Engine, EngineReport, ProbeRun, TrainRun
from speedopt.isolation import PARENT_ENV, die_with
from speedopt.knobs import COMPILE_OFF
from speedopt.measure._clock import StepClock, one_time_s
from speedopt.measure._jobs import Job, LabelsJob, ProbeJob, ValidateJob, job_from_json
from speedopt.measure._launch import AGENT_ENV
from speedopt.measure._peak import peak_share, trained_gflops
from speedopt.measure._request import TrialRequest
from speedopt.measure._telemetry import Sampler
from speedopt.measure._threads import apply, at_start, current
from speedopt.measure._workdir import result_name, write_json
from speedopt.offline import forbid_network
from speedopt.status import Status, status_of

Publish = Callable[..., None]


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    start = at_start()  # before the engine imports its trainer: what a fresh process gets here
    _die_with_parent()
    rank, _ = engines.ddp_rank()  # a DDP rank under torch.distributed.run (0 otherwise): rank 0 speaks for the job
    blocked: list[str] = []
    forbid_network(blocked)
    job = job_from_json((workdir / "request.json").read_text())

    def publish(**state: Any) -> None:
        if rank == 0:
            write_json(workdir / "progress.json", state)

    publish(phase="setup")
    figures: dict[str, Any] = {}
    try:
        engine = job.engine_spec.engine
        engine.prepare(Path(job.cache_dir))
        apply(engine.torch_threads(start.omp_env, start.torch_default))  # the printed command's threads, cold or warm
        status, message = Status.OK, execute(job, engine, workdir, figures, publish)
    except BaseException as exc:  # every failure becomes a status, never a crash
        status, message = status_of(exc)
    result = {"status": status.value, "message": message, "figures": figures, "network_blocked": blocked}
    write_json(workdir / result_name(rank), result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # at once: trainer threads and loader workers have nothing left to say


def execute(job: Job, engine: Engine, workdir: Path, figures: dict[str, Any], publish: Publish) -> str:
    """Run one job; fills ``figures`` as it goes (so a failure keeps what was measured); returns the message."""
    if isinstance(job, TrialRequest):
        return _trial(job, engine, workdir, figures, publish)
    if isinstance(job, LabelsJob):
        publish(phase="labels")
        build = engine.build_label_cache(job.data_yaml, workdir)
        figures.update(build=build.to_dict())
        reused = all(s.reused for s in build.splits)
        return f"label cache of {build.images} images {'found valid' if reused else 'built'} in {build.seconds:.1f} s"
    if isinstance(job, ValidateJob):
        run = ProbeRun(job.data_yaml, job.knobs, job.device, 1, 1.0, 0, workdir, job.weights)
        seconds, images, save_s = engine.time_validation(run)
        figures.update(val_s=seconds, val_images=images, save_s=save_s)
        saved = f", saved the checkpoint in {save_s:.2f} s" if save_s is not None else ""
        return f"validated {images} images in {seconds:.2f} s{saved}"
    assert isinstance(job, ProbeJob)
    probe = ProbeRun(job.data_yaml, job.knobs, job.device, job.epochs, job.fraction, job.seed, workdir, job.weights, job.run_epochs,
                     job.run_images)
    scores = engine.probe(probe, lambda done, of: publish(phase="epoch", done=done, of=of))
    figures.update(map50=scores.map50, map50_95=scores.map50_95, images=scores.images, optimizer=scores.optimizer)
    return f"trained {probe.epochs} epochs on {scores.images} images"


def _trial(job: TrialRequest, engine: Engine, workdir: Path, figures: dict[str, Any], publish: Publish) -> str:
    """Train through the engine with telemetry running; the figures of a TrialResult."""
    gpu = _gpu_index(job.device)
    sampler = Sampler(gpu_index=gpu).start()
    clocks: list[StepClock] = []

    world = engines.ddp_rank()[1]

    def tell(phase: str, done: int, of: int) -> None:  # with the running images/s once steps are measured
        rate = clocks[0].running() if clocks and phase == "measure" else None
        rate = None if rate is None else rate * world  # under DDP rank 0 speaks for all: the total, as the result's
        publish(phase=phase, done=done, of=of, **({"rate": rate} if rate else {}))

    clock = StepClock(job.warmup, job.steps, progress=tell, max_steps=job.max_steps, queued=job.queued)
    clocks.append(clock)
    started = time.perf_counter()
    run = TrainRun(
        job.data_yaml, job.knobs, job.device, job.images, job.images_total, job.epochs, workdir, job.seed,
        train_subset=job.train_subset, label_caches=job.label_caches, mode=job.mode, optimizer=job.optimizer,
    )
    try:
        report = engine.train(run, clock)
        stats = clock.stats()
    finally:
        sampler.stop()
        figures["peak_ram_mb"] = sampler.peak_ram_mb
        figures["torch_threads"] = current()  # as the steps ran (a trainer may set its own)
    cpu, gpu_util = sampler.means(stats.window)
    figures.update(
        config=report.knobs.to_dict(),
        notes=list(report.notes),
        images_per_s=stats.images_per_s,
        step_s_median=stats.step_s_median,
        step_s_p90=stats.step_s_p90,
        data_wait_fraction=stats.data_wait_fraction,
        setup_s=(clock.first_batch_at or started) - started,
        measured_s=stats.measured_s,
        steps=stats.steps,
        warmup=stats.warmup,
        ci_rel=stats.ci_rel,
        converged=stats.converged,
        step_s=list(stats.step_s),
        peak_gpu_mem_mb=_peak_gpu_mb(gpu),
        gpu_util_mean=gpu_util,
        cpu_util_mean=cpu,
        images_used=report.images_used,
        train_build_s=report.train_build_s,
        val_build_s=report.val_build_s,
        val_images=report.val_images,
        label_scan_s=report.label_scan_s,
        image_bytes_mean=report.image_bytes_mean,
        image_long_side=report.image_long_side,
        warmup_s=list(stats.warmup_s),
        compile_s=one_time_s(stats.warmup_s, stats.step_s) if report.knobs.compile != COMPILE_OFF else None,
        compile_loss_gap=report.compile_loss_gap,
        optimizer=report.optimizer,
        optimizer_args=list(report.optimizer_args),
        optimizer_step_s=report.optimizer_step_s,
        accumulate=report.accumulate,
        optimizer_steps=sum(1 for t in report.optimizer_step_at if stats.window[0] < t <= stats.window[1])
        if report.optimizer_step_at else None,
        **_yardstick(report, stats.images_per_s, gpu),
    )
    ci = f"+/-{100 * stats.ci_rel:.1f}%" if stats.ci_rel is not None and stats.ci_rel < 10 else "unbounded"
    return f"measured {stats.steps} steps after {stats.warmup} warm-up steps (90% CI of the mean step time {ci})"


def _yardstick(report: EngineReport, images_per_s: float | None, gpu: int | None) -> dict[str, Any]:
    """The trial's model GFLOPs per trained image and the share of its GPU's dense peak they reached
    (:mod:`speedopt.measure._peak`), from this process's own images/s (a DDP rank's) on its own GPU."""
    gflops, basis = trained_gflops(report.forward_gflops, report.flops_how, report.knobs.freeze)
    name, tf32 = None, True
    if gpu is not None:
        import torch

        name, tf32 = torch.cuda.get_device_name(gpu), bool(torch.backends.cudnn.allow_tf32)
    peak = peak_share(name, report.knobs.amp, images_per_s, gflops, tf32)
    return {
        "gflops_per_image": gflops, "flops_basis": basis, "peak_share": peak.share, "peak_tflops": peak.peak_tflops,
        "peak_precision": peak.precision, "peak_basis": peak.basis,
    }


def _gpu_index(device: str) -> int | None:
    """This process's GPU: the device's only index, or under DDP the one of its local rank (None on the CPU)."""
    if device == "cpu":
        return None
    indices = device.split(",")
    return int(indices[int(os.environ.get("LOCAL_RANK", "0")) if len(indices) > 1 else 0])


def _peak_gpu_mb(gpu: int | None) -> float | None:
    if gpu is None:
        return None
    import torch

    return float(torch.cuda.max_memory_reserved(gpu)) / 2**20


def _die_with_parent() -> None:
    """Kill this process group when the parent goes (even by SIGKILL): no trial outlives its search.

    The parent is the pid the runner passed (``SPEEDOPT_PARENT_PID``), not whoever is the parent
    now: a parent killed while this process was still importing must not leave it running orphaned.
    """
    agent = os.environ.get(AGENT_ENV)
    if agent and agent.isdigit():  # a DDP rank: its parent is the launch's agent, which dies with the runner
        die_with(int(agent), name="speedopt-agent-watch")
    else:
        die_with(int(os.environ.get(PARENT_ENV) or os.getppid()))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
