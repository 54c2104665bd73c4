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


def _build(train_s, val_s):
    from speedopt.engines import LabelCacheBuild, SplitLabels

    splits = (
        SplitLabels("train", "/d/labels/train.cache", 1000, train_s, False, "h", "1"),
        SplitLabels("val", "/d/labels/val.cache", 50, val_s, False, "h", "1"),
    )
    return LabelCacheBuild("/d/data.yaml", splits)


def test_the_label_scan_is_counted_once_from_the_study_build_not_scaled_per_trial():
    # The trial read the prebuilt cache (no scan): its build is the cache fill alone, scaled to the full set;
    # the label scan is the labels job's measured seconds for train and val, added once.
    r = _result(images_per_s=20.0, images_total=1000, images_used=100, train_build_s=0.5, val_build_s=0.25, label_scan_s=0.0)
    p = project(r, epochs=10, val_s=5.0, labels=_build(30.0, 2.0))
    assert p.label_scan_s == pytest.approx(32.0)
    assert p.build_s == pytest.approx(32.0 + 0.5 * 10 + 0.25)
    assert p.total_s == pytest.approx(p.build_s + 10 * (50.0 + 5.0))
    assert any("label scan 32.0 s measured once for 1050 train and val images" in b for b in p.basis)
    assert any("multi-GPU" in n for n in p.notes)


def test_a_trial_that_scanned_anyway_does_not_count_the_scan_twice():
    r = _result(images_per_s=20.0, images_total=1000, images_used=100, train_build_s=3.0, val_build_s=1.0, label_scan_s=2.5)
    p = project(r, epochs=1, val_s=None, labels=_build(30.0, 2.0))
    assert p.build_s == pytest.approx(32.0 + (3.0 - 2.5) * 10 + 1.0)


def test_without_a_build_a_trial_that_read_a_cache_says_the_scan_is_missing():
    r = _result(images_per_s=20.0, images_total=1000, images_used=100, train_build_s=0.5, val_build_s=0.25, label_scan_s=0.0)
    p = project(r, epochs=1, val_s=None)
    assert p.label_scan_s is None and p.build_s == pytest.approx(5.25)
    assert any("label scan not included" in b for b in p.basis)


def test_total_is_the_sum_of_its_parts_with_checkpoint_saves():
    r = _result(images_per_s=20.0, images_total=1000, images_used=100, train_build_s=2.0, val_build_s=1.0)
    p = project(r, epochs=10, val_s=5.0, save_s=0.5)
    assert p.save_s == 0.5 and p.epoch_s == pytest.approx(50.0 + 5.0 + 0.5)
    assert p.total_s == pytest.approx(21.0 + 10 * (50.0 + 5.0 + 0.5))
    assert sum(p.parts().values()) == pytest.approx(p.total_s)
    assert p.parts()["checkpoint saves"] == pytest.approx(5.0)
    assert p.share("validation") == pytest.approx(50.0 / p.total_s)
    assert any("checkpoint save 0.50 s" in b and "upper bound" in b for b in p.basis)


def test_an_untimed_save_is_left_out_and_said_so():
    p = project(_result(images_per_s=10.0, images_total=100), epochs=3, val_s=1.0)
    assert p.save_s is None and p.total_s == pytest.approx(3 * (10.0 + 1.0)) == pytest.approx(sum(p.parts().values()))
    assert "checkpoint save not timed: left out of the total" in p.basis


def test_a_validation_time_stored_before_saves_were_timed_still_reads():
    from speedopt.measure import JobOutcome, ValidationTime

    assert ValidationTime(1.5, 4) == ValidationTime(1.5, 4, None)
    old = JobOutcome(Status.OK, "x", {"val_s": 1.5, "val_images": 4}, 1.0, "", (), 0.0, 1.0)
    new = JobOutcome(Status.OK, "x", {"val_s": 1.5, "val_images": 4, "save_s": 0.2}, 1.0, "", (), 0.0, 1.0)
    assert old.validation() == ValidationTime(1.5, 4, None) and new.validation() == ValidationTime(1.5, 4, 0.2)


