"""Planning a search: inputs checked, the protocol decided, nothing stored (no trainer runs)."""

import dataclasses

import pytest

from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.study import SearchConfig, StudyProtocol, plan

BASELINE = "model=yolov5n imgsz=128 batch=4 workers=0"


def _config(demo_yaml, tmp_path, **change):
    return SearchConfig(data=str(demo_yaml), device="cpu", baseline=BASELINE, storage=f"sqlite:///{tmp_path}/s.db", **change)


def test_plan_decides_the_protocol_and_touches_no_storage(demo_yaml, tmp_path):
    p = plan(_config(demo_yaml, tmp_path, quality="off", trials=5, fix=("workers=1",)))
    proto = p.protocol
    assert proto.baseline == Knobs(model="yolov5n", imgsz=128, batch=4, workers=0, amp=False)
    assert proto.trials == 5 and proto.device == "cpu" and proto.dataset.train_images == 48
    assert proto.space.fixed()["workers"] == 1 and set(proto.space.sampled()) == {"cache"}  # quality off pins the rest
    assert any("quality off" in n for n in p.notes) and any("baseline amp=off" in n for n in p.notes)
    assert p.study_name.startswith("shapes-cpu-") and not (tmp_path / "s.db").exists()


def test_protocol_round_trips_through_study_attrs(demo_yaml, tmp_path):
    proto = plan(_config(demo_yaml, tmp_path)).protocol
    assert StudyProtocol.from_attrs(proto.to_attrs()) == proto
    assert proto.conflict(proto.to_attrs(), "s") is None
    other = dataclasses.replace(proto, steps=proto.steps + 1)
    assert "was made with steps 20 but this command gives 21" in other.conflict(proto.to_attrs(), "s")


def test_a_study_speedopt_did_not_make_has_no_protocol():
    with pytest.raises(UsageError, match="not made by speedopt search"):
        StudyProtocol.from_attrs({"note": "hand-made"}, "x")


@pytest.mark.parametrize(
    "change, says",
    [
        ({"trials": 0}, "--trials must be at least 1"),
        ({"timeout_s": -1.0}, "--timeout must be positive"),
        ({"trial_timeout_s": 0.0}, "--trial-timeout must be positive"),
        ({"steps": 1}, "--steps must be at least 2"),
        ({"ram_limit_gb": -2.0}, "--ram-limit must be positive"),
        ({"quality": "maybe"}, "--quality must be probe or off"),
        ({"probe_timeout_s": 0.0}, "--probe-timeout must be positive"),
        ({"fix": ("speed=11",)}, "unknown knob 'speed'"),
        ({"engine": "darknet"}, "unknown engine 'darknet'"),
    ],
)
def test_bad_input_is_one_line(demo_yaml, tmp_path, change, says):
    with pytest.raises(UsageError, match=says):
        plan(_config(demo_yaml, tmp_path, **change))
