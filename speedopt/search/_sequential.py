"""Sequential finals: stop measuring once the decision cannot change, or almost surely will not.

The finals' rule (:func:`speedopt.speedup.decide`) claims a gain only when every paired round beat the
baseline by ``min_gain``: the interval is the min-max of the per-round ratios, and more rounds can only
lower its low end. So after any round:

- **a finalist whose lowest ratio already misses the bar can never be recommended**: it is dropped, and
  not measured again. This is exact: the decision is the one all ``repeats`` rounds would give (no
  added error);
- **when every finalist is dropped**, the finals end: "keep your settings" is already certain (exact too);
- **a finalist far behind the leader** (the finalist with the best mean log-ratio so far) is dropped when
  the chance that it ends above the leader is under :data:`ALPHA` split over the looks (one per round
  but the last: Bonferroni), under the normal model below. Its error can cost a gain (a smaller one, or
  none where the leader later misses the bar), never claim a false one: a recommendation still clears the
  bar in every round;
- **when every finalist left clears the bar in at least 2 rounds and they lie within** :data:`CLOSE`
  **(5%) of the leader's mean ratio** (one finalist left: it alone), the remaining rounds are skipped when
  the chance that any of them puts any finalist below the bar is under :data:`ALPHA` (5%, split over the
  finalists), under a normal model of the paired log-ratios: the mean of its log-ratios, and their standard deviation
  pooled over every finalist's paired rounds, never below :data:`SIGMA_FLOOR` (paired ratios on a
  2-core machine moved 3-30% between rounds). The predictive spread of a new round is
  sigma x sqrt(1 + 1/n); the chance of a miss in ``k`` more rounds is bounded by k times one round's
  (Bonferroni). **Error rate:** whether a gain is claimed differs from the full rounds' decision in at
  most 5% of such ends where the model holds; which config is chosen may differ, but only among finalists
  measured within 5% of each other.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from speedopt.study import Finals
from speedopt.study.record_types import Drop

#: The largest chance, per finals, that skipping the remaining rounds changes the decision.
ALPHA = 0.05
#: The least standard deviation of a paired log-ratio assumed, whatever the rounds so far show.
SIGMA_FLOOR = 0.10
#: Finalists within this share of the leader's mean ratio are as good as it (issue 30's "within 5% of the best").
CLOSE = 0.05


def _ratios(finals: Finals, trial: int, upto: int) -> list[float]:
    """The paired ratios of ``trial`` to the baseline in rounds ``0..upto`` (those where both measured ok)."""
    pairs = zip(finals.series(trial)[: upto + 1], finals.series(finals.baseline)[: upto + 1])
    return [c / b for c, b in pairs if c is not None and b is not None and b > 0]


def _sigma(finals: Finals, upto: int) -> float:
    """The pooled standard deviation of the finalists' paired log-ratios, floored at :data:`SIGMA_FLOOR`."""
    squares, dof = 0.0, 0
    for trial in finals.trials[1:]:
        logs = [math.log(r) for r in _ratios(finals, trial, upto)]
        if len(logs) >= 2:
            mean = statistics.fmean(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            dof += len(logs) - 1
    return max(SIGMA_FLOOR, math.sqrt(squares / dof) if dof else 0.0)


def miss_chance(finals: Finals, trial: int, upto: int) -> float:
    """The chance (bounded, normal model) that a round after ``upto`` puts ``trial``'s ratio below the bar."""
    logs = [math.log(r) for r in _ratios(finals, trial, upto)]
    left = finals.repeats - upto - 1
    if not logs or left <= 0:
        return 0.0
    spread = _sigma(finals, upto) * math.sqrt(1.0 + 1.0 / len(logs))
    z = (math.log(1.0 + finals.min_gain) - statistics.fmean(logs)) / spread
    return min(1.0, left * 0.5 * math.erfc(-z / math.sqrt(2.0)))


def _behind(finals: Finals, round_: int, gone: set[int]) -> list[Drop]:
    """Finalists far behind the leader (the best mean log-ratio): the chance each ends above it is under
    :data:`ALPHA` split over the looks (normal model, :func:`_sigma`)."""
    logs = {t: [math.log(r) for r in _ratios(finals, t, round_)] for t in finals.active(round_)[1:] if t not in gone}
    logs = {t: v for t, v in logs.items() if v}
    if len(logs) < 2 or round_ + 1 >= finals.repeats:
        return []
    leader = max(logs, key=lambda t: statistics.fmean(logs[t]))
    sigma, looks = _sigma(finals, round_), max(1, finals.repeats - 1)
    out = []
    for trial, values in logs.items():
        if trial == leader:
            continue
        spread = sigma * math.sqrt(1 / len(values) + 1 / len(logs[leader]))
        z = (statistics.fmean(logs[leader]) - statistics.fmean(values)) / spread
        chance = 0.5 * math.erfc(z / math.sqrt(2.0))
        if chance < ALPHA / looks:
            out.append(Drop(trial, round_, f"far behind trial {leader}: the chance it ends above it is {100 * chance:.1f}% "
                                           f"(< {100 * ALPHA / looks:.1f}%, normal model, sigma {sigma:.2f})"))
    return out


def look(finals: Finals, round_: int) -> Finals:
    """The finals after ``round_`` (0-based) is complete: finalists dropped, or the rounds ended, where due."""
    if finals.end is not None or not finals.round_done(round_):
        return finals
    bar = 1.0 + finals.min_gain
    drops = list(finals.dropped)
    for trial in finals.active(round_)[1:]:
        ratios = _ratios(finals, trial, round_)
        if ratios and (min(ratios) <= 1.0 or min(ratios) < bar):
            why = (f"its round-{ratios.index(min(ratios)) + 1} ratio {min(ratios):.2f}x already misses the bar "
                   f"({bar:.2f}x in every round): it cannot be recommended")
            drops.append(Drop(trial, round_, why))
    drops += _behind(finals, round_, {d.trial for d in drops})
    finals = replace(finals, dropped=tuple(drops))
    left = finals.active(round_ + 1)
    if round_ + 1 >= finals.repeats:
        return finals
    if not left:
        return replace(finals, end=round_ + 1, end_why="no finalist can clear the bar any more: keep your settings")
    settled = _settled(finals, round_, left[1:], bar)
    return finals if settled is None else replace(finals, end=round_ + 1, end_why=settled)


def _settled(finals: Finals, round_: int, leaders: tuple[int, ...], bar: float) -> str | None:
    """Why the rounds left cannot change the decision much (None: run them): every finalist left cleared the bar
    in at least 2 rounds, each with a chance under :data:`ALPHA` / their number of missing it in a round left,
    and they all lie within :data:`CLOSE` of the leader's mean ratio (one left: it alone)."""
    logs = {t: [math.log(r) for r in _ratios(finals, t, round_)] for t in leaders}
    if any(len(v) < 2 or math.exp(min(v)) <= 1.0 or math.exp(min(v)) < bar for v in logs.values()):
        return None
    chances = {t: miss_chance(finals, t, round_) for t in leaders}
    if max(chances.values()) >= ALPHA / len(leaders):
        return None
    means = {t: statistics.fmean(v) for t, v in logs.items()}
    top = max(means.values())
    if any(top - m > math.log(1.0 + CLOSE) for m in means.values()):
        return None
    sigma = f"normal model, sigma {_sigma(finals, round_):.2f} pooled, floor {SIGMA_FLOOR:.2f}"
    if len(leaders) == 1:
        return (f"trial {leaders[0]} is the one finalist left and clears the bar in every round; the chance that a "
                f"round left would miss it is {100 * chances[leaders[0]]:.1f}% (< {100 * ALPHA:.0f}%, {sigma})")
    return (f"trials {', '.join(map(str, leaders))} clear the bar in every round (each with under "
            f"{100 * ALPHA / len(leaders):.1f}% chance to miss it in a round left, {sigma}) and lie within "
            f"{100 * CLOSE:.0f}% of each other: the rounds left could only swap configs that close")
