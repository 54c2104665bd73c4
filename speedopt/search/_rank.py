"""Ceilings that steer: bound every config of the space by its ceilings, and measure the highest first.

A config cannot train faster than its bound: min(data ceiling, compute ceiling), or 1 / (1/data +
1/compute) with ``workers=0``, where loading and computing take turns. A ceiling depends on only some
knobs (:func:`~speedopt.measure.key_of`), so J = distinct data keys + distinct compute keys
short jobs bound all N configs of a space. Three uses, Optuna staying the study's engine:

- **ranking** (``--ceiling-rank``): when J is small beside N (``auto``: J <= N / 2 and J <= the trial
  budget), every ceiling the space needs is measured once, before the trials, and the configs with the
  highest bounds are enqueued right after the baseline (Optuna runs enqueued trials first, then samples);
- **a bound for the space** (:mod:`speedopt.search._stop`): with every config bounded, the search stops once its best config reaches
  ``--stop-at-ceiling`` of the highest bound of any config it could still try, whichever knobs it varies;
- **skipping** (:mod:`speedopt.search._stop`; whenever both ceilings of a proposed config are known, ranked or not): a config whose
  bound is below (1 - ``--prune-margin``) x the best measured images/s cannot catch up; it is pruned
  before it runs, as the pruner would have after a few steps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import get_args

from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, Ceilings, key_of
from speedopt.study import Space
from speedopt.study.record_types import Ranking, RankMode

MODES: tuple[RankMode, ...] = get_args(RankMode)
MAX_CONFIGS = 4096  # a larger space is not enumerated (its ceilings would not be few)


def configs(space: Space) -> list[Knobs] | None:
    """Every config of the space (sampled knobs' product, fixed knobs as they are); None past MAX_CONFIGS."""
    sampled = space.sampled()
    count = math.prod(len(d.values()) for d in sampled.values())
    if count > MAX_CONFIGS:
        return None
    fixed = space.fixed()
    return [Knobs(**fixed, **dict(zip(sampled, values))) for values in itertools.product(*(d.values() for d in sampled.values()))]


def representatives(grid: Iterable[Knobs]) -> dict[str, Knobs]:
    """One config per ceiling the grid needs, by ``kind|key`` (measuring it bounds every config with that key)."""
    out: dict[str, Knobs] = {}
    for knobs in grid:
        for kind in ("data", "compute"):
            out.setdefault(f"{kind}|{key_of(kind, knobs)}", knobs)
    return out


def bound(ceilings: Ceilings, workers: int) -> float | None:
    """The most a config with these ceilings can train at: min(data, compute), or their serial sum with no workers."""
    d, c = ceilings.data, ceilings.compute
    if d is None or c is None or not (d.ok and c.ok) or not d.images_per_s or not c.images_per_s:
        return None
    if workers == 0:
        return 1.0 / (1.0 / d.images_per_s + 1.0 / c.images_per_s)
    return min(d.images_per_s, c.images_per_s)


def bound_of(knobs: Knobs, known: Mapping[str, Ceiling]) -> float | None:
    """``knobs``' bound from the ceilings known by ``kind|key`` (None unless both are known and ok)."""
    found = Ceilings(known.get(f"data|{key_of('data', knobs)}"), known.get(f"compute|{key_of('compute', knobs)}"))
    return bound(found, knobs.workers)


def skip_mode(mode: str, count: int, jobs: int, trials: int) -> str | None:
    """Why a search does not rank by ceilings (None: it does). ``count`` configs need ``jobs`` ceiling jobs."""
    if mode == "off":
        return "ranking by ceilings is off (--ceiling-rank off)"
    if count < 3:
        return f"the space holds {count} config(s): nothing to rank"
    if mode == "auto" and (2 * jobs > count or jobs > trials):
        return (
            f"ranking the space's {count} configs needs {jobs} ceiling jobs, not few beside "
            f"{'its configs' if 2 * jobs > count else f'the budget of {trials} trials'}: "
            "Optuna samples from the start (--ceiling-rank on ranks anyway)"
        )
    return None


def rank(grid: Sequence[Knobs], known: Mapping[str, Ceiling], first: int, skip: Iterable[Knobs] = ()) -> Ranking:
    """The ranking of ``grid`` by the ``known`` ceilings: the ``first`` highest-bound configs (none of ``skip``) to enqueue."""
    bounds = [(k, bound_of(k, known)) for k in grid]
    bounded = [(k, b) for k, b in bounds if b is not None]
    top = sorted(bounded, key=lambda kb: -kb[1])
    taken = {repr(k.to_dict()) for k in skip}
    enqueued = tuple((k, b) for k, b in top if repr(k.to_dict()) not in taken)[:first]
    space_bound = top[0][1] if top and len(bounded) == len(grid) else None
    message = (
        f"ranked {len(grid)} configs by their ceilings ({len(bounded)} bounded"
        + (f", the highest bound {space_bound:.1f} images/s" if space_bound is not None else "")
        + f"): the {len(enqueued)} highest are measured first"
    )
    return Ranking(len(grid), len(representatives(grid)), True, message, enqueued, space_bound)


def first_count(trials: int) -> int:
    """How many ranked configs a budget of ``trials`` measures first: a third of it (at least one), the sampler the rest."""
    return max(1, (trials - 1) // 3)
