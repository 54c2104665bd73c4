"""A study's ceilings as stored: how far its configs are from what this machine could do at all.

Each ceiling is measured once per key (:mod:`speedopt.measure`) and kept in the study (user attr
``ceilings``), so workers, resumes and the report share them; after the finals the study also records
which trials' ceilings the report shows (user attr ``ceilings_for``: role -> trial number). How a search
measures and uses them is :mod:`speedopt.search._ceilings` and :mod:`speedopt.search._stop`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import CEILINGS_ATTR, Ceiling, Ceilings, stored_ceilings

if TYPE_CHECKING:
    import optuna

FOR_ATTR = "ceilings_for"  # {"baseline": trial number, "recommended": trial number}


def known_ceilings(study: optuna.Study) -> dict[str, Ceiling]:
    """The ceilings the study holds, by ``kind|key``."""
    return stored_ceilings(study.user_attrs.get(CEILINGS_ATTR))


def of_config(study: optuna.Study, knobs: Knobs) -> Ceilings:
    """The stored ceilings of ``knobs`` (as run); either may be None when not measured."""
    from speedopt.measure import key_of

    found = known_ceilings(study)
    return Ceilings(found.get(f"data|{key_of('data', knobs)}"), found.get(f"compute|{key_of('compute', knobs)}"))


def save_ceilings_for(study: optuna.Study, baseline: int | None, recommended: int | None) -> None:
    """Which trials the report shows ceilings for (the ends: the baseline's and the recommendation's)."""
    study.set_user_attr(FOR_ATTR, {"baseline": baseline, "recommended": recommended})
