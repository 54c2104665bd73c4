import pytest

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.measure._clock import StepClock, one_time_s, t_quantiles
from speedopt.status import Status, TrialFinished


class FakeTime:
    """A clock the test advances by hand, so the expected statistics are exact."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _drive(clock, now, waits, computes, images):
    for wait, compute, n in zip(waits, computes, images):
        now.t += wait
        clock.batch_start()
        now.t += compute
        clock.batch_end(n)


def test_clock_measures_only_steps_after_warmup():
    now = FakeTime()
    clock = StepClock(warmup=2, steps=3, now=now)
    _drive(clock, now, [5.0, 1.0], [9.0, 9.0], [4, 4])  # warm-up: slow, must not count
    with pytest.raises(TrialFinished):
        _drive(clock, now, [0.5, 0.0, 1.5], [1.5, 2.0, 0.5], [4, 4, 2])
    stats = clock.stats()
    assert stats.measured_s == pytest.approx(6.0)
    assert stats.measured_images == 10
    assert stats.images_per_s == pytest.approx(10 / 6.0)
    assert stats.data_wait_fraction == pytest.approx(2.0 / 6.0)
    assert stats.step_s_median == pytest.approx(2.0)
    assert stats.step_s_p90 == pytest.approx(2.0)
    assert stats.window == pytest.approx((124.0, 130.0))
    assert clock.first_batch_at == pytest.approx(105.0)
    # the warm-up steps are kept apart (the first: its step alone): a compiled model's one-time cost is in them
    assert stats.warmup_s == pytest.approx((9.0, 10.0))
    assert one_time_s(stats.warmup_s, stats.step_s) == pytest.approx(9.0 + 10.0 - 2 * 2.0)
    assert one_time_s((), stats.step_s) is None


def test_stats_need_all_steps():
    now = FakeTime()
    clock = StepClock(warmup=1, steps=3, now=now)
    _drive(clock, now, [1, 1], [1, 1], [1, 1])
    with pytest.raises(RuntimeError):
        clock.stats()


def test_progress_reports_phases():
    now, seen = FakeTime(), []
    clock = StepClock(warmup=1, steps=2, progress=lambda *a: seen.append(a), now=now)
    with pytest.raises(TrialFinished):
        _drive(clock, now, [1, 1, 1], [1, 1, 1], [1, 1, 1])
    assert seen == [("warmup", 1, 1), ("measure", 1, 2), ("measure", 2, 2)]


def test_result_round_trips_through_dict():
    result = TrialResult(
        status=Status.OOM, message="m", config=Knobs(batch=8), requested=Knobs(batch=8), device="cpu",
        engine="ultralytics", notes=("a",), network_blocked=("socket.connect 1.2.3.4",),
    )
    data = result.to_dict()
    assert data["status"] == "oom" and data["notes"] == ["a"] and data["config"]["batch"] == 8
    assert TrialResult.from_dict(data) == result


def test_window_grows_until_the_interval_is_tight():
    # Alternating 1.6 s / 2.4 s steps: the mean (2 s) is known to +/-5% only after about 44 steps.
    now = FakeTime()
    clock = StepClock(warmup=1, steps=3, max_steps=200, now=now)
    _drive(clock, now, [0.0], [1.0], [4])
    with pytest.raises(TrialFinished):
        for i in range(400):
            _drive(clock, now, [0.0], [1.6 if i % 2 else 2.4], [4])
    stats = clock.stats()
    assert 30 < stats.steps < 60
    assert stats.converged and stats.ci_rel <= 0.05
    assert stats.images_per_s == pytest.approx(2.0, rel=0.05)


def test_window_stops_at_max_steps_when_noise_stays_high():
    now = FakeTime()
    clock = StepClock(warmup=1, steps=3, max_steps=6, now=now)
    with pytest.raises(TrialFinished):
        for i in range(50):
            _drive(clock, now, [0.0], [1.0 if i % 2 else 5.0], [4])
    stats = clock.stats()
    assert stats.steps == 6 and not stats.converged and stats.ci_rel > 0.05


def test_steady_steps_stop_at_the_minimum():
    now = FakeTime()
    clock = StepClock(warmup=1, steps=4, max_steps=100, now=now)
    with pytest.raises(TrialFinished):
        for _ in range(50):
            _drive(clock, now, [0.0], [1.0], [4])
    assert clock.stats().steps == 4


def test_warmup_consumes_the_prefetch_queue_first():
    # 2 workers x 2 prefetched batches: the first batches come from the queue without waiting; the
    # window starts only after a batch had to wait for data (the queue is empty: steady state).
    now = FakeTime()
    clock = StepClock(warmup=1, steps=2, queued=4, now=now)
    _drive(clock, now, [0.0] * 6, [1.0] * 6, [4] * 6)  # the queue still serves: still warming up
    assert clock.window is None
    _drive(clock, now, [0.5], [1.0], [4])  # waited for data: warm-up ends with this batch
    with pytest.raises(TrialFinished):
        _drive(clock, now, [0.5, 0.5], [1.0, 1.0], [4, 4])
    stats = clock.stats()
    assert stats.warmup == 7 and stats.steps == 2
    assert stats.images_per_s == pytest.approx(8 / 3.0)


def test_a_queue_that_never_empties_stops_warmup_at_its_cap():
    now = FakeTime()
    clock = StepClock(warmup=2, steps=2, queued=2, now=now)
    with pytest.raises(TrialFinished):
        _drive(clock, now, [0.0] * 20, [1.0] * 20, [4] * 20)
    assert clock.stats().warmup == 2 + 3 * 2


def test_a_drifting_rate_keeps_the_window_open():
    # Each step 2% slower than the one before: after 10 steps the interval is tight (+/-3.5%), but the halves disagree, so the
    # window runs to its maximum instead of stopping on the early, faster steps.
    now = FakeTime()
    clock = StepClock(warmup=1, steps=10, max_steps=40, now=now)
    with pytest.raises(TrialFinished):
        for i in range(100):
            _drive(clock, now, [0.0], [1.0 * 1.02**i], [4])
    stats = clock.stats()
    assert stats.steps == 40 and not stats.converged
    assert clock.drift() > 0.05


def test_no_statistics_library_runs_between_measured_steps(monkeypatch):
    # The t quantiles are computed when the clock is built: importing or calling scipy between two steps
    # would be timed as part of the next step.
    import sys

    now = FakeTime()
    clock = StepClock(warmup=1, steps=3, max_steps=30, now=now)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)  # any import of it now fails
    with pytest.raises(TrialFinished):
        for i in range(40):
            _drive(clock, now, [0.0], [1.6 if i % 2 else 2.4], [4])
    assert clock.stats().ci_rel is not None


def test_t_quantiles_are_students_two_sided_90_percent_points():
    q = t_quantiles(12)
    assert q[:2] == [float("inf"), float("inf")]  # n < 2: no interval
    # Student's t, 0.95 quantile (two-sided 90%), for n samples: n - 1 degrees of freedom (printed tables)
    assert q[2] == pytest.approx(6.3138, abs=1e-4) and q[11] == pytest.approx(1.8125, abs=1e-4)


def _steps_until_done(clock, now, compute):
    with pytest.raises(TrialFinished):
        for i in range(500):
            _drive(clock, now, [0.0], [compute(i)], [4])
    return clock.stats().steps


@pytest.mark.parametrize(("cycle", "steps", "most", "expected"), [
    (8, 20, 60, 24),   # steady: the first whole number of cycles at or past the minimum
    (4, 20, 60, 20),   # the minimum is whole cycles already
    (64, 20, 60, 20),  # no whole cycle fits the maximum: the window is as before
    (1, 20, 60, 20),
])
def test_a_steady_window_holds_whole_optimizer_cycles(cycle, steps, most, expected):
    """Issue 53: at the run's cadence the optimizer steps once every `cycle` batches; a window of whole cycles holds
    as many steps per batch as the run does."""
    now = FakeTime()
    clock = StepClock(warmup=1, steps=steps, max_steps=most, now=now)
    clock.cycle(cycle)
    assert _steps_until_done(clock, now, lambda i: 1.0) == expected


def test_a_noisy_window_at_its_maximum_still_ends_on_a_whole_cycle():
    now = FakeTime()
    clock = StepClock(warmup=1, steps=10, max_steps=30, now=now)
    clock.cycle(8)
    steps = _steps_until_done(clock, now, lambda i: 1.0 if i % 2 else 5.0)
    assert steps == 24 and steps % 8 == 0  # 30 holds 3 whole cycles of 8, not 4
