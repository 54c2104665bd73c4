"""Claims: a decision about a study taken by one process only (its finals; the retry of a failed trial).

Two runs of one study (two resumes, a search and a worker, workers on several hosts) may reach the same step at
once. A step whose decisions must be taken once is claimed first, in the storage itself: the claim is a study
of its own, named for the study and the step, and creating a study under a name another holds fails in every
Optuna storage (a unique index in SQLite, PostgreSQL and MySQL; the journal's order of records). A storage
row that is read, then written (``set_trial_state_values``, a user attr) is no such guarantee on SQLite,
which has no ``SELECT ... FOR UPDATE``: two processes can both read "free" and both write "mine".

The claim records its owner (host, pid, start time) and a beat its owner renews. Its owner releases it by
deleting it. An owner that died (its process gone on this host; on another host, no beat for ``stale_s``)
leaves a claim nobody renews: the next contender takes over with the next generation's name, so even a
takeover is decided by the storage, never by two processes agreeing. Claims are speedopt's internal
studies (:func:`speedopt.study.is_claim`): ``speedopt studies`` and the dashboard leave them out.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psutil

from speedopt.isolation import alive, wait_until
from speedopt.study.names import CLAIM_PREFIX as PREFIX

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

OWNER = "owner"
_GENERATIONS = 1000  # takeovers of one step a storage keeps before it says so
_UNRECORDED_S = 20.0  # a claim whose creator never recorded itself (killed in between) is free after this
_first_seen: dict[str, float] = {}  # claim name -> when this process first saw it unrecorded


def worker_id() -> dict[str, Any]:
    """This process as a trial or a claim records it: host, pid and start time (a pid alone may be reused)."""
    me = psutil.Process()
    return {"host": platform.node(), "pid": me.pid, "started": me.create_time()}


def process_alive(worker: dict[str, Any]) -> bool:
    """Whether the process a record names still runs (the same process: pid and start time)."""
    pid, started = worker.get("pid"), worker.get("started")
    return isinstance(pid, int) and isinstance(started, (int, float)) and alive(pid, float(started))


def claim_name(study_name: str, step: str, generation: int) -> str:
    """The claim's study name: short whatever the study's name (a storage bounds names), one per step."""
    digest = hashlib.sha256(study_name.encode()).hexdigest()[:16]
    return f"{PREFIX}{digest}-{step}-{generation}"


@dataclass(frozen=True)
class Claim:
    """A step of a study this process owns, until :meth:`release`."""

    storage: BaseStorage
    claim_id: int
    name: str
    taken_over: tuple[str, ...] = ()  # the earlier generations whose owners were gone when this one was claimed
    def beat(self) -> None:
        """Say the owner still works (another host's contender takes over after ``stale_s`` without a beat)."""
        self.storage.set_study_user_attr(self.claim_id, OWNER, {**worker_id(), "beat": time.time()})

    def release(self) -> None:
        """Delete the claim, and the claims of the owners it took over from (they died holding them): the step's
        claims go with the run that finished it, and the next run to claim it starts again at the first generation."""
        with contextlib.suppress(KeyError):
            self.storage.delete_study(self.claim_id)
        for name in self.taken_over:
            with contextlib.suppress(KeyError):
                self.storage.delete_study(self.storage.get_study_id_from_name(name))


def _holder(storage: BaseStorage, name: str, stale_s: float) -> str | None:
    """Who holds the claim ``name``, as a phrase, while it holds it; None when it is free (absent or dead)."""
    try:
        record = storage.get_study_user_attrs(storage.get_study_id_from_name(name)).get(OWNER)
    except KeyError:
        return None  # released meanwhile
    if not isinstance(record, dict):
        seen = _first_seen.setdefault(name, time.monotonic())
        return None if time.monotonic() - seen > _UNRECORDED_S else "a process that has not recorded itself yet"
    who = f"pid {record.get('pid')} on {record.get('host')}"
    if record.get("host") == platform.node():
        return who if process_alive(record) else None
    beat = record.get("beat")
    return who if isinstance(beat, (int, float)) and time.time() - beat < stale_s else None


def try_claim(storage: BaseStorage, study_name: str, step: str, stale_s: float) -> Claim | str:
    """Claim ``step`` of the study: the :class:`Claim` when this process owns it now, else who holds it."""
    import optuna
    from optuna.study import StudyDirection

    gone: list[str] = []
    for generation in range(1, _GENERATIONS + 1):
        name = claim_name(study_name, step, generation)
        try:
            claim_id = storage.create_new_study([StudyDirection.MINIMIZE], name)
        except optuna.exceptions.DuplicatedStudyError:
            holder = _holder(storage, name, stale_s)
            if holder is not None:
                return holder
            gone.append(name)
            continue  # its owner is gone: the next generation decides who takes over
        claim = Claim(storage, claim_id, name, tuple(gone))
        claim.beat()
        return claim
    return f"nobody: {_GENERATIONS} owners of {step} died; delete the studies named {PREFIX}* from the storage"


@contextlib.contextmanager
def claimed(
    storage: BaseStorage, study_name: str, step: str, stale_s: float, on_wait: Callable[[str], None], poll_s: float = 1.0
) -> Iterator[Claim]:
    """Own ``step`` of the study for the block: wait while another live process owns it (``on_wait`` hears who,
    once), then claim it; released when the block ends, however it ends."""
    last: list[Claim | str] = [""]  # the last try: the claim, or who holds it
    said: list[bool] = []

    def owned() -> bool:
        last[0] = try_claim(storage, study_name, step, stale_s)
        return isinstance(last[0], Claim)

    def say_once() -> None:
        if not said:
            on_wait(f"{step} of study {study_name!r}: another run owns them ({last[0]}); waiting for it, then reading what it stored")
            said.append(True)

    wait_until(owned, float("inf"), say_once, every_s=poll_s)
    got = last[0]
    assert isinstance(got, Claim)
    try:
        yield got
    finally:
        got.release()
