"""The installed Ultralytics' defaults, and the probe as the user's run in miniature."""

from pathlib import Path

import pytest

from speedopt.engines._base import ProbeRun
from speedopt.engines._ultralytics_cfg import miniature
from speedopt.knobs import Knobs


def test_a_probe_ends_as_the_run_ends_its_closing_no_mosaic_share_and_the_trainers_own_warm_up():
    assert miniature(10, 100) == {"close_mosaic": 1}  # 10 of 100 epochs without mosaic: 1 of 10
    assert miniature(20, 100) == {"close_mosaic": 2} and miniature(4, 15) == {"close_mosaic": 3}
    assert miniature(2, 1000) == {"close_mosaic": 1}  # at least one closing epoch, as the run has
    assert miniature(10, 10) == {} and miniature(10, 5) == {}  # no longer than the probe: its own schedule is the run's
    assert all("warmup_epochs" not in miniature(e, 100) for e in (1, 5, 50))  # warm-up: iterations, not a share


@pytest.mark.slow  # builds a real trainer (imports ultralytics and torch: seconds)
def test_the_probe_trainer_takes_the_miniature(demo_yaml: Path, tmp_path: Path):
    from speedopt.engines.ultralytics import UltralyticsEngine, _probe_trainer

    UltralyticsEngine().prepare(tmp_path / "cache")
    knobs = Knobs(model="yolov5n", imgsz=64, batch=4, workers=0)
    (tmp_path / "w").mkdir()
    (tmp_path / "w2").mkdir()  # a job's private folders: the runner makes them
    run = ProbeRun(str(demo_yaml), knobs, "cpu", 10, 0.5, 0, tmp_path / "w", None, run_epochs=100)
    assert _probe_trainer(run, lambda t: None).args.close_mosaic == 1
    own = ProbeRun(str(demo_yaml), knobs, "cpu", 10, 0.5, 0, tmp_path / "w2", None)  # no run given: the trainer's own
    assert _probe_trainer(own, lambda t: None).args.close_mosaic == 10
