"""Knobs as the trainers' own arguments: the values the printed commands hold and the engines hand the trainer."""

import shlex

import pytest

from speedopt import command
from speedopt._trainer_args import model_argument, pretrained, train_py_args
from speedopt.knobs import Knobs


@pytest.mark.parametrize(
    ("model", "argument"), [("yolov5s", "yolov5s.yaml"), ("/w/best.pt", "/w/best.pt"), ("my.yaml", "my.yaml")]
)
def test_a_builtin_scale_is_built_from_its_yaml_and_anything_else_is_passed_as_given(model, argument):
    assert model_argument(model) == argument


def test_a_checkpoint_model_starts_from_itself_not_from_the_probes_weights():
    assert pretrained(Knobs(model="yolov5s"), "/w/ft.pt") == "/w/ft.pt"
    assert pretrained(Knobs(model="/w/best.pt"), "/w/ft.pt") is None
    assert pretrained(Knobs(model="yolov5s"), None) is None


@pytest.mark.parametrize(
    ("model", "weights", "flags"),
    [
        ("yolov5s", None, ["--weights", "", "--cfg", "yolov5s.yaml"]),
        ("yolov5s", "/w/ft.pt", ["--weights", "/w/ft.pt", "--cfg", "yolov5s.yaml"]),
        ("/w/best.pt", "/w/ft.pt", ["--weights", "/w/best.pt"]),
        ("my.yaml", None, ["--weights", "", "--cfg", "my.yaml"]),
    ],
)
def test_train_py_flags_name_the_model_as_train_py_reads_it(model, weights, flags):
    args = train_py_args("d.yaml", Knobs(model=model, cache="ram"), device="0", epochs=3, weights=weights)
    assert args[:2] == ["--data", "d.yaml"] and args[2 : 2 + len(flags)] == flags
    assert args[-6:] == ["--freeze", "0", "--epochs", "3", "--device", "0"] and "--cache" in args


def test_the_printed_classic_command_holds_the_same_flags():
    knobs = Knobs(model="yolov5n", imgsz=320, batch=8)
    assert shlex.split(command.train_py("d.yaml", knobs, device="0")) == ["python", "train.py", *train_py_args("d.yaml", knobs, device="0")]
