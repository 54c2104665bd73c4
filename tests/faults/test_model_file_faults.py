"""Issue 44, items 1-3: no model file runs code. A checkpoint may name only the exact classes and rebuild functions
real checkpoints use (and call only the rebuilders), a legacy-format ``.pt`` is refused (torch unpickles a pickle of
it that no inspection reads), and a model ``.yaml`` holds only the forms the trainers define (both evaluate strings
of it). Every hostile file here is made by the test; its payload would only create a marker file in the test's
folder, and each case asserts that marker never appears."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from speedopt.errors import UsageError
from speedopt.knobs import check_loads
from tests.faults.conftest import Faults, one_line_error

FAST = ("--steps", "2", "--warmup", "1", "--device", "cpu", "--imgsz", "64", "--batch", "4", "--workers", "0")


def _text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def _call(module: str, name: str, *args: bytes) -> bytes:
    """Pickle opcodes for ``module.name(*args)`` (each arg already pickled opcodes)."""
    return b"c" + f"{module}\n{name}\n".encode() + b"(" + b"".join(args) + b"tR"


def _checkpoint(model: bytes) -> bytes:
    """A protocol-2 pickle of ``{"model": <model>, "ema": None}``."""
    return b"\x80\x02}" + _text("model") + model + b"s" + _text("ema") + b"Ns."


def _zip(path: Path, data_pkl: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{path.stem}/data.pkl", data_pkl)
        archive.writestr(f"{path.stem}/version", "3\n")
        archive.writestr(f"{path.stem}/byteorder", "little")
    return path


def _legacy(path: Path, main: bytes, keys: bytes) -> Path:
    """torch's legacy format: magic number, protocol, system info, the object, then the storage keys."""
    info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    head = b"".join(pickle.dumps(x, protocol=2) for x in (0x1950A86A20F9469CFC6C, 1001, info))
    path.write_bytes(head + main + keys)
    return path


def _touch(marker: Path) -> bytes:
    return _call("posix", "system", _text(f"touch {marker}"))


# -- item 1: only the exact globals real checkpoints use -------------------------------------------------------


def _runstring(faults: Faults) -> tuple[Path, Path]:
    """A zip checkpoint whose model is ``numpy.testing._private.utils.runstring(code, {})``: numpy's own helper
    that exec()s its argument (the old check took any numpy function)."""
    marker = faults.root / "pwned"
    code = f"open({str(marker)!r}, 'w').close()"
    model = _call("numpy.testing._private.utils", "runstring", _text(code), b"}")
    return _zip(faults.root / "evil.pt", _checkpoint(model)), marker


@pytest.mark.parametrize("given", ["trial --model", "search --weights"])
def test_a_function_of_a_checkpoint_package_is_refused_by_its_exact_name(faults, given):
    data = faults.dataset()
    evil, marker = _runstring(faults)
    storage = faults.work / "s.db"
    faults.watch(data.parent)
    command, option = given.split()
    args = [command, "--data", str(data), option, str(evil)]
    if command == "search":
        args += ["--storage", f"sqlite:///{storage}", "--trials", "1", "--repeats", "0", "--steps", "2", "--device", "cpu"]
    else:
        args += FAST
    line = one_line_error(faults.run(*args), str(evil), "numpy.testing._private.utils.runstring")
    assert "refusing" in line
    assert not marker.exists() and not storage.exists()
    faults.unchanged()


def test_a_model_class_a_checkpoint_calls_with_arguments_is_refused(faults):
    # DetectionModel is a class every Ultralytics checkpoint names, but only to rebuild it from its saved state
    # (NEWOBJ, no __init__). Called with arguments (REDUCE), its __init__ builds a model from a yaml path, whose
    # activation the trainer evaluates: the call is refused, not only the name.
    marker = faults.root / "pwned"
    yaml = faults.root / "evil.yaml"
    yaml.write_text(f"activation: __import__('os').system('touch {marker}') or __import__('torch').nn.SiLU()\n")
    evil = _zip(faults.root / "evil.pt", _checkpoint(_call("ultralytics.nn.tasks", "DetectionModel", _text(str(yaml)))))
    with pytest.raises(UsageError, match=r"calls ultralytics\.nn\.tasks\.DetectionModel.*refusing") as refused:
        check_loads(str(evil))
    assert "\n" not in str(refused.value) and not marker.exists()


