"""The names of the studies in a storage: the users' studies, the names a storage can hold, and speedopt's own.

A storage holds the users' studies beside speedopt's internal ones: the probe cache
(:data:`speedopt.quality.CACHE_STUDY`) and the claims a running search takes (:func:`is_claim`, named
:data:`CLAIM_PREFIX` ...). :func:`study_names` lists the users' studies only; :func:`check_study_name` refuses a
name a storage cannot hold or that speedopt keeps for itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedopt.errors import UsageError
from speedopt.quality import CACHE_STUDY

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

__all__ = ["CLAIM_PREFIX", "MAX_STUDY_NAME", "is_claim", "check_study_name", "study_names"]

#: The name of every claim (a study of its own: :mod:`speedopt.search`'s decisions taken by one process) starts so.
CLAIM_PREFIX = "speedopt-claim-"
#: Optuna's RDB storages keep a study name in a 512-character column.
MAX_STUDY_NAME = 512


def is_claim(name: str) -> bool:
    """A study that is a claim, not a user's study."""
    return name.startswith(CLAIM_PREFIX)


def check_study_name(name: str) -> str:
    """``name`` if a storage can hold it as a study name; UsageError naming the problem otherwise."""
    if not name.strip():
        raise UsageError("--study must not be empty; give a name such as --study my-study")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UsageError(f"--study {name!r} contains control characters; use letters, digits, '-', '_' and '.'")
    if len(name) > MAX_STUDY_NAME:
        raise UsageError(f"--study is {len(name)} characters long; Optuna storages hold at most {MAX_STUDY_NAME}")
    if name == CACHE_STUDY:
        raise UsageError(f"{CACHE_STUDY} is speedopt's probe cache; choose another --study name")
    if is_claim(name):
        raise UsageError(f"--study {name!r}: names starting with {CLAIM_PREFIX} are speedopt's claims; choose another --study name")
    return name


def study_names(storage: BaseStorage) -> list[str]:
    """The studies in a storage, speedopt's internal ones (the probe cache, claims) left out."""
    import optuna

    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    return [s.study_name for s in summaries if s.study_name != CACHE_STUDY and not is_claim(s.study_name)]
