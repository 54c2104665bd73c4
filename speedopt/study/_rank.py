"""Ceilings that steer: bound every config of the space by its ceilings, and measure the highest first.

A config cannot train faster than its bound: min(data ceiling, compute ceiling), or 1 / (1/data +
1/compute) with ``workers=0``, where loading and computing take turns. A ceiling depends on only some
knobs (:func:`~speedopt.measure._ceilings.key_of`), so J = distinct data keys + distinct compute keys
short jobs bound all N configs of a space. Three uses, Optuna staying the study's engine:

- **ranking** (``--ceiling-rank``): when J is small beside N (``auto``: J <= N / 2 and J <= the trial
  budget), every ceiling the space needs is measured once, before the trials, and the configs with the
  highest bounds are enqueued right after the baseline (Optuna runs enqueued trials first, then samples);
- **a bound for the space**: with every config bounded, the search stops once its best config reaches
  ``--stop-at-ceiling`` of the highest bound of any config it could still try, whichever knobs it varies;
- **skipping** (whenever both ceilings of a proposed config are known, ranked or not): a config whose
  bound is below (1 - ``--prune-margin``) x the best measured images/s cannot catch up; it is pruned
  before it runs, as the pruner would have after a few steps.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from speedopt.knobs import Knobs, knobs_text
from speedopt.measure import Ceiling, Ceilings
from speedopt.measure._ceilings import key_of
from speedopt.study._space import Space

MODES = ("auto", "on", "off")
ATTR = "ceiling_ranking"  # the study user attr: Ranking.to_dict() (``ceiling_rank`` is the protocol's mode)
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


@dataclass(frozen=True)
class Ranking:
    """What ranking a study's space by its ceilings did: its bounds, the configs it enqueued, or why it did not run."""

    configs: int  # configs in the space (0: too many to enumerate)
    jobs: int  # ceiling jobs it needs (measured, when ``ran``)
    ran: bool
    message: str  # one line: what was done, or why not
    enqueued: tuple[tuple[Knobs, float], ...] = ()  # measured first, highest bound first
    space_bound: float | None = None  # the highest bound of any config in the space (None unless every one is bounded)
    wall_s: float = 0.0  # the ceiling jobs' wall time

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["enqueued"] = [{"knobs": k.to_dict(), "bound": b} for k, b in self.enqueued]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ranking:
        enqueued = tuple((Knobs.from_dict(e["knobs"]), float(e["bound"])) for e in data.get("enqueued") or ())
        known = {f.name for f in dataclasses.fields(cls)} - {"enqueued"}
        return cls(**{k: v for k, v in data.items() if k in known}, enqueued=enqueued)

    def lines(self) -> list[str]:
        """What it did, and each enqueued config with its bound."""
        out = [self.message]
        out += [f"  bound {b:.1f} images/s: {knobs_text(k)}" for k, b in self.enqueued]
        return out


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


def hopeless(knobs: Knobs, known: Mapping[str, Ceiling], best: float | None, margin: float) -> str | None:
    """Why ``knobs`` cannot catch the best config (its bound below (1 - margin) x best), or None."""
    if not best or not margin:
        return None
    top = bound_of(knobs, known)
    if top is None or top >= (1.0 - margin) * best:
        return None
    return (
        f"its ceilings bound it at {top:.1f} images/s, below {100 * (1 - margin):.0f}% of the best's {best:.1f}: "
        "pruned before it ran (--prune-margin)"
    )


def space_reached(images_per_s: float, ranking: Ranking | None, stop_at: float) -> str | None:
    """Why a search may stop: its best reached ``stop_at`` of the highest bound in the whole space (None: go on)."""
    if not stop_at or ranking is None or ranking.space_bound is None or images_per_s < stop_at * ranking.space_bound:
        return None
    return (
        f"the best config measured {images_per_s:.1f} images/s, {100 * images_per_s / ranking.space_bound:.0f}% of the "
        f"highest bound of any of the space's {ranking.configs} configs ({ranking.space_bound:.1f} images/s, from their ceilings): "
        "nothing left to gain from these knobs on this machine (--no-stop-at-ceiling searches on)"
    )


def stored_attr(attrs: Mapping[str, Any]) -> Ranking | None:
    """The ranking a study keeps in its user attrs (:data:`ATTR`), or None."""
    attr = attrs.get(ATTR)
    return Ranking.from_dict(attr) if isinstance(attr, dict) else None
