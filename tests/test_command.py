import pytest

from speedopt import command
from speedopt.knobs import Knobs

CONFIGS = [
    Knobs(),
    Knobs(model="yolov5n", imgsz=320, batch=8, workers=0, cache="ram", amp=False, freeze=10),
    Knobs(model="yolov5x", imgsz=1280, batch=64, workers=16, cache="disk", amp=True, freeze=3),
    Knobs(model="/data/my weights/best.pt", imgsz=640, batch=16, workers=8, cache="none", amp=True, freeze=0),
]


@pytest.mark.parametrize("knobs", CONFIGS)
@pytest.mark.parametrize("device", [None, "0", "0,1,2,3"])
def test_every_printed_form_parses_back(knobs, device):
    data = "/datasets/my data/data.yaml"
    cli = command.parse_yolo_train(command.yolo_train(data, knobs, device=device, epochs=300))
    assert (cli.data, cli.knobs, cli.epochs, cli.device) == (data, knobs, 300, device)
    py = command.parse_python_train(command.python_train(data, knobs, device=device, epochs=300))
    assert (py.data, py.knobs, py.epochs, py.device) == (data, knobs, 300, device)


def test_multi_gpu_form_names_the_devices():
    text = command.yolo_train("d.yaml", Knobs(), device="0,1")
    assert text.endswith("device=0,1")
    assert 'device=\'0,1\'' in command.python_train("d.yaml", Knobs(), device="0,1")


def test_python_form_is_valid_python():
    compile(command.python_train("d.yaml", CONFIGS[1], epochs=10), "<cmd>", "exec")
