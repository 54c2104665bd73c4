"""The paired-ratio interval and the decision rule, on synthetic measurements (no trainer)."""

import random

import pytest

from speedopt.speedup import NO_GAIN, Speedup, decide, paired


def _rounds(rate, noise, rounds, rng):
    """Images/s of one config in each round: ``rate`` with uniform +/-``noise`` relative noise."""
    return [rate * (1 + rng.uniform(-noise, noise)) for _ in range(rounds)]


def test_paired_ratio_median_and_min_max_interval():
    s = paired([12.0, 9.0, 15.0], [10.0, 10.0, 10.0])
    assert (s.median, s.low, s.high, s.rounds) == (pytest.approx(1.2), pytest.approx(0.9), pytest.approx(1.5), 3)
    assert not s.certain  # one round measured the config slower than the baseline beside it
    assert s.text() == "1.20x (interval 0.90-1.50x, min-max of 3 paired rounds)"


def test_failed_rounds_are_left_out_of_the_pairs():
    s = paired([20.0, None, 22.0], [10.0, 10.0, None])
    assert s.rounds == 1 and s.median == pytest.approx(2.0)
    assert not s.certain  # a single pair gives no interval
    assert paired([None], [10.0]) is None


def test_a_small_gain_under_large_noise_keeps_the_baseline():
    # 5% gain, 14% noise (this machine's spread for one config): most seeds cannot certify it.
    kept = 0
    for seed in range(50):
        rng = random.Random(seed)
        base = _rounds(10.0, 0.14, 3, rng)
        decision = decide({1: paired(_rounds(10.5, 0.14, 3, rng), base)})
        kept += decision.choice is None
        if decision.choice is None:
            assert decision.reason.startswith(NO_GAIN) and decision.speedup is None
    assert kept >= 35


def test_a_2x_gain_is_recommended_with_an_interval_above_one():
    for seed in range(50):
        rng = random.Random(seed)
        base = _rounds(10.0, 0.14, 3, rng)
        decision = decide({1: paired(_rounds(20.0, 0.14, 3, rng), base), 2: paired(_rounds(10.2, 0.14, 3, rng), base)})
        assert decision.choice == 1 and decision.speedup.low > 1.0
        assert 1.4 < decision.speedup.median < 2.8


def test_the_best_median_among_certain_candidates_wins():
    certain_small, certain_big = Speedup(1.3, 1.1, 1.4, 3), Speedup(1.6, 1.05, 2.0, 3)
    uncertain_huge = Speedup(3.0, 0.9, 4.0, 3)
    decision = decide({"a": certain_small, "b": certain_big, "c": uncertain_huge, "d": None})
    assert decision.choice == "b" and decision.speedup == certain_big


def test_nothing_measured_keeps_the_baseline():
    decision = decide({1: None})
    assert decision.choice is None and decision.reason == NO_GAIN


def test_a_margin_keeps_small_certain_gains_from_being_claimed():
    # This machine's demo: cache=ram measured 1.03x (1.03-1.06x) in one session, 0.95x the next.
    small = Speedup(1.03, 1.03, 1.06, 3)
    assert decide({1: small}).choice == 1
    held = decide({1: small}, min_gain=0.05)
    assert held.choice is None and "at least 5%" in held.reason
    assert decide({1: Speedup(1.4, 1.2, 1.5, 3)}, min_gain=0.05).choice == 1
