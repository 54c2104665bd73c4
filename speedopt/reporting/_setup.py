"""The report's account of the study's set-up: section 1 (machine and dataset) and the warm start it began
from (the accuracy rule its trials were judged by: :mod:`speedopt.reporting._accuracy`)."""

from __future__ import annotations

from speedopt.knobs import knobs_text
from speedopt.measure import LabelCaches
from speedopt.reporting._text import duration, fmt
from speedopt.study import SearchOutcome, StudyProtocol, TrialRecord, redact


def machine_and_dataset_section(
    p: StudyProtocol, result: SearchOutcome, done: list[TrialRecord], labels: LabelCaches | None = None
) -> list[str]:
    """Section 1: the machine, the dataset (with what the trainer's label check drops, from ``labels``: the
    study's label caches), the engine and how the trials were measured."""
    m, ds = p.machine, p.dataset
    build = labels.build_for(p.data) if labels is not None else None
    dropped = f"; {LabelCaches.dropped(build)}" if build is not None and LabelCaches.dropped(build) else ""
    starts = [r.started for r in done if r.started]
    ends = [r.completed for r in done if r.completed]
    busy = sum((r.completed - r.started).total_seconds() for r in done if r.started and r.completed)
    gpus = ", ".join(f"{g.name} ({g.memory_mb} MB)" for g in m.gpus) or "none"
    return [
        "## 1. Machine and dataset",
        "",
        f"- Machine: {m.key.cpu_model}, {m.key.cpu_cores} cores, {m.ram_total_gb} GB RAM; GPUs: {gpus}; "
        f"driver {m.driver or '-'}, CUDA {m.cuda_driver or '-'}; host {m.hostname}",
        f"- Dataset: `{p.data}`: {ds.train_images} train / {ds.val_images} val images, {ds.classes} classes, "
        f"mean size {ds.mean_width}x{ds.mean_height}, {ds.train_bytes / 2**20:.1f} MB of train images (fingerprint {ds.id}){dropped}",
        f"- Engine: {p.engine} {p.engine_version} on device `{p.device}`; speedopt {p.speedopt_version}",
        f"- Trials: {result.complete} complete ({result.counts_text()}{result.failed_text()}), at least {p.warmup} warm-up batches (more with "
        f"dataloader workers: until their prefetched batches are used) and {p.steps} to {p.max_steps} measured batches "
        f"each (until the 90% CI of the mean step time is within +/-5%); from {min(starts):%Y-%m-%d %H:%M} to {max(ends):%Y-%m-%d %H:%M} UTC, "
        f"{duration(busy)} of trials and probes",
        *([f"- {result.optimizer_text()[0].upper()}{result.optimizer_text()[1:]}"] if result.optimizer_text() else []),
        "",
    ]


def warm_start_section(p: StudyProtocol, done: list[TrialRecord]) -> list[str]:
    """The configs taken from another study and how each ran here; nothing without a warm start."""
    warm = p.warm_start
    if warm is None:
        return []
    key = warm.machine
    lines = ["## Warm start", "", f"Configs taken from study `{warm.study}` ({redact(warm.source)}), made on "
             f"{key.cpu_model} x{key.cpu_cores} cores, GPUs {list(key.gpus) or 'none'}; probes "
             f"{'reused (same dataset)' if warm.same_dataset else 'not reused (dataset differs)'}.", "",
             "| source trial | images/s there | adapted here | changes | trial here | images/s here |",
             "|---|---|---|---|---|---|"]
    here = {r.source_trial: r for r in done if r.role == "warm-start"}
    for c in warm.configs:
        r = here.get(c.source_trial)
        got = (fmt(r.images_per_s, 2) if r.result.ok else r.status.value) if r else "not run yet"
        lines.append(f"| {c.source_trial} | {c.source_images_per_s:.2f} | {knobs_text(c.knobs)} | "
                     f"{'; '.join(c.changes) or 'none'} | {r.number if r else '-'} | {got} |")
    return lines + [""]
