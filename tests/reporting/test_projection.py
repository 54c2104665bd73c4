"""The full-run estimate: its arithmetic and the inputs it names."""

import pytest

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.reporting import project
from speedopt.status import Status


def _result(**figures):
    return TrialResult(Status.OK, "", Knobs(cache="disk"), Knobs(), "cpu", "ultralytics", steps=20, **figures)


def test_total_is_build_plus_epochs_of_train_and_validation():
    r = _result(images_per_s=20.0, images_total=1000, images_used=100, train_build_s=2.0, val_build_s=1.0)
    p = project(r, epochs=10, val_s=5.0)
    assert p.build_s == pytest.approx(2.0 * 10 + 1.0)  # the subset's build scaled to the full set, plus val
    assert p.epoch_train_s == pytest.approx(50.0)
    assert p.total_s == pytest.approx(21.0 + 10 * (50.0 + 5.0))
    assert any("scaled x10.0 to 1000" in b for b in p.basis) and any("validation pass 5.0 s" in b for b in p.basis)


def test_untimed_validation_is_left_out_and_said_so():
    p = project(_result(images_per_s=10.0, images_total=100), epochs=3, val_s=None)
    assert p.total_s == pytest.approx(30.0) and p.val_s is None
    assert "validation not timed: left out of the total" in p.basis


def test_no_projection_without_a_throughput():
    assert project(_result(images_total=100), epochs=3, val_s=None) is None
    assert project(_result(images_per_s=10.0), epochs=3, val_s=None) is None
