"""Ceilings that steer: bound every config of the space by its ceilings, and measure the highest first.

A config cannot train faster than its bound: min(data ceiling, compute ceiling), or 1 / (1/data +
1/compute) with ``workers=0``, where loading and computing take turns. A ceiling depends on only some
knobs (:func:`~speedopt.measure.key_of`), so J = distinct data keys + distinct compute keys
short jobs bound all N configs of a space. Three uses, Optuna staying the study's engine:

- **ranking** (``--ceiling-rank``): before the trials the space is bounded branch and bound
  (:func:`next_job`): the config with the highest bound still open gets its missing ceiling measured, until the best
  config's bound reaches every open config's; a compute ceiling also bounds every config that does more work per
  image (a larger model scale or imgsz, fewer layers frozen, every other compute knob alike: :func:`less_work`), so
  most of the J jobs never run. The configs with the highest bounds are then enqueued right after the baseline (Optuna runs enqueued
  trials first, then samples);
- **a bound for the space** (:mod:`speedopt.search._ceiling_stop`): with every config bounded (by its own ceilings, or a config
  doing less work), the search stops once its best config's bound is within the noise of the highest bound of any
  config it could still try, whichever knobs it varies;
- **skipping** (:mod:`speedopt.search._skip`; whenever both ceilings of a proposed config are known, ranked or not): a config whose
  bound is below (1 - ``--prune-margin``) x the best measured images/s cannot catch up; it is pruned
  before it runs, as the pruner would have after a few steps.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import get_args

from speedopt.knobs import MODEL_SCALES, Knobs, Side
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
            out.setdefault(Ceiling.name_for(kind, knobs), knobs)
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
    return bound(Ceilings(known.get(_name("data", knobs)), known.get(_name("compute", knobs))), knobs.workers)


Kind = Side  # the ceiling kinds: knobs.Side, the one declaration


def less_work(a: Knobs, b: Knobs) -> bool:
    """``a``'s training step does no more work per image than ``b``'s: a model scale and an imgsz no larger, at least as
    many layers frozen, every other compute knob alike. Its compute ceiling then bounds ``b``'s (a model of the same
    family with more width and depth, more pixels per image or more layers to train is never computed faster)."""
    if a.model not in MODEL_SCALES or b.model not in MODEL_SCALES:
        return False
    if MODEL_SCALES.index(a.model) > MODEL_SCALES.index(b.model) or a.imgsz > b.imgsz or a.freeze < b.freeze:
        return False
    return _family(a) == _family(b)


@functools.lru_cache(maxsize=8192)
def _family(knobs: Knobs) -> str:
    """The compute key of ``knobs`` but for its model scale, imgsz and freeze."""
    return key_of("compute", dataclasses.replace(knobs, model=MODEL_SCALES[0], imgsz=32, freeze=0))


def upper(knobs: Knobs, known: Mapping[str, Ceiling], by_less_work: Sequence[Ceiling] = ()) -> float:
    """The most ``knobs`` could train at on what is known: its bound where both ceilings are known; else an unknown
    data ceiling counts as unbounded and an unknown compute ceiling as the least one of the configs doing less work
    (``by_less_work``, measured ok: within its noise, as the stop compares bounds); inf where nothing bounds it."""
    data, compute = known.get(_name("data", knobs)), known.get(_name("compute", knobs))
    d = data.images_per_s if data is not None and data.ok and data.images_per_s else math.inf
    if compute is not None and compute.ok and compute.images_per_s:
        c = compute.images_per_s
    else:
        c = min((x.images_per_s or 0.0 for x in by_less_work), default=math.inf)
    if math.isinf(c) and math.isinf(d):
        return math.inf
    return 1.0 / (1.0 / d + 1.0 / c) if knobs.workers == 0 else min(d, c)


def _missing(knobs: Knobs, known: Mapping[str, Ceiling]) -> Kind | None:
    """The ceiling of ``knobs`` not yet tried (compute first: it bounds more configs), None when both were."""
    kinds: tuple[Kind, ...] = ("compute", "data")
    return next((kind for kind in kinds if _name(kind, knobs) not in known), None)


def _work(knobs: Knobs) -> tuple[int, int, int, int]:
    """Least work first, then the larger batch (where nothing bounds a config yet)."""
    scale = MODEL_SCALES.index(knobs.model) if knobs.model in MODEL_SCALES else len(MODEL_SCALES)
    return scale, knobs.imgsz, -knobs.freeze, -knobs.batch


def uppers(grid: Sequence[Knobs], known: Mapping[str, Ceiling]) -> list[float]:
    """:func:`upper` of every config of ``grid`` on the ``known`` ceilings (a compute ceiling bounding the configs that do more work)."""
    by_family: dict[str, dict[str, tuple[Knobs, Ceiling]]] = {}
    for k in grid:
        c = known.get(_name("compute", k))
        if c is not None and c.ok:
            by_family.setdefault(_family(k), {})[_name("compute", k)] = (k, c)
    return [upper(k, known, [c for a, c in by_family.get(_family(k), {}).values() if less_work(a, k)]) for k in grid]


@functools.lru_cache(maxsize=65536)
def _name(kind: Kind, knobs: Knobs) -> str:
    """``kind|key`` of ``knobs``' ceiling, as a study keeps it."""
    return Ceiling.name_for(kind, knobs)


