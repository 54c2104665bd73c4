"""Background sampling of host RAM, CPU and GPU utilisation while a trial runs.

One thread samples every ``interval`` seconds: system-wide CPU utilisation, GPU utilisation, and the
memory of the trial process plus all its descendants (dataloader workers hold their own copies of
batches and, with cache=ram, of images). The root's memory is read at every sample; the descendants',
the costly part, less often where a read costs more than :data:`BUDGET` of the interval in CPU time
(but at least every :data:`MEMORY_EVERY_S`), each sample adding the last one read. GPU utilisation
comes through NVML when a GPU index is given; pynvml is imported lazily and only on machines where it
is asked for.

The budget exists because the sampler ran on the cores it measured: each descendant's unique set (USS)
is read from ``/proc/PID/smaps_rollup``, a walk of the worker's page tables. Every 0.2 s, with two
dataloader workers and the validation loader's, it took 2.4-3.4 s of CPU in a 45 s trial on 2 cores
(about 7% of one core, issue 29), all of it taken from the step it timed. Spacing every reading out
instead left short trials with no CPU reading inside their window and missed the root's peak RAM (a
memory fit read 421 MB at batch 2 and at 4), so only the descendants' read waits.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil

BUDGET = 0.01  # the descendants' memory reads' CPU time, at most this share of one core ...
MEMORY_EVERY_S = 1.0  # ... unless that would space them further apart than this


@dataclass(frozen=True)
class Sample:
    t: float  # time.perf_counter()
    mem_bytes: int  # the process tree's own memory (see tree_memory): the root's now, its descendants' as last read
    cpu_percent: float
    gpu_util: float | None


def tree_memory(process: psutil.Process) -> int:
    """Memory a process and its live descendants need, in bytes, whatever else runs on the machine.

    The root counts its resident set (RSS); each descendant counts only its unique set (USS), the
    pages no other process maps. Forked dataloader workers share the root's pages (torch libraries,
    a RAM cache), and summing RSS would count those once per worker. Proportional set size (PSS)
    avoids that but divides every shared page among *all* processes that map it: beside one other
    torch process (another trial, the warm worker, a test) a trainer's PSS fell from 511 to 398 MB
    with no change in the trainer, so a memory fit and the trial it predicts read different machines.
    Where USS is unavailable, descendants count their RSS.
    """
    return process.memory_info().rss + descendants_memory(process)


def descendants_memory(process: psutil.Process) -> int:
    """The unique sets (USS) of a process's live descendants, in bytes (their RSS where USS is unavailable):
    the costly part of :func:`tree_memory` (a walk of every process, and each one's page tables)."""
    total = 0
    for p in process.children(recursive=True):
        try:
            try:
                total += p.memory_full_info().uss
            except (AttributeError, psutil.AccessDenied):
                total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


class _Nvml:
    """Utilisation of one GPU via NVML; silent no-op where NVML is unavailable."""

    def __init__(self, index: int):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # no driver, no device: report None rather than fail the trial
            self.handle = None

    def util(self) -> float | None:
        if self.handle is None:
            return None
        try:
            return float(self._pynvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception:
            return None


def next_wait(interval: float, cost_s: float) -> float:
    """Seconds until the next memory read: ``interval``, or longer where the last read's CPU time ``cost_s``
    would exceed :data:`BUDGET` of it, but never longer than :data:`MEMORY_EVERY_S`."""
    return max(interval, min(MEMORY_EVERY_S, cost_s / BUDGET))


class Sampler:
    """Samples this process tree in a daemon thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, pid: int | None = None, interval: float = 0.2, gpu_index: int | None = None):
        self.process = psutil.Process(pid)
        self.interval = interval
        self._memory_due = 0.0  # perf_counter time of the next memory read (see next_wait)
        self.gpu_index = gpu_index
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="speedopt-telemetry", daemon=True)

    def start(self) -> Sampler:
        psutil.cpu_percent(interval=None)  # prime: the first reading is meaningless
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        nvml = _Nvml(self.gpu_index) if self.gpu_index is not None else None
        descendants = 0
        while not self._stop.is_set():
            now = time.perf_counter()
            if now >= self._memory_due:  # the descendants' unique sets, on the budget; the root's RSS every time
                cost = time.thread_time()
                descendants = descendants_memory(self.process)
                self._memory_due = now + next_wait(self.interval, time.thread_time() - cost)
            gpu = nvml.util() if nvml else None
            mem = self.process.memory_info().rss + descendants
            self.samples.append(Sample(t=now, mem_bytes=mem, cpu_percent=psutil.cpu_percent(interval=None), gpu_util=gpu))
            self._stop.wait(self.interval)

    @property
    def peak_ram_mb(self) -> float | None:
        """Highest memory (see :func:`tree_memory`) of the process tree seen over the whole trial (setup and cache fill included)."""
        if not self.samples:
            return None
        return max(s.mem_bytes for s in self.samples) / 2**20

    def means(self, window: tuple[float, float]) -> tuple[float | None, float | None]:
        """Mean (CPU %, GPU util %) over the samples inside the measured window.

        CPU percent is system-wide, over all cores (100 = every core busy). Each reading covers the
        interval since the previous one, so a reading taken just after the window opens counts.
        """
        start, end = window
        inside = [s for s in self.samples if start < s.t <= end + self.interval]
        if not inside:
            return None, None
        cpu = sum(s.cpu_percent for s in inside) / len(inside)
        gpus = [s.gpu_util for s in inside if s.gpu_util is not None]
        return cpu, (sum(gpus) / len(gpus) if gpus else None)
