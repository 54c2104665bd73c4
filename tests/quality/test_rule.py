"""The rule's parts: the floor under a look's spread, the risk spent over confirmations, the second length, the run's loss."""

import math

import pytest

from speedopt.quality import ProbeBudget
from speedopt.quality._budget import t_quantile
from speedopt.quality._rule import Look, confirm_risk, floor, half_width, run_loss

ASKED = ProbeBudget(10, 0.25)


def _look(diffs, budget=ASKED) -> Look:
    base = tuple(0.5 for _ in diffs)
    return Look(budget, tuple(range(len(diffs))), base, tuple(0.5 - d for d in diffs), 0.7)


def test_two_seeds_that_agree_by_chance_get_the_searchs_typical_spread():
    lucky = _look((0.010, 0.0101))  # sd 0.00007: alone, its interval would be +/- 0.0002
    assert half_width(lucky, 0.9) == pytest.approx(t_quantile(2) * lucky.sd / math.sqrt(2))
    others = [0.02, 0.03, lucky.sd]  # the search's other paired looks at this budget
    assert floor(others) == pytest.approx(0.02) and floor([]) == 0.0 and floor([0.01, 0.03]) == pytest.approx(0.02)
    assert half_width(lucky, 0.9, floor(others)) == pytest.approx(t_quantile(2) * 0.02 / math.sqrt(2))  # 0.044: no kept at 0.01
    assert half_width(_look((0.0, 0.1)), 0.9, 0.02) == pytest.approx(t_quantile(2) * _look((0.0, 0.1)).sd / math.sqrt(2))


def test_confirmations_never_spend_more_than_the_stated_risk():
    spent = [confirm_risk(0.1, i) for i in range(40)]
    assert spent[:3] == pytest.approx([0.05, 0.025, 0.0125]) and sum(spent) < 0.1


def test_the_run_loss_carries_a_growing_loss_on_and_gives_no_credit_for_a_shrinking_one():
    short, long = _look((0.0, 0.002), ProbeBudget(10, 0.25)), _look((0.004, 0.006), ProbeBudget(20, 0.25))
    loss, growth = run_loss(short, long, 100.0)  # 0.001 at 2.5 epochs, 0.005 at 5: 4.32 doublings to 100
    assert growth == pytest.approx(0.004) and loss == pytest.approx(0.005 + 0.004 * math.log2(20))
    assert run_loss(long, short, 100.0) == (short.loss, 0.0)  # shrinking (here: the lengths swapped, so none)
    shrinking = _look((0.004, 0.006), ProbeBudget(10, 0.25)), _look((0.0, 0.002), ProbeBudget(20, 0.25))
    assert run_loss(*shrinking, 100.0) == (pytest.approx(0.001), 0.0)
    assert run_loss(short, long, 5.0) == (pytest.approx(0.005), 0.0)  # the run is no longer than the long look
