"""The Ultralytics engine on a train set smaller than a trial's batches: the window crosses epoch ends,
as the real run on that set does, and the trial still measures every step it was asked for; and a trial's
arguments are the printed command's."""

import shlex

import pytest

from speedopt import data as demo_data
from speedopt import measure
from speedopt.engines import TrainRun
from speedopt.knobs import Knobs
from speedopt.status import Status


@pytest.mark.slow
def test_an_ultralytics_window_crosses_epoch_ends(tmp_path):
    # 16 images at batch 4: an epoch is 4 batches, so 1 warm-up + 10 measured steps cross two epoch ends.
    small = demo_data.generate(tmp_path / "small", demo_data.DemoSpec(train=16, val=4, width=64, height=48))
    knobs = Knobs(model="yolov5n", imgsz=64, batch=4, workers=0)
    request = measure.make_request(str(small), knobs, measure.TrialOptions(device="cpu", steps=10, warmup=1, max_steps=10))
    assert request.images == request.images_total == 16  # the whole set: no subset to grow
    result = measure.run_trial(request)
    assert result.status is Status.OK, result.message + result.log_tail
    assert result.steps == 10 and result.images_used == 16
    assert result.warmup + result.steps > 16 // 4 * 2  # more batches than two epochs hold
    assert len(result.step_s) == 10 and all(s > 0 for s in result.step_s)


@pytest.mark.slow
def test_a_window_never_measures_the_epochs_where_mosaic_is_off(tmp_path):
    """Issue 31: the trainer turns mosaic off for the last close_mosaic (10) epochs. 8 images at batch 4 are 2 batches
    an epoch: on a 12-epoch schedule mosaic goes off at epoch 2, inside the trial's 11 batches: infeasible, with
    the fix. On an 8-epoch schedule (16 batches) it is off from the first batch, as in that real run: measured as it runs."""
    small = demo_data.generate(tmp_path / "tiny", demo_data.DemoSpec(train=8, val=2, width=64, height=48))
    knobs = Knobs(model="yolov5n", imgsz=64, batch=4, workers=0)
    options = measure.TrialOptions(device="cpu", steps=10, warmup=1, max_steps=10)
    crossing = measure.run_trial(measure.make_request(str(small), knobs, options, epochs=12))
    assert crossing.status is Status.INFEASIBLE, crossing.message + crossing.log_tail
    assert "close_mosaic=10 epochs of its 12-epoch schedule" in crossing.message and "--epochs" in crossing.message
    off_from_the_start = measure.run_trial(measure.make_request(str(small), knobs, options, epochs=8))
    assert off_from_the_start.status is Status.OK, off_from_the_start.message + off_from_the_start.log_tail


@pytest.mark.slow
def test_the_loader_is_measured_with_mosaic_off_for_the_projection(demo_yaml, tmp_path):
    """Issue 31: the projection's last close_mosaic epochs. The data ceiling's loader, once as trained (mosaic on)
    and once with the trainer's own switch thrown first (mode data-no-mosaic): both measure; the projection then
    counts those epochs at the mosaic-off rate. Nothing here asserts which is faster."""
    import dataclasses

    from speedopt.reporting import project
    from speedopt.reporting._projection import MosaicOff

    knobs = Knobs(model="yolov5n", imgsz=128, batch=4, workers=0)
    options = measure.TrialOptions(device="cpu", steps=5, warmup=1, max_steps=5)
    request = measure.make_request(str(demo_yaml), knobs, options)
    on, off = (measure.run_trial(dataclasses.replace(request, mode=mode)) for mode in ("data", measure.MOSAIC_OFF))
    assert on.ok and off.ok, (on.message + on.log_tail, off.message + off.log_tail)
    trial = measure.run_trial(request)
    assert trial.ok, trial.message + trial.log_tail
    mosaic = MosaicOff(10, on.images_per_s, off.images_per_s)
    p = project(trial, epochs=30, val_s=None, mosaic=mosaic, mosaic_epochs=10)
    assert p is not None and p.epoch_train_off_s == pytest.approx(
        trial.images_total * mosaic.step_s(1 / trial.images_per_s, trial.data_wait_fraction or 0.0)
    )


@pytest.mark.parametrize(
    "knobs",
    [Knobs(model="yolov5n", imgsz=128, batch=4, workers=0),
     Knobs(model="yolov5n", cache="disk", freeze=3, compile="default", channels_last="on", deterministic=False)],
)
def test_a_trial_hands_the_trainer_the_printed_commands_keys_and_values(tmp_path, knobs):
    """Issue 55: the trial's arguments come from the registry, spelled as the printed command spells them (compile
    "default" is compile=True in both), with the newer keys the command leaves out at their default given too."""
    from speedopt import command
    from speedopt.engines.ultralytics import _train_overrides
    from speedopt.knobs import KNOBS

    data = tmp_path / "data.yaml"
    data.write_text(f"path: {tmp_path}\ntrain: images\nval: images\nnames: [a]\n")
    run = TrainRun(str(data), knobs, "cpu", 8, 8, 100, tmp_path)
    given = _train_overrides(run)
    printed = dict(w.split("=", 1) for w in shlex.split(command.yolo_train(str(data), knobs))[3:])
    assert {k: str(given[k]) for k in printed if k not in ("data", "model")} == {
        k: v for k, v in printed.items() if k not in ("data", "model")
    }
    assert all(k.yolo in given for k in KNOBS.values() if k.yolo)  # every key, the newer ones at their default too
    assert given["compile"] is (knobs.compile != "off") and given["channels_last"] == {"default": None, "on": True}[knobs.channels_last]
