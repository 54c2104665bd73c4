import pytest

from speedopt.knobs import Knobs
from speedopt.measure import StepClock, TrialResult
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
