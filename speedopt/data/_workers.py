"""The worker processes that resize and check a copy's items: a pool of spawned processes, started on
first use (none for one job), always stopped on the way out, and gone with the prepare that started
them even when it is SIGKILLed (each watches its parent, as every speedopt job does:
:func:`speedopt.isolation.die_with`); multiprocessing's resource tracker ends once they all have."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from speedopt.errors import UsageError

_T = TypeVar("_T")
_R = TypeVar("_R")


def _init_worker(parent: int) -> None:
    """A worker ignores Ctrl-C (the parent stops it), dies with ``parent`` (a SIGKILLed prepare runs no
    clean-up, and an idle worker would wait for work forever), and runs OpenCV on one thread (the pool is
    the parallelism). It kills itself alone: it shares its group with the user's shell job."""
    import signal

    import cv2

    from speedopt.isolation import die_with

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(parent, name="speedopt-prepare-parent-watch", group=False)
    cv2.setNumThreads(1)


def _apply(fn: Callable[[_T], _R], chunk: Sequence[_T]) -> list[_R]:
    """``fn`` over one chunk of items, in a worker process."""
    return [fn(item) for item in chunk]


class _Workers:
    """Up to ``jobs`` worker processes, started on first use (none for one job) and always stopped on the way
    out. Spawned, not forked: a fork of a process whose OpenCV thread pool has run hangs in the child's first
    resize. A pool, unlike ``multiprocessing.Pool``, fails (instead of hanging) when a worker dies."""

    def __init__(self, jobs: int, most: int):
        self.size = max(1, min(jobs, most))
        self.pool: Any = None

    def map(self, fn: Callable[[_T], _R], items: Sequence[_T]) -> Iterator[_R]:
        """``fn`` over ``items``, results as they finish."""
        if self.size == 1 or len(items) <= 1:
            yield from map(fn, items)
            return
        import functools
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.size, mp_context=context, initializer=_init_worker, initargs=(os.getpid(),))
        chunk = max(1, min(16, len(items) // (self.size * 4)))
        work = functools.partial(_apply, fn)
        futures = [self.pool.submit(work, items[i : i + chunk]) for i in range(0, len(items), chunk)]
        try:
            for future in as_completed(futures):
                yield from future.result()
        except BrokenProcessPool:
            raise UsageError(
                "a worker process of speedopt prepare died (out of memory, or an image that crashes the decoder?); "
                "run again with fewer --jobs (from Python: call it under `if __name__ == '__main__':`, or jobs=1)"
            ) from None

    def close(self, abort: bool) -> None:
        """Stop the workers: let them finish (the work is done) or, on an error or Ctrl-C, terminate them."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values()) if abort else []  # no public handle before 3.14
        pool.shutdown(wait=not abort, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=10)
        manager = getattr(pool, "_executor_manager_thread", None) if abort else None
        if manager is not None:  # it sees its workers gone and closes its wakeup pipe: let it finish before the
            manager.join(timeout=10)  # interpreter's exit hook writes to that pipe (a race in 3.11: "Bad file descriptor")


@contextlib.contextmanager
def _workers(jobs: int, most: int) -> Iterator[_Workers]:
    workers = _Workers(jobs, most)
    try:
        yield workers
    except BaseException:
        workers.close(abort=True)
        raise
    workers.close(abort=False)
