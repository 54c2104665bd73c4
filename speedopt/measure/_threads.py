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

So a job records, first thing and before anything imports a trainer, the user's ``OMP_NUM_THREADS`` and
torch's default without it (:func:`at_start`), and sets torch to the count the engine says its printed command runs with
(:meth:`speedopt.engines.Engine.torch_threads`) before it trains, cold or forked from the warm worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_DEFAULT: int | None = None


@dataclass(frozen=True)
class StartThreads:
    """What a job's process starts with: the user's ``OMP_NUM_THREADS`` and torch's default without it."""

    omp_env: str | None  # OMP_NUM_THREADS in the job's environment (the user's, before a trainer set it)
    torch_default: int  # torch.get_num_threads() in a process that loads torch with OMP_NUM_THREADS unset


def at_start() -> StartThreads:
    """The job's start threads. Call it before any trainer is imported (a trainer's import sets
    ``OMP_NUM_THREADS``); in a job forked from the warm worker, after its environment is the job's.

    torch's default is read once per process (the warm worker reads it before it forks, for every job),
    with ``OMP_NUM_THREADS`` unset while torch loads. Reading the count starts no thread (no parallel
    region runs), so forking afterwards stays safe.
    """
    global _DEFAULT
    omp = os.environ.get("OMP_NUM_THREADS")
    if _DEFAULT is None:
        os.environ.pop("OMP_NUM_THREADS", None)
        try:
            import torch

            _DEFAULT = int(torch.get_num_threads())
        finally:
            if omp is not None:
                os.environ["OMP_NUM_THREADS"] = omp
    return StartThreads(omp, _DEFAULT)



def apply(threads: int) -> int:
    """Set torch's intra-op threads for this job; the count torch now reports."""
    import torch

    torch.set_num_threads(max(1, threads))
    return current()


def current() -> int:
    """torch's intra-op threads now (a trainer may have set its own since :func:`apply`)."""
    import torch

    return int(torch.get_num_threads())
