import pytest

from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.search import _space as space
from speedopt.study import Space
from speedopt.study.record_types import Domain


def test_default_adapts_to_the_machine():
    cpu = space.default_space(Knobs(imgsz=640), cores=2, cuda=False)
    assert cpu.domains["workers"].values() == (0, 1, 2)
    assert cpu.domains["amp"].values() == (False,)
    assert cpu.domains["imgsz"].values() == (320, 352, 384, 416, 448, 480, 512, 544, 576, 608, 640)
    gpu = space.default_space(Knobs(), cores=16, cuda=True, gpu_memory_mb=80_000)
    assert gpu.domains["amp"].values() == (True, False, "bf16")  # the engine leaves bf16 out where its GPU lacks it
    assert gpu.domains["compile"].values() == ("off", "default") and cpu.domains["compile"].values() == ("off",)
    assert gpu.domains["channels_last"].values() == ("default", "off") and cpu.domains["channels_last"].values() == ("default",)
    assert gpu.domains["deterministic"].values() == (True, False) and cpu.domains["deterministic"].values() == (True,)
    assert max(gpu.domains["batch"].values()) == 256 and max(gpu.domains["workers"].values()) == 16


def test_space_file_and_fix(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text("batch: [8, 16]\nimgsz: {low: 320, high: 640, step: 64}\ncache: [none, true]\nmodel: [yolov5n.pt]\n")
    domains = space.load_file(str(f))
    assert domains["batch"].values() == (8, 16)
    assert domains["imgsz"].values() == (320, 384, 448, 512, 576, 640)
    assert domains["cache"].values() == ("none", "ram")
    assert domains["model"].values() == ("yolov5n",)
    f.write_text("deterministic: [on, off]\n")
    assert space.load_file(str(f))["deterministic"].values() == (True, False)
    assert space.parse_fix(["amp=off", "workers=4"]) == {
        "amp": Domain(choices=(False,)),
        "workers": Domain(choices=(4,)),
    }


@pytest.mark.parametrize(
    "text, match",
    [
        ("batch: [0]", "batch must be a positive"),
        ("lr: [0.1]", "unknown knob"),
        ("imgsz: [300]", "multiples of 32"),
        ("cache: [fast]", "cache must be one of"),
        ("model: {low: 1, high: 2}", "list of values"),
        ("batch: []", "no values"),
        ("workers: {low: 4, high: 2}", "low <= high"),
        ("[1, 2", "not valid YAML"),
        ("- batch", "must map knobs"),
    ],
)
def test_bad_space_files(tmp_path, text, match):
    f = tmp_path / "space.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match=match):
        space.load_file(str(f))


def test_bad_fix():
    with pytest.raises(UsageError, match="KNOB=VALUE"):
        space.parse_fix(["batch"])
    with pytest.raises(UsageError, match="workers must be 0 or more"):
        space.parse_fix(["workers=-2"])


def test_baseline_in_trainer_form():
    knobs = space.parse_baseline("model=yolov5s.pt imgsz=640 batch=16 workers=8 cache=True epochs=300 amp=False")
    assert knobs == Knobs(model="yolov5s", imgsz=640, batch=16, workers=8, cache="ram", amp=False, freeze=0)
    assert space.parse_baseline(None) == Knobs()
    with pytest.raises(UsageError, match="key=value"):
        space.parse_baseline("yolov5s")
    with pytest.raises(UsageError, match="unknown knob"):
        space.parse_baseline("lr0=0.1")


def test_space_always_contains_the_baseline():
    s = Space(
        {
            "workers": Domain(low=0, high=2),
            "batch": Domain(choices=(4, 8)),
            "imgsz": Domain(low=320, high=640, step=64),
            "cache": Domain(choices=("none", "disk")),
            "amp": Domain(choices=(False,)),
            "model": Domain(choices=("yolov5n", "yolov5s")),
            "freeze": Domain(choices=(0,)),
        }
    )
    wide = s.containing(Knobs(workers=8, batch=16, imgsz=672, cache="ram", amp=False, model="yolov5n"))
    assert wide.domains["workers"].values() == tuple(range(0, 9))
    assert wide.domains["batch"].values() == (4, 8, 16)
    assert 672 in wide.domains["imgsz"].values()
    assert wide.domains["cache"].values() == ("disk", "none", "ram")
    assert wide.domains["freeze"].values() == (0,)  # fixed knobs stay fixed
    assert Space.from_dict(wide.to_dict()) == wide


def test_baseline_without_text_takes_the_pinned_values():
    pinned = {"model": "yolov5n", "imgsz": 320}
    assert space.parse_baseline(None, pinned) == Knobs(model="yolov5n", imgsz=320)
    assert space.parse_baseline("", pinned) == Knobs(model="yolov5n", imgsz=320)
    assert space.parse_baseline("model=yolov5s imgsz=640", pinned) == Knobs(model="yolov5s", imgsz=640)  # given: as given


def test_domain_text_is_what_the_user_wrote():
    assert Domain(choices=(4, 8)).text() == "[4, 8]"
    assert Domain(choices=(True, False)).text() == "[on, off]"
    assert Domain(low=320, high=640, step=32).text() == "320..640 step 32"
    assert Domain(low=0, high=8).text() == "0..8"


@pytest.mark.parametrize(
    "text, match",
    [
        ("workers: {low: 0, high: 100000000}", "workers must be at most"),
        ("batch: {low: 1, high: 1000000000000}", "batch must be at most 4096"),
        ("batch: [8, 100000]", "batch must be at most 4096"),
        ("imgsz: {low: 320, high: 1048576}", "imgsz must be at most 8192"),
        ("imgsz: {low: 320, high: 640, step: 1}", "step must be a multiple of 32"),
        ("freeze: {low: 0, high: 10, step: true}", "positive integer step"),
        ("batch: {low: 1, high: '" + "9" * 5000 + "'}", "batch must be an integer"),
    ],
)
def test_ranges_and_values_are_bounded(tmp_path, text, match):
    f = tmp_path / "space.yaml"
    f.write_text(text + "\n")
    with pytest.raises(UsageError, match=match) as info:
        space.load_file(str(f))
    assert len(str(info.value)) < 400


def test_space_file_alias_bomb_is_refused(tmp_path):
    f = tmp_path / "space.yaml"
    lines = ["a: &a [8, 8, 8, 8, 8, 8, 8, 8, 8]"]
    lines += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")]
    f.write_text("\n".join(lines) + "\nbatch: *i\n")
    with pytest.raises(UsageError, match="aliases would expand"):
        space.load_file(str(f))
