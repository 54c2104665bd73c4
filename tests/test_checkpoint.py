"""A checkpoint (``--weights``, a ``.pt`` model) is checked without unpickling it for real: real Ultralytics and yolov5 checkpoints pass
(the exact globals they use are the allowlist: these tests build them, from both trainers, and check every name), the legacy format
is refused with the way to re-save it, and a file whose unpickling would run code is refused without running it."""

import datetime
import os
from copy import deepcopy

import pytest

from speedopt.checkpoint import CALLED, REBUILT, foreign, peek, refusal
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


def _ckpt(model):
    return {
        "date": datetime.datetime.now().isoformat(), "version": "8.4", "epoch": 3, "best_fitness": 0.5,
        "model": None, "ema": deepcopy(model).half(), "updates": 10, "optimizer": None,
        "train_args": {"imgsz": 640, "data": "x.yaml"}, "train_metrics": {"metrics/mAP50(B)": 0.1},
    }


def _allowed(path):
    """The checkpoint's names all on the allowlist, and what it calls all rebuilders."""
    inside = peek(path)
    assert refusal(inside) is None, refusal(inside)
    assert inside.names <= CALLED | REBUILT and {ref for _, ref in inside.calls} <= CALLED
    return inside


def test_an_ultralytics_checkpoint_passes(torch, tmp_path):
    path = tmp_path / "best.pt"
    torch.save(_ckpt(_ultralytics_model()), path)
    assert check_weights(str(path))[0] == str(path.resolve())
    inside = _allowed(path)
    assert {"ema", "model", "train_args"} <= inside.keys
    assert ("ultralytics.nn.tasks", "DetectionModel") in inside.names - {ref for _, ref in inside.calls}  # rebuilt, not called


def test_the_legacy_format_is_refused_with_how_to_resave_it(torch, tmp_path):
    path = tmp_path / "old.pt"
    torch.save(_ckpt(_ultralytics_model()), path, _use_new_zipfile_serialization=False)
    with pytest.raises(UsageError, match=r"legacy \(pre-1\.6, non-zip\) format.*refusing it.*torch\.save\(torch\.load\(") as refused:
        check_weights(str(path))
    assert "\n" not in str(refused.value)
    resaved = tmp_path / "resaved.pt"
    torch.save(torch.load(path, weights_only=False), resaved)  # the advice, followed: a file we made ourselves
    check_weights(str(resaved))


def test_every_global_of_the_yolov5_models_ultralytics_builds_is_on_the_allowlist(torch, tmp_path):
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics.nn.tasks import DetectionModel

    for i, cfg in enumerate(["yolov5n.yaml", "yolov5n-p6.yaml"]):
        path = tmp_path / f"m{i}.pt"
        torch.save({"model": DetectionModel(cfg, nc=3, verbose=False)}, path)
        _allowed(path)


@pytest.mark.slow  # imports the classic yolov5 package and builds each of its detection models
def test_every_global_of_the_models_the_classic_package_builds_is_on_the_allowlist(torch, tmp_path):
    yolov5 = pytest.importorskip("yolov5")
    from yolov5.models.yolo import Model

    folder = os.path.join(os.path.dirname(yolov5.__file__), "models")
    names = ["yolov5n.yaml", *(f"hub/{n}" for n in sorted(os.listdir(os.path.join(folder, "hub"))))]
    for i, name in enumerate(n for n in names if n.startswith(("yolov5n", "hub/yolov5-", "hub/yolov5s", "hub/yolov5n"))):
        path = tmp_path / f"m{i}.pt"
        torch.save({"model": Model(os.path.join(folder, name), nc=3)}, path)
        _allowed(path)


