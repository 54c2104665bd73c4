"""A study's ceilings as stored: how far its configs are from what this machine could do at all.

Each ceiling is measured once per key (:mod:`speedopt.measure`) and kept in the study
(:func:`~speedopt.study._schema.write_ceiling`), so workers, resumes and the report share them; after the
finals the study also records which trials' ceilings the report shows
(:func:`~speedopt.study._schema.write_ceilings_for`). How a search measures and uses them is
:mod:`speedopt.search._ceilings` and :mod:`speedopt.search._stop`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedopt.knobs import Knobs
from speedopt.measure import Ceilings, key_of
from speedopt.study._schema import read_ceilings

if TYPE_CHECKING:
    import optuna


def of_config(study: optuna.Study, knobs: Knobs) -> Ceilings:
    """The stored ceilings of ``knobs`` (as run); either may be None when not measured."""
    found = read_ceilings(study)
    return Ceilings(found.get(f"data|{key_of('data', knobs)}"), found.get(f"compute|{key_of('compute', knobs)}"))
