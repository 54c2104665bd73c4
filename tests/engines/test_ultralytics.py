"""The Ultralytics engine on a train set smaller than a trial's batches: the window crosses epoch ends,
as the real run on that set does, and the trial still measures every step it was asked for."""

import pytest

from speedopt import data as demo_data
from speedopt import measure
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