_TRAIN = {
    "ultralytics": """
import sys
from pathlib import Path
from speedopt.engines.ultralytics import UltralyticsEngine
UltralyticsEngine().prepare(Path(sys.argv[3]))
from ultralytics import YOLO
YOLO("yolov5n.yaml").train(data=sys.argv[1], imgsz=64, epochs=1, batch=4, device="cpu", workers=0, project=sys.argv[2],
                           name="w", exist_ok=True, plots=False, amp=False, seed=0, verbose=False)
""",
    "yolov5": """
import sys
from pathlib import Path
from speedopt import engines
engines.get("yolov5").prepare(Path(sys.argv[3]))
from yolov5 import train
try:
    train.run(data=sys.argv[1], cfg="yolov5n.yaml", weights="", imgsz=64, epochs=1, batch_size=4, device="cpu", workers=0,
              project=sys.argv[2], name="w", exist_ok=True, noplots=True)
except Exception:  # torch >= 2.6 refuses its final torch.load (weights_only): the checkpoints are written by then
    pass
""",
}


@pytest.mark.slow  # trains one epoch with each trainer
@pytest.mark.parametrize("engine", ["ultralytics", "yolov5"])
def test_the_checkpoints_each_trainer_saves_pass(torch, demo_yaml, tmp_path, engine):
    import subprocess
    import sys

    from speedopt import engines
    from speedopt.offline import cache_dir

    if engine == "yolov5":
        pytest.importorskip("yolov5")
    env = {**os.environ, **engines.get(engine).environment(cache_dir())}
    done = subprocess.run([sys.executable, "-c", _TRAIN[engine], str(demo_yaml), str(tmp_path), str(cache_dir())], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    saved = sorted((tmp_path / "w" / "weights").glob("*.pt"))
    assert [p.name for p in saved] == ["best.pt", "last.pt"], done.stderr[-3000:]
    for path in saved:
        check_weights(str(path))
        _allowed(path)


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
    inside = _allowed(path)
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
    # Issue 44, item 1: exact names, not packages: numpy's exec() helper and torch.load are refused.
    assert foreign(frozenset({("numpy.testing._private.utils", "runstring")})) == "numpy.testing._private.utils.runstring"
    assert foreign(frozenset({("torch", "load")})) == "torch.load"
    assert foreign(frozenset({("ultralytics.utils.downloads", "safe_download")})) == "ultralytics.utils.downloads.safe_download"


@pytest.mark.slow  # imports both trainers' model modules (about 3 s)
def test_the_allowlists_hold_classes_and_rebuilders_only():
    """Every allowlisted name that imports here is what its list says: a class (rebuilt from state) or a data
    constructor, never a function that acts on the world (the names of other numpy or torch versions may not import)."""
    import importlib

    for module, name in sorted(REBUILT | CALLED):
        try:
            value = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        assert callable(value), (module, name)
        if (module, name) in REBUILT - CALLED:
            assert isinstance(value, type), (module, name)
    assert not {(m, n) for m, n in CALLED if m.startswith(("ultralytics.nn", "yolov5.models", "models."))}


def _archive(path, entries, prefix=b""):
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    path.write_bytes(prefix + path.read_bytes())
    return path


def test_a_zip_torch_would_read_differently_is_refused(tmp_path):
    import pickle

    good = pickle.dumps({"model": None, "ema": None}, protocol=2)
    _archive(tmp_path / "ok.pt", {"ok/data.pkl": good, "ok/version": b"3\n"})
    check_weights(str(tmp_path / "ok.pt"))
    cases = {
        "script.pt": ({"script/data.pkl": good, "script/constants.pkl": good}, b""),  # torch.load -> torch.jit.load
        "case.pt": ({"case/data.pkl": good, "case/DATA.PKL": good}, b""),  # names torch's reader may confuse
        "two.pt": ({"a/data.pkl": good, "b/x": b""}, b""),  # entries outside one folder
        "moved.pt": ({"moved/data.pkl": good}, b"PK\x03\x04" + b"\0" * 60),  # the central directory not where recorded
    }
    for name, (entries, prefix) in cases.items():
        with pytest.raises(UsageError, match="is not a YOLO checkpoint"):
            check_weights(str(_archive(tmp_path / name, entries, prefix)))
