"""Planning a search: inputs checked, the protocol decided, nothing stored (no trainer runs)."""

import dataclasses

import pytest

from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.search import SearchConfig, plan
from speedopt.study import StudyProtocol

BASELINE = "model=yolov5n imgsz=128 batch=4 workers=0"


def _config(demo_yaml, tmp_path, **change):
    given = {"data": str(demo_yaml), "device": "cpu", "baseline": BASELINE, "storage": f"sqlite:///{tmp_path}/s.db"}
    return SearchConfig(**{**given, **change})


def _space_file(tmp_path, text):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return str(path)


def test_plan_decides_the_protocol_and_touches_no_storage(demo_yaml, tmp_path):
    p = plan(_config(demo_yaml, tmp_path, quality="off", trials=5, fix=("workers=1",)))
    proto = p.protocol
    assert proto.baseline == Knobs(model="yolov5n", imgsz=128, batch=4, workers=0, amp=False)
    assert proto.trials == 5 and proto.device == "cpu" and proto.dataset.train_images == 48
    assert set(proto.space.sampled()) == {"cache"}  # quality off pins the rest
    assert proto.space.fixed()["workers"] == 0  # the trainer runs 0 workers on CPU whatever --fix says (noted)
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
        ({"timeout_s": -1.0}, "--timeout must be a positive, finite number"),
        ({"trial_timeout_s": 0.0}, "--trial-timeout must be a positive"),
        ({"steps": 1}, "--steps must be at least 2"),
        ({"ram_limit_gb": -2.0}, "--ram-limit must be a positive"),
        ({"quality": "maybe"}, "--quality must be probe, all or off"),
        ({"probe_timeout_s": 0.0}, "--probe-timeout must be a positive"),
        ({"fix": ("speed=11",)}, "unknown knob 'speed'"),
        ({"engine": "darknet"}, "unknown engine 'darknet'"),
        ({"steps": 10, "max_steps": 5}, "--max-steps must be at least --steps"),
        ({"repeats": 1}, "--repeats must be 0"),
        ({"finalists": 0}, "--finalists must be at least 1"),
        ({"min_gain": 1.5}, "--min-gain must be a fraction"),
    ],

)
def test_bad_input_is_one_line(demo_yaml, tmp_path, change, says):
    with pytest.raises(UsageError, match=says):
        plan(_config(demo_yaml, tmp_path, **change))


def test_without_baseline_the_pinned_values_are_the_baseline(demo_yaml, tmp_path):
    """The issue's run: --fix model=yolov5n imgsz=320 and no --baseline measured yolov5s 640 as the baseline."""
    p = plan(_config(demo_yaml, tmp_path, baseline=None, quality="off", fix=("model=yolov5n", "imgsz=320")))
    assert p.protocol.baseline == Knobs(model="yolov5n", imgsz=320, batch=16, workers=0, amp=False)
    assert "baseline: the trainer's defaults with your pinned model=yolov5n imgsz=320 (no --baseline given)" in p.notes
    assert not any("accuracy not checked" in n for n in p.notes)  # every accuracy knob is the baseline's


def test_one_value_space_entries_join_the_baseline_too(demo_yaml, tmp_path):
    space = _space_file(tmp_path, "batch: [8]\ncache: [none, disk]\n")
    p = plan(_config(demo_yaml, tmp_path, baseline=None, quality="off", space_file=space, fix=("model=yolov5n",)))
    assert (p.protocol.baseline.model, p.protocol.baseline.batch, p.protocol.baseline.cache) == ("yolov5n", 8, "none")
    assert p.protocol.space.fixed()["batch"] == 8 and p.protocol.space.sampled()["cache"].values() == ("none", "disk")


def test_a_given_baseline_stays_as_given(demo_yaml, tmp_path):
    p = plan(_config(demo_yaml, tmp_path, quality="off", fix=("imgsz=96",)))
    assert p.protocol.baseline.imgsz == 128 and p.protocol.space.fixed()["imgsz"] == 96  # the pin is kept, not replaced
    assert "quality off: accuracy not checked for your pinned imgsz=96: the baseline has imgsz=128 (--quality probe checks it)" in p.notes
    probed = plan(_config(demo_yaml, tmp_path, space_file=_space_file(tmp_path, "batch: [2, 8]\n")))
    assert probed.protocol.baseline.batch == 4 and probed.protocol.space.domains["batch"].values() == (2, 4, 8)