# -- item 2: the legacy format ----------------------------------------------------------------------------------


def test_a_legacy_checkpoint_whose_storage_keys_run_code_is_refused_with_how_to_resave(faults):
    # The main pickle is a plain {"model": None, "ema": None}; the fifth (storage keys), which torch.load unpickles
    # with the full pickle module, calls os.system. The old check read four pickles and passed it.
    data = faults.dataset()
    marker = faults.root / "pwned"
    evil = _legacy(faults.root / "old.pt", _checkpoint(b"N"), b"\x80\x02" + _touch(marker) + b".")
    faults.watch(data.parent)
    line = one_line_error(faults.run("trial", "--data", str(data), *FAST, "--model", str(evil)), str(evil), "legacy")
    assert "refusing" in line and "torch.save(torch.load(" in line
    assert not marker.exists()
    faults.unchanged()


def test_a_legacy_checkpoint_with_a_zip_appended_is_read_as_torch_reads_it(faults):
    # zipfile finds the benign zip at the end; torch looks at the first bytes, sees the legacy format and unpickles
    # the stream before it. The inspection decides on the first bytes too.
    marker = faults.root / "pwned"
    evil = _legacy(faults.root / "dressed.pt", _checkpoint(_touch(marker)), pickle.dumps([], protocol=2))
    benign = _zip(faults.root / "benign.pt", _checkpoint(b"N"))
    evil.write_bytes(evil.read_bytes() + benign.read_bytes())
    assert zipfile.is_zipfile(evil)
    with pytest.raises(UsageError, match=r"refers to posix\.system.*refusing"):
        check_loads(str(evil))
    assert not marker.exists()


# -- item 3: model yamls --------------------------------------------------------------------------------------


def _yolov5_yaml() -> str:
    import ultralytics

    return (Path(ultralytics.__file__).parent / "cfg" / "models" / "v5" / "yolov5.yaml").read_text()


def _hostile_activation(faults: Faults, name: str = "evil-yolov5n.yaml") -> tuple[Path, Path]:
    marker = faults.root / "pwned"
    path = faults.root / name
    path.write_text(_yolov5_yaml() + f"\nactivation: __import__('os').system('touch {marker}') or __import__('torch').nn.SiLU()\n")
    return path, marker


@pytest.mark.parametrize("given", ["trial --model", "search --baseline", "search --fix", "search --space"])
def test_a_model_yaml_whose_activation_runs_code_is_refused(faults, given):
    data = faults.dataset()
    evil, marker = _hostile_activation(faults)
    storage = faults.work / "s.db"
    space = faults.root / "space.yaml"
    space.write_text(f"model: [yolov5n, {evil}]\nbatch: [4]\n")
    faults.watch(data.parent)
    command, option = given.split()
    value = {"--model": str(evil), "--baseline": f"model={evil} imgsz=64 batch=4 workers=0", "--fix": f"model={evil}",
             "--space": str(space)}[option]
    args = [command, "--data", str(data), "--steps", "2", "--warmup", "1", "--device", "cpu", option, value]
    if command == "search":
        args += ["--storage", f"sqlite:///{storage}", "--trials", "1", "--repeats", "0", "--quality", "off"]
    line = one_line_error(faults.run(*args), f"model {evil}", "activation", "__import__('os')")
    assert "refusing" in line
    assert not marker.exists() and not storage.exists()
    faults.unchanged()


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda t, m: t.replace("[-1, 1, Conv, [64, 6, 2, 2]]", f"[-1, 1, \"__import__('os').system('touch {m}')\", [64]]"),
         "backbone[0] module"),  # the classic models/yolo.py eval()s each module name
        (lambda t, m: t.replace("[-1, 1, Conv, [64, 6, 2, 2]]", f"[-1, 1, Conv, [64, \"__import__('os').system('touch {m}')\"]]"),
         "backbone[0] args"),  # ... and each string argument
        (lambda t, m: t.replace("nc: 80", f"nc: \"__import__('os').system('touch {m}')\""), "nc"),
        (lambda t, m: t + f"\nnotes: \"__import__('os').system('touch {m}')\"\n", "notes"),  # a key no trainer defines
        (lambda t, m: t + "\nactivation: nn.SiLU.__init__.__globals__['sys'].modules['os'].system('x')\n", "activation"),
        (lambda t, m: t + "\nactivation: nn.LeakyReLU(__import__('os').system('x'))\n", "activation"),
    ],
    ids=["module", "argument", "nc", "unknown-key", "attribute-chain", "call-in-arguments"],
)
def test_every_string_a_trainer_evaluates_is_held_to_its_form(faults, edit, where):
    marker = faults.root / "pwned"
    path = faults.root / "m.yaml"
    path.write_text(edit(_yolov5_yaml(), marker))
    with pytest.raises(UsageError) as refused:
        check_loads(str(path))
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"model {path}: {where} = ") and "refusing" in line, line
    assert not marker.exists()


