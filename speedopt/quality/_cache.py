"""The probe cache: quality probe results in the study storage, shared by every study and worker.

Entries are user attrs of one dedicated study (:data:`CACHE_STUDY`), keyed by (dataset fingerprint,
signature, budget, weights, seed, engine): accuracy does not depend on the machine, so a probe run
once serves every later search on the same dataset, on any machine, and travels with exports.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from speedopt.quality._policy import Policy
from speedopt.status import Status

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

CACHE_STUDY = "speedopt-probe-cache"


@dataclass(frozen=True)
class ProbeResult:
    """One probe of one signature with one seed: how it ended and the val mAP it reached."""

    status: Status
    message: str
    signature: dict[str, Any]
    seed: int
    epochs: int
    fraction: float
    dataset: str
    map50: float | None = None
    map50_95: float | None = None
    images: int | None = None
    seconds: float | None = None  # the probe job's wall time: what growing the budget costs is estimated from it

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.map50_95 is not None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values["status"])
        return cls(**values)


def cache_key(dataset_id: str, sig: dict[str, Any], policy: Policy, seed: int, engine: str, run_epochs: int = 0) -> str:
    """The entry of one signature's probe under one budget and seed; ``run_epochs``: the run a probe longer than its own
    schedule is a miniature of (its warm-up and closing epochs depend on it, and the optimizer of the whole run that it
    trains with), 0 for a probe of the trainer's own."""
    parts: list[Any] = [dataset_id, sig, policy.epochs, policy.fraction, policy.weights_id, seed, engine]
    if run_epochs > policy.epochs:
        parts.append(f"closing share of {run_epochs}")  # the miniature's rule: a probe of another rule is another entry
    if run_epochs:
        parts.append("the run's optimizer")  # issue 53: probes train what optimizer=auto gives the whole run
    material = json.dumps(parts, sort_keys=True)
    return "probe:" + hashlib.sha256(material.encode()).hexdigest()[:20]


class ProbeCache:
    """Probe results in the storage, as user attrs of one dedicated study, shared by all studies."""

    def __init__(self, storage: BaseStorage):
        import optuna

        self.study = optuna.create_study(study_name=CACHE_STUDY, storage=storage, load_if_exists=True)

    def get(self, key: str) -> ProbeResult | None:
        entry = self.study._storage.get_study_user_attrs(self.study._study_id).get(key)
        return ProbeResult.from_dict(entry) if entry is not None else None

    def put(self, key: str, result: ProbeResult) -> None:
        self.study.set_user_attr(key, result.to_dict())


def cache_entries(storage: BaseStorage, dataset_id: str | None) -> dict[str, Any]:
    """Probe-cache entries in ``storage`` for one dataset fingerprint (all of them for None)."""
    import optuna

    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    if CACHE_STUDY not in names:
        return {}
    attrs = optuna.load_study(study_name=CACHE_STUDY, storage=storage).user_attrs
    return {k: v for k, v in attrs.items() if dataset_id is None or v.get("dataset") == dataset_id}


def merge_cache(entries: dict[str, Any], storage: BaseStorage) -> int:
    """Add probe-cache entries missing from ``storage``; returns how many were added."""
    import optuna

    if not entries:
        return 0
    cache = optuna.create_study(study_name=CACHE_STUDY, storage=storage, load_if_exists=True)
    have = cache.user_attrs
    added = 0
    for key, value in entries.items():
        if key not in have:
            cache.set_user_attr(key, value)
            added += 1
    return added
