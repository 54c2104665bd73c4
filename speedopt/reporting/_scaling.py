"""Multi-GPU scaling in a report: images/s in total and per GPU, and the efficiency against one GPU.

A trial with ``gpus=G`` ran G DDP processes (:mod:`speedopt.measure._ddp`); its images/s is the total.
Scaling efficiency compares its images/s per GPU with what the same config (every other knob equal)
measured on one GPU in this study: 100% means G GPUs train G times as fast. Without a one-GPU trial
of the same config there is nothing to compare with, and the table says so rather than guessing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from speedopt.knobs import Knobs, knobs_text
from speedopt.study import TrialRecord


@dataclass(frozen=True)
class Scaling:
    """One multi-GPU trial against the same config on one GPU."""

    trial: int
    config: Knobs
    images_per_s: float  # in total over the GPUs
    per_gpu: float
    ranks: tuple[float | None, ...]  # each rank's own images/s, where it reported
    one_gpu: float | None  # the best images/s of the same config with gpus=1 (None: not measured)

    @property
    def efficiency(self) -> float | None:
        return None if not self.one_gpu else self.per_gpu / self.one_gpu


def scaling(done: list[TrialRecord]) -> list[Scaling]:
    """Every measured trial with gpus > 1, best first."""
    ok = [r for r in done if r.result.ok and r.result.images_per_s is not None]
    single: dict[Knobs, float] = {}
    for record in ok:
        if record.result.config.gpus == 1:
            key, speed = record.result.config, float(record.result.images_per_s or 0.0)
            single[key] = max(speed, single.get(key, 0.0))
    rows = []
    for record in ok:
        result = record.result
        if result.config.gpus < 2 or result.images_per_s is None:
            continue
        twin = dataclasses.replace(result.config, gpus=1)
        rows.append(Scaling(record.number, result.config, result.images_per_s, result.images_per_s / result.config.gpus,
                            result.rank_images_per_s, single.get(twin)))
    return sorted(rows, key=lambda s: -s.images_per_s)


def scaling_section(done: list[TrialRecord]) -> list[str]:
    """``## Multi-GPU scaling``: a table of the multi-GPU trials (nothing when the study ran none)."""
    rows = scaling(done)
    if not rows:
        return []
    lines = [
        "## Multi-GPU scaling", "",
        "Each multi-GPU trial ran DDP under `torch.distributed.run`, as the printed command does; batch is the total "
        "across the GPUs (each takes batch / gpus), as in both trainers. Efficiency = images/s per GPU / images/s of the "
        "same config on one GPU in this study.", "",
        "| trial | config | gpus | images/s total | per GPU | per rank (measured) | 1 GPU, same config | efficiency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        ranks = ", ".join("-" if r is None else f"{r:.1f}" for r in s.ranks) or "-"
        one = f"{s.one_gpu:.1f}" if s.one_gpu else "not measured"
        eff = f"{100 * s.efficiency:.0f}%" if s.efficiency is not None else "-"
        config = knobs_text(dataclasses.replace(s.config, gpus=1))
        lines.append(f"| {s.trial} | {config} | {s.config.gpus} | {s.images_per_s:.1f} | {s.per_gpu:.1f} | {ranks} | {one} | {eff} |")
    return [*lines, ""]