def next_job(grid: Sequence[Knobs], known: Mapping[str, Ceiling]) -> tuple[Kind, Knobs] | None:
    """The next ceiling to measure (branch and bound): the missing one of the open config (a ceiling not yet tried)
    with the highest :func:`upper`, least work first among equals; None once the best bound of a config with both
    ceilings reaches every open one's (or none is open)."""
    ups = uppers(grid, known)
    best = max((b for k in grid if (b := bound_of(k, known)) is not None), default=0.0)
    open_ = [(u, k) for u, k in zip(ups, grid) if _missing(k, known) is not None]
    if not open_:
        return None
    top, knobs = min(open_, key=lambda uk: (-uk[0], _work(uk[1])))
    if best >= top:
        return None
    kind = _missing(knobs, known)
    assert kind is not None
    return kind, knobs


def skip_mode(mode: str, count: int, trials: int) -> str | None:
    """Why a search does not rank by ceilings (None: it does): ``count`` configs, a budget of ``trials``."""
    if mode == "off":
        return "ranking by ceilings is off (--ceiling-rank off)"
    if count < 3:
        return f"the space holds {count} config(s): nothing to rank"
    if mode == "auto" and count <= trials:
        return (
            f"the space's {count} configs fit the budget of {trials} trials: Optuna samples from the start "
            "(--ceiling-rank on ranks anyway)"
        )
    return None


def rank(grid: Sequence[Knobs], known: Mapping[str, Ceiling], first: int, skip: Iterable[Knobs] = ()) -> Ranking:
    """The ranking of ``grid`` by the ``known`` ceilings: the ``first`` highest-bound configs (none of ``skip``) to enqueue;
    the space's bound the highest :func:`upper` (None where a config is unbounded: a ceiling failed or never ran)."""
    bounded = [(k, b) for k in grid if (b := bound_of(k, known)) is not None]
    top = sorted(bounded, key=lambda kb: -kb[1])
    taken = {repr(k.to_dict()) for k in skip}
    enqueued = tuple((k, b) for k, b in top if repr(k.to_dict()) not in taken)[:first]
    ups = uppers(grid, known)
    space_bound = max(ups) if ups and not math.isinf(max(ups)) else None
    jobs, needed = len(_tried(grid, known)), len(representatives(grid))
    message = (
        f"ranked {len(grid)} configs by their ceilings ({jobs} of the {needed} ceiling jobs they need measured, "
        + (f"{len(bounded)} configs bounded by both of theirs, the rest by a config doing less work" if len(bounded) < len(grid)
           else "every config bounded by both of its own")
        + (f"; the highest bound {space_bound:.1f} images/s" if space_bound is not None else "")
        + f"): the {len(enqueued)} highest are measured first"
    )
    return Ranking(len(grid), jobs, True, message, enqueued, space_bound)


def _tried(grid: Sequence[Knobs], known: Mapping[str, Ceiling]) -> set[str]:
    """The ceiling jobs of ``grid`` tried (ok or not), by ``kind|key``."""
    return {name for name in representatives(grid) if name in known}


def first_count(trials: int) -> int:
    """How many ranked configs a budget of ``trials`` measures first: a third of it (at least one), the sampler the rest."""
    return max(1, (trials - 1) // 3)
