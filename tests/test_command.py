"""Every command form speedopt prints parses back to the same knobs (round trip), in every dialect."""

import dataclasses
import shlex
from pathlib import Path

import pytest

from speedopt import command
from speedopt.engines import EngineSpec
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from tests.conftest import checkpoint_file

CONFIGS = [
    Knobs(),
    Knobs(model="yolov5n", imgsz=320, batch=8, workers=0, cache="ram", amp=False, freeze=10),
    Knobs(model="yolov5x", imgsz=1280, batch=64, workers=16, cache="disk", amp=True, freeze=3),
    Knobs(model="/data/my weights/best.pt", imgsz=640, batch=16, workers=8, cache="none", amp=True, freeze=0),
    Knobs(model="yolov5s", amp="bf16", compile="default", channels_last="off", deterministic=False),
    Knobs(model="yolov5m", compile="max-autotune-no-cudagraphs", channels_last="on"),
]


@pytest.mark.parametrize("knobs", CONFIGS)
@pytest.mark.parametrize("device", [None, "0", "0,1,2,3"])
def test_every_printed_form_parses_back(knobs, device):
    data = "/datasets/my data/data.yaml"
    knobs = dataclasses.replace(knobs, gpus=command.gpus_of(device))  # device=0,1,2,3 is DDP on 4 GPUs: gpus=4
    cli = command.parse_yolo_train(command.yolo_train(data, knobs, device=device, epochs=300))
    assert (cli.data, cli.knobs, cli.epochs, cli.device) == (data, knobs, 300, device)
    py = command.parse_python_train(command.python_train(data, knobs, device=device, epochs=300))
    assert (py.data, py.knobs, py.epochs, py.device) == (data, knobs, 300, device)


@pytest.mark.parametrize("knobs, weights", [(Knobs(model="/w/my best.pt"), None), (Knobs(model="/w/mine.yaml"), None),
                                             (Knobs(model="yolov5n"), "/w/last.pt")])
def test_a_command_that_loads_a_users_file_runs_it_as_the_trials_did(knobs, weights, tmp_path):
    """Issue 54 (left by round three): a printed Ultralytics command that loads a file of the user's (a model .pt or
    .yaml, a checkpoint to start from) sets the trainer's no-eval switch, as every trial ran: pasted into a shell, the
    trainer (a stand-in ``yolo`` on PATH, printing what it got) sees ULTRALYTICS_SAFE_LOAD=1; the Python form sets it
    before ultralytics is imported; both read back. A built-in scale trained from scratch needs none."""
    import os
    import subprocess

    line = command.yolo_train("d.yaml", knobs, weights=weights)
    assert line.startswith("ULTRALYTICS_SAFE_LOAD=1 yolo detect train ")
    stub = tmp_path / "yolo"
    stub.write_text('#!/bin/sh\necho "safe=$ULTRALYTICS_SAFE_LOAD $1"\n')
    stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "ULTRALYTICS_SAFE_LOAD"} | {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    ran = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True)
    assert ran.stdout.strip() == "safe=1 detect", ran.stderr
    assert command.parse_yolo_train(line).knobs == knobs
    code = command.python_train("d.yaml", knobs, weights=weights)
    assert code.index("os.environ['ULTRALYTICS_SAFE_LOAD'] = '1'") < code.index("from ultralytics import YOLO")
    assert command.parse_python_train(code).knobs == knobs
    assert "SAFE_LOAD" not in command.yolo_train("d.yaml", Knobs(model="yolov5n")) + command.python_train("d.yaml", Knobs(model="yolov5n"))


def test_the_checkpoint_the_probes_started_from_is_in_every_form():
    # Verdicts judged by fine-tuning a checkpoint (a frozen backbone above all) hold for a run from it, not
    # from scratch: the printed command starts where the probes did, and reads back with it.
    knobs, ckpt = Knobs(model="yolov5n", imgsz=320, batch=8, freeze=10), "/w/my best.pt"
    cli = command.yolo_train("d.yaml", knobs, weights=ckpt)
    assert "'pretrained=/w/my best.pt'" in cli and command.parse_yolo_train(cli).weights == ckpt
    assert command.parse_python_train(command.python_train("d.yaml", knobs, weights=ckpt)).weights == ckpt
    classic = command.train_py("d.yaml", knobs, weights=ckpt)
    flags = shlex.split(classic)
    assert flags[flags.index("--weights") + 1] == ckpt and flags[flags.index("--cfg") + 1] == "yolov5n.yaml"
    back = command.parse_train_py(classic)
    assert back.weights == ckpt and back.knobs == dataclasses.replace(knobs, amp=True)
    own = Knobs(model="/w/best.pt")  # a model that is itself the checkpoint: nothing to add
    assert "pretrained" not in command.yolo_train("d.yaml", own, weights="/w/best.pt")
    assert command.parse_yolo_train(command.yolo_train("d.yaml", knobs)).weights is None


def test_device_lists_read_back_as_the_gpus_knob():
    assert [command.gpus_of(d) for d in (None, "cpu", "0", "0,1", "0,1,2,3", [0, 1, 2])] == [1, 1, 1, 2, 4, 3]
    classic = command.parse_train_py(command.train_py("d.yaml", Knobs(gpus=2), device="0,1"))
    assert classic.gpus == classic.knobs.gpus == 2
    assert "torch.distributed.run --nproc_per_node 2 train.py" in command.train_py("d.yaml", Knobs(gpus=2), device="0,1")


def test_multi_gpu_form_names_the_devices():
    text = command.yolo_train("d.yaml", Knobs(), device="0,1")
    assert text.endswith("device=0,1")
    assert 'device=\'0,1\'' in command.python_train("d.yaml", Knobs(), device="0,1")