def test_a_key_hidden_from_utf8_but_read_by_the_classic_trainer_is_refused(faults):
    # models/yolo.py reads the yaml as ASCII, dropping what is not: "activ\xe9ation" is its "activation".
    marker = faults.root / "pwned"
    path = faults.root / "m.yaml"
    path.write_text(_yolov5_yaml() + f"\nactiv\u00e9ation: __import__('os').system('touch {marker}') or nn.SiLU()\n")
    with pytest.raises(UsageError, match="activ"):
        check_loads(str(path))
    assert not marker.exists()


def test_the_p6_neighbour_ultralytics_reads_instead_is_inspected(faults):
    # Ultralytics renames yolov5n6.yaml to yolov5n-p6.yaml (then yolov5-p6.yaml) in the same folder and reads that.
    (faults.root / "yolov5n6.yaml").write_text(_yolov5_yaml())
    _, marker = _hostile_activation(faults, "yolov5-p6.yaml")
    with pytest.raises(UsageError, match=r"read as .*yolov5-p6\.yaml.*activation"):
        check_loads(str(faults.root / "yolov5n6.yaml"))
    assert not marker.exists()


def test_a_yaml_bomb_or_deep_nesting_is_refused_in_one_line(faults):
    laughs = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
    )
    (faults.root / "bomb.yaml").write_text(_yolov5_yaml() + laughs)
    (faults.root / "deep.yaml").write_text(_yolov5_yaml() + "x: " + "[" * 5_000 + "]" * 5_000 + "\n")
    for name in ("bomb.yaml", "deep.yaml"):
        with pytest.raises(UsageError, match=f"model .*{name}") as refused:
            check_loads(str(faults.root / name))
        assert "\n" not in str(refused.value)


@pytest.mark.slow  # a child Python that imports the trainer
def test_the_ultralytics_jobs_run_with_its_no_eval_switch_which_the_installed_version_honours(faults):
    # Defence in depth: a yaml that got past the inspection still is not eval()'d by the Ultralytics trainer.
    from speedopt import engines
    from speedopt.offline import cache_dir

    env = engines.get("ultralytics").environment(cache_dir())
    assert env["ULTRALYTICS_SAFE_LOAD"] == "1"
    assert engines.get("yolov5").environment(cache_dir())["ULTRALYTICS_SAFE_LOAD"] == "1"
    evil, marker = _hostile_activation(faults)
    code = "import sys; from ultralytics.nn.tasks import DetectionModel; DetectionModel(sys.argv[1], nc=3, verbose=False)"
    done = subprocess.run([sys.executable, "-c", code, str(evil)], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=300, cwd=faults.work)
    assert done.returncode != 0 and "blocked during restricted model load" in done.stderr, done.stderr[-2000:]
    assert not marker.exists()


def test_a_hostile_model_yaml_in_an_imported_study_is_refused_before_a_worker_trains(faults):
    # A stored study may be an import: the models its space lists are inspected (StudyProtocol.check_loads, what
    # `speedopt worker` and a resumed search call before a trial) as the options of a new search are.
    from speedopt.study import schema
    from tests.faults.test_storage_faults import _measured_study

    evil, marker = _hostile_activation(faults)
    study = _measured_study(faults, f"sqlite:///{faults.root / 's.db'}")
    stored = study.user_attrs[schema.SPACE]  # the space as the storage holds it: plain JSON, as an import brings it
    stored["model"]["choices"].append(str(evil))
    study.set_user_attr(schema.SPACE, stored)
    with pytest.raises(UsageError, match=rf"model {evil}: activation = .*refusing"):
        schema.read_protocol(study).check_loads()
    assert not marker.exists()


