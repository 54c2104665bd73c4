"""Processes: one way to start a job, wait for it, end it, tell whether it lives, read its log.

Every job speedopt starts (trials, probes, validation timing, ``verify``'s trainer, the warm worker,
DDP launches) is a :class:`Job`: started cold by :func:`start` (under ``torch.distributed.run`` too,
with a marker its ranks carry) or forked by the one :class:`ForkServer`, waited for by
:meth:`Job.wait` (every waiting loop is :func:`wait_until`), and ended, with every process it started,
by :meth:`Job.end`; each started job dies with its starter (:func:`die_with`, :data:`PARENT_ENV`). Around that: the host lock (:func:`measuring`),
so no two jobs on one host are measured at once, and the leases of what a killed run leaves behind
(:func:`private_folder`, :func:`sweep`). Nothing here knows what a job measures.
"""

from speedopt.isolation._forkserver import ForkServer
from speedopt.isolation._hostlock import LOCK_ENV, check_lock, lock_path, lock_use, measuring
from speedopt.isolation._job import MARK_ENV, Job, marked, start
from speedopt.isolation._leftovers import (
    STATE_ENV,
    manifest_dir,
    npy_manifest,
    private_folder,
    recorded_npy,
    remove_private_folder,
    shared_fds,
    socket_fits,
    state_dir,
    sweep,
)
from speedopt.isolation._orphan import PARENT_ENV, die_with
from speedopt.isolation._process import alive, log_tail, wait_until

__all__ = [
    "Job",
    "start",
    "ForkServer",
    "MARK_ENV",
    "marked",
    "wait_until",
    "alive",
    "log_tail",
    "die_with",
    "PARENT_ENV",
    "measuring",
    "check_lock",
    "lock_path",
    "lock_use",
    "LOCK_ENV",
    "private_folder",
    "remove_private_folder",
    "socket_fits",
    "shared_fds",
    "manifest_dir",
    "npy_manifest",
    "recorded_npy",
    "state_dir",
    "sweep",
    "STATE_ENV",
]