def test_python_form_is_valid_python():
    compile(command.python_train("d.yaml", CONFIGS[1], epochs=10), "<cmd>", "exec")


@pytest.fixture
def weights(tmp_path):
    return str(checkpoint_file(tmp_path / "best.pt"))  # only the path matters here


@pytest.mark.parametrize("device", ["cpu", "0", "0,1", "0,1,2,3"])
@pytest.mark.parametrize(
    "knobs",
    [
        Knobs(model="yolov5s", imgsz=640, batch=16, workers=8, cache="none", freeze=0),
        Knobs(model="yolov5n", imgsz=320, batch=64, workers=0, cache="ram", freeze=10),
        Knobs(model="yolov5x", imgsz=1280, batch=2, workers=3, cache="disk", freeze=3),
    ],
)
def test_train_py_round_trip(knobs, device):
    gpus = len(device.split(",")) if device != "cpu" else 1
    knobs = dataclasses.replace(knobs, gpus=gpus)
    text = command.train_py("/data/my set/data.yaml", knobs, device=device, epochs=300)
    back = command.parse_train_py(text)
    # AMP is no train.py flag: it is on exactly when the run uses CUDA.
    assert back.knobs == Knobs(**{**knobs.to_dict(), "amp": device != "cpu"})
    assert (back.data, back.device, back.epochs, back.gpus) == ("/data/my set/data.yaml", device, 300, gpus)


def test_train_py_round_trip_with_local_weights_and_custom_yaml(weights, tmp_path):
    import ultralytics

    custom = tmp_path / "my-yolov5.yaml"  # a real model yaml (the trainer's own), as a user's copy of it would be
    custom.write_text((Path(ultralytics.__file__).parent / "cfg" / "models" / "v5" / "yolov5.yaml").read_text())
    for model in (weights, str(custom)):
        knobs = Knobs(model=model, imgsz=416, batch=8, workers=2, cache="ram", amp=True, freeze=2)
        assert command.parse_train_py(command.train_py("d.yaml", knobs, device="0")).knobs == knobs


def test_train_py_forms():
    knobs = Knobs(model="yolov5s", imgsz=640, batch=32, workers=8, cache="none", freeze=0)
    single = shlex.split(command.train_py("data.yaml", knobs, device="0", epochs=100))
    assert single[:2] == ["python", "train.py"]
    assert single[single.index("--weights") + 1] == "" and single[single.index("--cfg") + 1] == "yolov5s.yaml"
    assert "--cache" not in single  # no cache: no flag (a bare --cache means ram)
    ddp = command.train_py("data.yaml", knobs, device="0,1", epochs=100)
    assert ddp.startswith("python -m torch.distributed.run --nproc_per_node 2 train.py --data data.yaml ")
    assert ddp.endswith("--device 0,1")


def test_parse_a_users_own_command():
    parsed = command.parse_train_py(
        "python -m torch.distributed.run --nproc_per_node 4 --master_port 1 train.py --img 640 --batch 64 "
        "--epochs 3 --data coco128.yaml --weights yolov5m.pt --cache --hyp data/hyps/hyp.scratch-low.yaml --device 0,1,2,3"
    )
    assert parsed.knobs == Knobs(model="yolov5m", imgsz=640, batch=64, workers=8, cache="ram", amp=True, freeze=0, gpus=4)
    assert parsed.gpus == 4 and parsed.epochs == 3
    defaults = command.parse_train_py("python yolov5/train.py --data d.yaml --freeze 0 1 2")
    assert defaults.knobs == Knobs(freeze=3)  # train.py's defaults: yolov5s.pt, 640, 16, 8 workers


@pytest.mark.parametrize(
    "text, says",
    [
        ("yolo detect train data=d.yaml", "no train.py"),
        ("python train.py --data d.yaml --freeze 1 2", "first N layers"),
        ("python train.py --data d.yaml --cache fast", "--cache 'fast'"),
        ("python train.py --batch-size many", "invalid int value"),
        ("python -m torch.distributed.run --nproc_per_node x train.py", "not a GPU count"),
        ("python train.py --weights '' --cfg ''", "neither --cfg nor --weights"),
    ],
)
def test_parse_rejects_what_is_not_a_classic_config(text, says):
    with pytest.raises(UsageError, match=says):
        command.parse_train_py(text)


def test_speedopt_trial_names_the_engine():
    knobs = Knobs(model="yolov5n", imgsz=128, batch=4, workers=0, amp=False)
    text = command.speedopt_trial("d.yaml", knobs, "cpu", 3, 1, engine_spec=EngineSpec("yolov5", "/src/yolov5"))
    assert text.endswith("--engine yolov5 --yolov5-dir /src/yolov5")
    assert "--engine" not in command.speedopt_trial("d.yaml", knobs, "cpu", 3, 1)


def test_the_newer_knobs_are_written_only_where_set_in_the_trainers_spelling():
    plain = command.yolo_train("d.yaml", Knobs())
    assert not {"compile", "channels_last", "deterministic"} & {w.split("=")[0] for w in shlex.split(plain)}  # older trainers
    words = shlex.split(command.yolo_train("d.yaml", Knobs(amp="bf16", compile="default", channels_last="off", deterministic=False)))
    assert {"amp=bf16", "compile=True", "channels_last=False", "deterministic=False"} <= set(words)
    trial = command.speedopt_trial("d.yaml", Knobs(compile="reduce-overhead"), "cpu", 3, 1)
    assert "--compile reduce-overhead" in trial and "--channels-last" not in trial and "--deterministic" not in trial
    assert "--deterministic off" in command.speedopt_trial("d.yaml", Knobs(deterministic=False), "cpu", 3, 1)
    assert "deterministic" not in command.train_py("d.yaml", Knobs(deterministic=False), device="0")  # train.py: no flag
