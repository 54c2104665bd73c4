"""A checkpoint (``--weights``, a ``.pt`` model) is checked without unpickling it for real: real Ultralytics and yolov5 checkpoints pass,
in both torch formats, and a file whose unpickling would run code is refused without running it."""

import datetime
import os
from copy import deepcopy

import pytest

from speedopt.checkpoint import foreign, peek
from speedopt.errors import UsageError
from speedopt.quality import check_weights


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _ultralytics_model():
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics.nn.tasks import DetectionModel

    return DetectionModel("yolov5n.yaml", nc=3, verbose=False)


def _classic_model():
    yolov5 = pytest.importorskip("yolov5")
    from yolov5.models.yolo import Model

    return Model(os.path.join(os.path.dirname(yolov5.__file__), "models", "yolov5n.yaml"), nc=3)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_an_ultralytics_checkpoint_passes(torch, tmp_path, legacy):
    model = _ultralytics_model()
    ckpt = {
        "date": datetime.datetime.now().isoformat(), "version": "8.4", "epoch": 3, "best_fitness": 0.5,
        "model": None, "ema": deepcopy(model).half(), "updates": 10, "optimizer": None,
        "train_args": {"imgsz": 640, "data": "x.yaml"}, "train_metrics": {"metrics/mAP50(B)": 0.1},
    }
    path = tmp_path / "best.pt"
    torch.save(ckpt, path, _use_new_zipfile_serialization=not legacy)
    assert check_weights(str(path))[0] == str(path.resolve())
    assert {"ema", "model", "train_args"} <= peek(path).keys


@pytest.mark.slow  # imports the classic yolov5 package (~6 s)
def test_a_classic_checkpoint_with_numpy_and_optimizer_state_passes(torch, tmp_path):
    import numpy as np

    model = _classic_model()
    ckpt = {
        "epoch": -1, "best_fitness": np.array([0.3]), "model": deepcopy(model).half(), "ema": None, "updates": None,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1).state_dict(), "opt": {"weights": ""}, "date": "today",
    }
    path = tmp_path / "last.pt"
    torch.save(ckpt, path)
    inside = peek(path)
    assert foreign(inside.names) is None and ("numpy", "ndarray") in inside.names
    check_weights(str(path))


def test_a_torch_file_without_a_model_is_not_a_checkpoint(torch, tmp_path):
    path = tmp_path / "tensor.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(UsageError, match="is not a YOLO checkpoint"):
        check_weights(str(path))
    (tmp_path / "noise.pt").write_bytes(os.urandom(4096))
    with pytest.raises(UsageError, match="is not a YOLO checkpoint"):
        check_weights(str(tmp_path / "noise.pt"))


def test_names_a_checkpoint_never_needs_are_foreign():
    assert foreign(frozenset({("torch._utils", "_rebuild_tensor_v2"), ("collections", "OrderedDict")})) is None
    assert foreign(frozenset({("builtins", "eval")})) == "builtins.eval"
    assert foreign(frozenset({("subprocess", "Popen")})) == "subprocess.Popen"
    assert foreign(frozenset({("ultralytics.utils", "os.system")})) == "ultralytics.utils.os.system"  # a path out of a package
    assert foreign(frozenset({("pathlib", "Path.unlink")})) == "pathlib.Path.unlink"
