"""The CPU threads torch runs a job with: those the printed command's own process gets here.

torch takes its intra-op thread count from ``OMP_NUM_THREADS`` once, when it loads (libgomp reads the
variable then), and both trainers set that variable at import when it is unset: Ultralytics to 1
(``ultralytics/__init__.py``), the classic ``utils/general.py`` to ``cpu_count - 1``. So a process's
thread count depends on what it imported first. The classic ``python train.py`` imports torch before
its utils: it runs torch's default (2 on a 2-core machine). A cold trial process imported Ultralytics
first (the engine's offline settings), so torch loaded under ``OMP_NUM_THREADS=1`` and trained with 1
thread; the warm worker imported torch first and trained with 2. With dataloader workers competing for
the cores, that alone moved workers=2 against workers=0 from 0.95x (the real run) to 1.6x (cold), and
the real run under ``OMP_NUM_THREADS=1`` measured 1.6x too (issue 29; benchmarks/RESULTS.md).

So a job records, first thing and before anything imports a trainer, what a fresh process gets
(:func:`at_start`), and sets torch to the count the engine says its printed command runs with
(:meth:`speedopt.engines.Engine.torch_threads`) before it trains, cold or forked from the warm worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_START: StartThreads | None = None


@dataclass(frozen=True)
class StartThreads:
    """What a fresh Python that imports torch first gets here, under the environment the job started with."""

    omp_env: str | None  # OMP_NUM_THREADS as the process started (the user's, before a trainer set it)
    torch_default: int  # torch.get_num_threads() right after importing torch under it


def at_start() -> StartThreads:
    """The start-of-process threads, read once per process (the warm worker reads them before it forks).

    Call it before any trainer is imported: a trainer's import sets ``OMP_NUM_THREADS``. Reading the
    count starts no thread (no parallel region runs), so forking afterwards stays safe.
    """
    global _START
    if _START is None:
        omp = os.environ.get("OMP_NUM_THREADS")
        import torch

        _START = StartThreads(omp, int(torch.get_num_threads()))
    return _START


def apply(threads: int) -> int:
    """Set torch's intra-op threads for this job; the count torch now reports."""
    import torch

    torch.set_num_threads(max(1, threads))
    return int(torch.get_num_threads())
