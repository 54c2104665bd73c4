"""A study's ceilings: how far its configs are from what this machine could do at all.

Each ceiling is measured once per key (:mod:`speedopt.measure._ceilings`) and kept in the study (user
attr ``ceilings``), so workers, resumes and the report share them. Two uses:

- **stop at the ceiling** (``--stop-at-ceiling``, on by default): when a trial becomes the best
  feasible one, its ceilings are measured (or found); once it reaches the study's share (default 95%) of min(data,
  compute) the study stops sampling: these knobs have nothing left to give on this machine.
- **the ends**: after the finals, the ceilings of the baseline and of the recommendation, for the
  report (user attr ``ceilings_for``: role -> trial number).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from speedopt.knobs import Knobs
from speedopt.measure import CEILINGS_ATTR, Ceiling, Ceilings, TrialRequest, TrialResult, measure_ceilings, stored_ceilings
from speedopt.measure._ceilings import COMPUTE_KNOBS, DATA_KNOBS

if TYPE_CHECKING:
    import optuna

FOR_ATTR = "ceilings_for"  # {"baseline": trial number, "recommended": trial number}

Prepare = Callable[[Knobs], "TrialRequest | TrialResult"]
Measure = Callable[[TrialRequest], TrialResult]


def known(study: optuna.Study) -> dict[str, Ceiling]:
    """The ceilings the study holds, by ``kind|key``."""
    return stored_ceilings(study.user_attrs.get(CEILINGS_ATTR))


def of_config(study: optuna.Study, knobs: Knobs) -> Ceilings:
    """The stored ceilings of ``knobs`` (as run); either may be None when not measured."""
    from speedopt.measure import key_of

    found = known(study)
    return Ceilings(found.get(f"data|{key_of('data', knobs)}"), found.get(f"compute|{key_of('compute', knobs)}"))


def measure(study: optuna.Study, knobs: Knobs, prepare: Prepare, run: Measure) -> Ceilings:
    """The ceilings of ``knobs`` (as run): found in the study, or measured now and stored there at once."""

    def save(name: str, ceiling: Ceiling) -> None:
        attr: dict[str, Any] = dict(study.user_attrs.get(CEILINGS_ATTR) or {})
        attr[name] = ceiling.to_dict()
        study.set_user_attr(CEILINGS_ATTR, attr)

    return measure_ceilings(knobs, prepare, run, known(study), save)


def reached(images_per_s: float, ceilings: Ceilings, stop_at: float, sampled: Iterable[str]) -> str | None:
    """Why a search may stop: the config reached ``stop_at`` of min(ceilings) and the search varies none of the
    knobs the binding ceiling depends on (``sampled``: the knobs it varies), so no config it can still try has a
    higher bound. None: go on (or ``stop_at`` is 0)."""
    share = ceilings.share(images_per_s)
    if not stop_at or share is None or share < stop_at or ceilings.binding is None:
        return None
    movers = sorted(set(sampled) & set(DATA_KNOBS if ceilings.binding == "data" else COMPUTE_KNOBS))
    if movers:  # another value of these may raise the binding ceiling itself
        return None
    return (
        f"the best config measured {images_per_s:.1f} images/s, {100 * share:.0f}% of min(ceilings) "
        f"{ceilings.bound:.1f} images/s, and the {ceilings.binding} ceiling binds, whose knobs this search does not vary: "
        f"nothing left to gain from these knobs on this machine (--no-stop-at-ceiling searches on)"
    )


def record_ends(study: optuna.Study, baseline: int | None, recommended: int | None) -> None:
    """Which trials the report shows ceilings for."""
    study.set_user_attr(FOR_ATTR, {"baseline": baseline, "recommended": recommended})
