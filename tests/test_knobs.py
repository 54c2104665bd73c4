import pytest

from speedopt.errors import UsageError
from speedopt.knobs import Knobs, knobs_text, parse_bool, parse_value, resolve_model, round_imgsz, validate
from tests.conftest import checkpoint_file


def test_imgsz_rounds_up_to_stride_and_says_so():
    assert round_imgsz(640) == (640, None)
    size, note = round_imgsz(300)
    assert size == 320 and "300" in note and "320" in note
    assert round_imgsz(1)[0] == 32


@pytest.mark.parametrize(
    "change, match",
    [
        ({"batch": 0}, "batch"),
        ({"batch": -4}, "batch"),
        ({"imgsz": 0}, "imgsz"),
        ({"workers": -1}, "workers"),
        ({"cache": "gpu"}, "cache"),
        ({"freeze": 99}, "freeze"),
        ({"model": "yolov9z"}, "unknown model"),
        ({"model": "missing.pt"}, "not found"),
        ({"data": "thumbnails"}, "data must be one of original, resized"),
    ],
)
def test_bad_knobs_raise_one_line(change, match):
    with pytest.raises(UsageError, match=match) as info:
        validate(Knobs(**change))
    assert "\n" not in str(info.value)


def test_model_resolution(tmp_path):
    assert resolve_model("YOLOv5M") == "yolov5m"
    weights = checkpoint_file(tmp_path / "best.pt")
    assert resolve_model(str(weights)) == str(weights.resolve())
    (tmp_path / "noise.pt").write_bytes(b"x")  # a .pt model is inspected as --weights is: the trainer unpickles it
    with pytest.raises(UsageError, match="is not a YOLO checkpoint"):
        resolve_model(str(tmp_path / "noise.pt"))


def test_dict_round_trip_and_unknown_keys():
    knobs = Knobs(model="yolov5n", imgsz=320, batch=8, workers=2, cache="ram", amp=False, freeze=3)
    assert Knobs.from_dict(knobs.to_dict()) == knobs
    with pytest.raises(UsageError, match="unknown knob"):
        Knobs.from_dict({"lr": 0.1})


def test_parse_bool():
    assert parse_bool("on") is True and parse_bool("OFF") is False
    with pytest.raises(UsageError):
        parse_bool("maybe")


def test_the_data_knob_reads_like_the_others_and_shows_only_when_resized():
    from speedopt.knobs import knobs_text, parse_value

    assert parse_value("data", "Resized") == "resized"
    with pytest.raises(UsageError, match="speedopt prepare"):
        parse_value("data", "small")
    assert "data=resized" in knobs_text(Knobs(data="resized"))
    assert "data=" not in knobs_text(Knobs())
    assert Knobs.from_dict({"model": "yolov5n"}).data == "original"  # a record made before the knob existed


@pytest.mark.parametrize(
    ("knob", "given", "value"),
    [
        ("amp", "bf16", "bf16"), ("amp", "fp16", True), ("amp", "FP32", False), ("amp", True, True), ("amp", "off", False),
        ("compile", False, "off"), ("compile", True, "default"), ("compile", "reduce-overhead", "reduce-overhead"),
        ("compile", "on", "default"), ("channels_last", None, "default"), ("channels_last", True, "on"),
        ("channels_last", "off", "off"),
    ],
)
def test_the_newer_knobs_read_the_trainers_own_spellings(knob, given, value):
    assert parse_value(knob, given) == value


@pytest.mark.parametrize(("knob", "given"), [("amp", "fp8"), ("compile", "Max Autotune!"), ("channels_last", "sideways")])
def test_a_bad_newer_knob_value_is_one_line(knob, given):
    with pytest.raises(UsageError) as refused:
        parse_value(knob, given)
    assert knob in str(refused.value) and "\n" not in str(refused.value)


def test_the_newer_knobs_default_to_the_trainers_own_defaults_and_show_only_when_set():
    assert (Knobs().compile, Knobs().channels_last) == ("off", "default")
    assert Knobs.from_dict({"model": "yolov5n"}).compile == "off"  # a study stored before them reads as it ran
    assert "compile" not in knobs_text(Knobs())
    assert knobs_text(Knobs(amp="bf16", compile="default")).endswith("amp=bf16 freeze=0 compile=default")