def test_compile_is_counted_once_not_per_epoch():
    r = TrialResult(Status.OK, "", Knobs(compile="default"), Knobs(compile="default"), "cpu", "ultralytics", steps=20,
                    images_per_s=10.0, images_total=100, compile_s=30.0)
    p = project(r, epochs=5, val_s=None)
    assert p is not None and p.compile_s == 30.0 and p.total_s == pytest.approx(30.0 + 5 * 10.0)
    assert p.parts()["torch.compile"] == 30.0 and sum(p.parts().values()) == pytest.approx(p.total_s)
    assert any("torch.compile (compile=default) 30.0 s" in b and "counted once" in b for b in p.basis)
    eager = project(_result(images_per_s=10.0, images_total=100), epochs=5, val_s=None)
    assert eager is not None and eager.compile_s == 0.0 and not any("torch.compile" in b for b in eager.basis)


def test_the_mosaic_off_epochs_are_counted_at_their_own_rate():
    from speedopt.reporting._projection import MosaicOff

    r = _result(images_per_s=10.0, images_total=100, data_wait_fraction=0.5)
    mosaic = MosaicOff(epochs=10, data_on=10.0, data_off=40.0)  # the loader 4x faster with mosaic off
    p = project(r, epochs=30, val_s=None, mosaic=mosaic, mosaic_epochs=10)
    # per image 0.1 s, half of it waiting for data; with mosaic off that wait shrinks to a quarter: 0.0625 s
    assert p is not None and p.epoch_train_off_s == pytest.approx(100 * 0.0625) and p.mosaic_off_epochs == 10
    assert p.total_s == pytest.approx(20 * 10.0 + 10 * 6.25) and sum(p.parts().values()) == pytest.approx(p.total_s)
    assert any("the last 10 epochs train with mosaic off" in b and "10.0 and 40.0 images/s" in b for b in p.basis)
    unmeasured = project(r, epochs=30, val_s=None, mosaic_epochs=10)
    assert unmeasured is not None and unmeasured.total_s == pytest.approx(300.0)
    assert any("counted at the mosaic rate: the loader was not measured with mosaic off" in b for b in unmeasured.basis)
    short = project(r, epochs=4, val_s=None, mosaic=mosaic, mosaic_epochs=10)  # a run of close_mosaic epochs or fewer
    assert short is not None and short.mosaic_off_epochs == 4 and short.total_s == pytest.approx(4 * 6.25)


def test_the_runs_warm_up_adds_its_extra_optimizer_steps_at_the_measured_step_time():
    """Issue 53: the trial measured the steady cadence (a step every 8 batches); the run's warm-up steps 911 times
    where that cadence steps 468.75, so the projection adds the difference at the trial's step time, as an estimate."""
    from speedopt import engines

    steps = engines.get("ultralytics").warmup_steps(10_000, 16, 100)
    assert steps is not None and steps[0] > steps[1] > 0  # the ramp from 1 to nbs/batch steps more than the steady cadence
    r = _result(images_per_s=100.0, images_total=10_000, optimizer="MuSGD", optimizer_step_s=0.2, accumulate=4)
    p = project(r, epochs=100, val_s=None, warmup=steps)
    assert p.warmup_s == pytest.approx((steps[0] - steps[1]) * 0.2)
    assert p.total_s == pytest.approx(100 * 100.0 + p.warmup_s) and p.share("optimizer warm-up") > 0
    assert any("an estimate" in b and "MuSGD" in b for b in p.basis)
    untimed = project(_result(images_per_s=100.0, images_total=10_000), epochs=100, val_s=None, warmup=steps)
    assert untimed.warmup_s == 0.0  # a trial recorded before its step time was: nothing added, nothing claimed


def test_the_warm_up_step_count_is_the_trainers_own():
    """The count of optimizer steps in the run's warm-up, against the trainer's _do_train arithmetic as it writes it
    (np.interp of the accumulation, rounded; a step once as many batches gathered). The real trainer's own count is
    checked in tests/engines/test_ultralytics_optim.py."""
    import numpy as np

    from speedopt import engines

    for images, batch, epochs in [(48, 8, 100), (10_000, 16, 100), (96, 32, 10), (48, 8, 2), (1000, 64, 5)]:
        per_epoch, nominal = -(-images // batch), max(round(64 / batch), 1)
        warm = round(min(3.0, epochs - 1) * per_epoch)
        last, steps = -1, 0
        for ni in range(warm):
            accumulate = max(1, int(np.interp(ni, [0, warm], [1, nominal]).round()))
            if ni - last >= accumulate:
                steps, last = steps + 1, ni
        assert engines.get("ultralytics").warmup_steps(images, batch, epochs) == (steps, warm / nominal)
