"""A trial on several processes (the knob ``gpus``): the child entry point under ``torch.distributed.run``.

The user's multi-GPU run is ``torch.distributed.run --nproc_per_node G`` around the trainer (or
Ultralytics' ``device=0,1``, which runs that launcher itself); a trial with ``gpus=G`` runs the very
same child entry point as a one-process trial, as G ranks of that launcher
(:func:`speedopt.measure._launch.run_launch`: a free port, the collective timeout, every rank killed
with its starter). Each rank builds the trainer, which sets DDP up itself from the launcher's
environment exactly as in the user's run, and times its own steps; rank 0 reports progress and
writes ``result.json``, rank R ``result.rank<R>.json`` (:func:`~speedopt.measure._workdir.result_name`).

Merging (:func:`merge_ranks`). DDP steps in lockstep (every backward pass all-reduces the
gradients), each rank on ``batch / G`` images, so the run's throughput is the sum of the ranks'.
Where a trainer times rank 0 only (classic train.py runs its batch-end callback on rank 0), the other
ranks write nothing and the total is rank 0's images/s x G, said in the trial's notes. A failing rank's
status (an OOM on rank 1) is the trial's when rank 0 has no result of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from speedopt.isolation import shared_fds
from speedopt.measure._launch import LaunchOptions, plan_launch, run_launch
from speedopt.measure._workdir import read_json, result_name
from speedopt.status import Status

CHILD = "speedopt.measure._child"
RANKS_GRACE_S = 10.0  # after rank 0's result, how long the other ranks get to write theirs before the launch is ended


def run_ranks(
    nproc: int, workdir: Path, env: dict[str, str], timeout_s: float, tick: Callable[[], None]
) -> tuple[bool, int | None]:
    """Run the child on ``nproc`` ranks in ``workdir``; (timed out, the agent's exit code). Nothing of it runs after.

    ``tick`` is called every 0.1 s (progress). The launch ends once rank 0 has written its result and
    every rank has (or :data:`RANKS_GRACE_S` passed): ranks a trainer does not stop are not waited for.
    """
    plan = plan_launch(["-m", CHILD, str(workdir)], nproc, timeout_s)  # collective timeout: the trial's own
    first_seen: list[float] = []

    def done() -> bool:
        tick()
        if not (workdir / result_name(0)).exists():
            return False
        if not first_seen:
            first_seen.append(time.monotonic())
        every = all((workdir / result_name(r)).exists() for r in range(1, nproc))
        return every or time.monotonic() - first_seen[0] > RANKS_GRACE_S

    options = LaunchOptions(env=env, pass_fds=shared_fds(), log="child.log", poll=done)
    launched = run_launch(plan, workdir, timeout_s, options=options)
    return launched.status is Status.TIMEOUT, launched.returncode


def merge_ranks(workdir: Path, nproc: int) -> dict[str, Any] | None:
    """One result from the ranks' result files (see the module docstring); None when no rank wrote one."""
    results = [read_json(workdir / result_name(rank)) for rank in range(nproc)]
    first = results[0]
    if first is None or first.get("status") != Status.OK.value:
        failed = next(((r, res) for r, res in enumerate(results) if res and res.get("status") != Status.OK.value), None)
        if failed is None:
            return first
        rank, res = failed
        return {**res, "message": f"rank {rank}: {res.get('message', '')}"}
    figures = dict(first.get("figures") or {})
    rates = [_rate(res) for res in results]
    own = rates[0]
    if own is None:
        return first
    notes = list(figures.get("notes") or ())
    if all(rate is not None for rate in rates):
        total = sum(rate for rate in rates if rate is not None)
    else:
        missing = [str(r) for r, rate in enumerate(rates) if rate is None]
        total = own * nproc
        notes.append(
            f"ranks {', '.join(missing)} reported no figures (the trainer times rank 0 only): "
            f"total = rank 0's images/s x {nproc}, as DDP steps every rank in lockstep on an equal share of the batch"
        )
    figures.update(images_per_s=total, rank_images_per_s=rates, notes=notes)
    shown = ", ".join("-" if rate is None else f"{rate:.1f}" for rate in rates)
    message = f"{first.get('message', '')}; {nproc} ranks: {total:.1f} images/s in total ({shown} per rank)"
    return {**first, "figures": figures, "message": message}


def _rate(result: dict[str, Any] | None) -> float | None:
    if not result or result.get("status") != Status.OK.value:
        return None
    value = (result.get("figures") or {}).get("images_per_s")
    return float(value) if isinstance(value, (int, float)) else None