@pytest.mark.slow  # starts a trainer
def test_a_model_yaml_in_the_trainers_own_form_trains(faults):
    data = faults.dataset()
    path = faults.root / "leaky-yolov5n.yaml"
    path.write_text(_yolov5_yaml() + "\nactivation: nn.LeakyReLU(0.1)\n")
    done = faults.run("trial", "--data", str(data), *FAST, "--model", str(path), "--json")
    assert done.returncode == 0, done.stderr[-3000:]


# -- issue 54, item 2: the yaml inside a checkpoint is inspected as a model .yaml is --------------------------


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda y, m: y.update(activation=f"__import__('os').system('touch {m}') or nn.SiLU()"), "activation"),
        (lambda y, m: y["backbone"][0].__setitem__(2, "torch_safe_load"), "backbone[0] module"),  # a name it looks up
    ],
    ids=["activation", "module-name"],
)
def test_a_checkpoint_whose_pickled_model_yaml_carries_code_is_refused(faults, edit, where):
    """A real Ultralytics DetectionModel, saved by torch, whose ``yaml`` names code: it holds only allowlisted globals,
    but the trainer builds from that yaml (and evaluates its activation). Refused before anything loads it, like the
    same yaml as a file; the command speedopt would print for it is never reached."""
    torch = pytest.importorskip("torch")
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel("yolov5n.yaml", nc=3, verbose=False)
    marker = faults.root / "pwned"
    edit(model.yaml, marker)
    evil = faults.root / "evil.pt"
    torch.save({"epoch": 1, "model": None, "ema": model, "train_args": {}}, evil)
    data = faults.dataset()
    faults.watch(data.parent)
    line = one_line_error(faults.run("trial", "--data", str(data), "--model", str(evil), *FAST), f"model {evil}",
                          f"holds a model yaml whose {where}")
    assert "refusing" in line and not marker.exists()
    with pytest.raises(UsageError, match=f"holds a model yaml whose {where.replace('[', '.').replace(']', '.')}"):
        check_loads(str(evil), None)
    faults.unchanged()


def test_the_legacy_refusals_resave_command_is_shell_quoted(faults):
    """Issue 54, item 7: a file named ``a$(touch X).pt``; the printed re-save command, pasted into a shell, hands that
    name to Python intact and runs nothing else (a stand-in ``python`` on PATH records what it was given)."""
    marker = faults.root / "X"  # `touch X` runs in the folder the command is pasted in
    evil = _legacy(faults.root / "a$(touch X).pt", _checkpoint(b"N"), b"\x80\x02N.")
    with pytest.raises(UsageError) as refused:
        check_loads(str(evil))
    command = str(refused.value).split("re-save it in the zip format: ", 1)[1]
    stub = faults.root / "bin"
    stub.mkdir()
    (stub / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$(dirname "$0")/args"\n')
    (stub / "python").chmod(0o755)
    done = subprocess.run(["bash", "-c", command], cwd=faults.root, env={**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"})
    assert done.returncode == 0 and not marker.exists()
    given = (stub / "args").read_text().splitlines()
    assert given[0] == "-c" and given[1].count(repr(str(evil))) == 2  # the file's name, twice, as a Python string


def test_a_checkpoint_that_needs_getattr_is_refused_saying_speedopt_wants_a_detection_one(faults):
    """Issue 54 (left by round three): segment and pose checkpoints pickle builtins.getattr, which no detection
    checkpoint needs; the refusal says what to give instead."""
    model = _call("builtins", "getattr", b"N", _text("x"))
    evil = _zip(faults.root / "seg.pt", _checkpoint(model))
    with pytest.raises(UsageError, match=r"segment and pose checkpoints.*give a detection checkpoint") as refused:
        check_loads(str(evil))
    assert "\n" not in str(refused.value)