def test_quality_off_keeps_a_one_value_space_entry(demo_yaml, tmp_path):
    space = _space_file(tmp_path, "batch: [8]\namp: [off]\nworkers: [0]\n")
    p = plan(_config(demo_yaml, tmp_path, quality="off", space_file=space))
    assert p.protocol.space.fixed()["batch"] == 8  # not replaced by the baseline's 4
    assert "quality off: model, imgsz, freeze fixed at the baseline; no probes" in p.notes
    assert "quality off: accuracy not checked for your pinned batch=8: the baseline has batch=4 (--quality probe checks it)" in p.notes


def test_fix_over_a_space_entry_is_noted(demo_yaml, tmp_path):
    p = plan(_config(demo_yaml, tmp_path, space_file=_space_file(tmp_path, "imgsz: [64, 128]\n"), fix=("imgsz=96",)))
    assert p.protocol.space.fixed()["imgsz"] == 96
    assert "--fix imgsz=96 overrides the space file's imgsz [64, 128]" in p.notes


QUALITY_OFF = "keeps the accuracy knobs (model, imgsz, freeze, batch, amp, data) at the baseline's values"


@pytest.mark.parametrize(
    "space, change, says",
    [
        (
            "batch: [4, 8]\n",
            {"baseline": None, "quality": "off", "fix": ("model=yolov5n", "imgsz=320")},
            f"--space lists batch [4, 8] but --quality off {QUALITY_OFF}; remove batch from the space file or use --quality probe",
        ),
        (
            "imgsz: {low: 64, high: 128}\nmodel: [yolov5n, yolov5s]\ncache: [none, disk]\n",
            {"quality": "off"},
            f"--space lists model [yolov5n, yolov5s] and imgsz 64..128 step 32 but --quality off {QUALITY_OFF}; "
            "remove model, imgsz from the space file or use --quality probe",
        ),
        (
            "workers: [0, 2]\n",
            {},
            "--space lists workers [0, 2] but the ultralytics engine runs workers=0 here (on CPU `yolo detect train` runs 0 "
            "dataloader workers whatever the command says (the trainer sets workers=0 on CPU), so the trial runs 0 as the "
            "real run will); remove workers from the space file",
        ),
        ("workers: [2]\n", {"quality": "off"}, "--space lists workers [2] but the ultralytics engine runs workers=0 here"),
        (
            "amp: [on, off]\n",
            {},
            "--space lists amp [on, off] but AMP needs CUDA and this search runs on the CPU; "
            "remove amp from the space file or list amp: [off]",
        ),
        ("amp: [on]\n", {"quality": "off"}, "--space lists amp [on] but AMP needs CUDA"),
        (
            "compile: [off, max-autotune-everything]\n",
            {"quality": "off"},
            "--space lists compile max-autotune-everything, which the ultralytics trainer here does not take (the modes "
            "the installed Ultralytics",
        ),
        ("channels_last: [on, off]\n", {"quality": "off"}, "--space lists channels_last [on, off] but the ultralytics engine runs channels_last=default here (channels_last is a CUDA-only option"),
    ],
)
def test_a_listed_knob_is_never_silently_dropped_or_replaced(demo_yaml, tmp_path, space, change, says):
    with pytest.raises(UsageError) as refused:
        plan(_config(demo_yaml, tmp_path, space_file=_space_file(tmp_path, space), **change))
    message = str(refused.value)
    assert message.startswith(says) and "\n" not in message
    assert not (tmp_path / "s.db").exists()


def test_the_same_knobs_from_the_default_space_keep_their_notes(demo_yaml, tmp_path):
    p = plan(_config(demo_yaml, tmp_path, quality="off", fix=("amp=on",)))  # a --fix, not a --space entry: noted
    assert p.protocol.space.fixed()["amp"] is False and "amp=on dropped from the space: AMP needs CUDA" in p.notes
    assert p.protocol.space.fixed()["workers"] == 0 and any(n.startswith("workers is not searched") for n in p.notes)


def test_compile_modes_listed_on_the_cpu_are_decided_at_the_end_and_the_plan_says_what_is_not_offered(demo_yaml, tmp_path):
    p = plan(_config(demo_yaml, tmp_path, quality="off", space_file=_space_file(tmp_path, "compile: [off, default]\n")))
    assert p.protocol.space.domains["compile"].values() == ("off",) and p.protocol.compile_modes == ("default",)
    assert any("decided once at the end" in n for n in p.notes)
    assert any(n.startswith("channels_last is not searched: channels_last is a CUDA-only option") for n in p.notes)
    assert p.protocol.space.fixed()["channels_last"] == "default"
