import ast
import dataclasses
import shlex
from pathlib import Path

import pytest

from speedopt.errors import UsageError
from speedopt.knobs import (
    KNOB_NAMES,
    KNOBS,
    Knobs,
    knob,
    knob_names,
    knobs_text,
    parse_bool,
    parse_value,
    resolve_model,
    round_imgsz,
    validate,
    value_text,
    yolo_args,
)
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
        ("channels_last", "off", "off"), ("deterministic", "off", False), ("deterministic", "True", True),
        ("deterministic", False, False),
    ],
)
def test_the_newer_knobs_read_the_trainers_own_spellings(knob, given, value):
    assert parse_value(knob, given) == value


@pytest.mark.parametrize(("knob", "given"), [("amp", "fp8"), ("compile", "Max Autotune!"), ("channels_last", "sideways"),
                                                 ("deterministic", "mostly")])
def test_a_bad_newer_knob_value_is_one_line(knob, given):
    with pytest.raises(UsageError) as refused:
        parse_value(knob, given)
    assert knob in str(refused.value) and "\n" not in str(refused.value)


def test_the_newer_knobs_default_to_the_trainers_own_defaults_and_show_only_when_set():
    assert (Knobs().compile, Knobs().channels_last, Knobs().deterministic) == ("off", "default", True)
    assert Knobs.from_dict({"model": "yolov5n"}).compile == "off"  # a study stored before them reads as it ran
    assert Knobs.from_dict({"model": "yolov5n"}).deterministic is True
    assert "compile" not in knobs_text(Knobs()) and "deterministic" not in knobs_text(Knobs())
    assert knobs_text(Knobs(amp="bf16", compile="default")).endswith("amp=bf16 freeze=0 compile=default")
    assert knobs_text(Knobs(deterministic=False)).endswith("freeze=0 deterministic=off")
    with pytest.raises(UsageError, match="deterministic must be on or off, got 'no'"):
        validate(Knobs(deterministic="no"))  # type: ignore[arg-type]  # a stored or API value is checked too


# The registry: each knob declared once, and every list of knobs read from it.

#: A value other than the default for every knob: a knob added to the registry needs one here.
CHANGED = {"model": "yolov5n", "imgsz": 320, "batch": 8, "workers": 2, "cache": "ram", "amp": False, "freeze": 3,
           "data": "resized", "gpus": 2, "compile": "default", "channels_last": "on",
           "deterministic": False}


def test_the_registry_declares_every_knob_once_in_field_order_with_the_fields_defaults():
    assert KNOB_NAMES == tuple(f.name for f in dataclasses.fields(Knobs)) == tuple(CHANGED)
    assert all(name == entry.name for name, entry in KNOBS.items())
    for entry in KNOBS.values():
        assert entry.default == getattr(Knobs(), entry.name)
        assert entry.parse(value_text(entry.default)) == entry.default  # the printed default reads back
        assert entry.parse(value_text(CHANGED[entry.name])) == CHANGED[entry.name]
    with pytest.raises(UsageError, match="unknown knob 'lr'; knobs are model, imgsz"):
        knob("lr")


def test_the_accuracy_signature_is_the_registrys():
    from speedopt.quality import ACCURACY_KNOBS, signature

    assert ACCURACY_KNOBS == ("model", "imgsz", "freeze", "batch", "amp", "data")  # as printed before the registry
    assert set(ACCURACY_KNOBS) == set(knob_names(lambda k: k.signature))
    for name, value in CHANGED.items():
        changed = signature(dataclasses.replace(Knobs(), **{name: value})) != signature(Knobs())
        assert changed == bool(KNOBS[name].signature), name


def test_each_ceiling_key_holds_exactly_the_knobs_of_its_side():
    from speedopt.measure import key_of
    from speedopt.measure._ceilings import KNOBS_OF

    assert {side: knob_names(lambda k, s=side: s in k.sides) for side in ("data", "compute")} == KNOBS_OF
    assert key_of("data", Knobs()) == "workers=8 cache=none imgsz=640 batch=16 data=original"  # stored keys still match
    assert key_of("compute", Knobs()) == "model=yolov5s imgsz=640 batch=16 amp=True freeze=0"
    for name, value in CHANGED.items():
        for side in ("data", "compute"):
            changed = key_of(side, dataclasses.replace(Knobs(), **{name: value})) != key_of(side, Knobs())
            assert changed == (side in KNOBS[name].sides), (name, side)


def test_each_memory_key_holds_exactly_the_knobs_that_bind_that_memory():
    from speedopt.search._memory_model import memory_key

    assert memory_key(Knobs(), "0") == "gpu yolov5s 640 amp=True freeze=0 gpus=1"  # stored fits still match
    assert memory_key(Knobs(), "cpu") == "ram yolov5s 640 freeze=0 workers=8 data=original"
    for name, value in CHANGED.items():
        for device, kind in (("0", "gpu"), ("cpu", "ram")):
            changed = memory_key(dataclasses.replace(Knobs(), **{name: value}), device) != memory_key(Knobs(), device)
            assert changed == (kind in KNOBS[name].memory), (name, kind)


def test_the_space_accepts_exactly_the_registrys_knobs_and_ranges():
    from speedopt.search._space import ORDERED, default_space, parse_baseline, parse_fix

    # every knob has a default domain on this machine (data: the plan offers it where a prepared copy exists)
    assert set(default_space(Knobs(), 4, True).domains) == set(KNOB_NAMES) - {"data"}
    assert ORDERED == knob_names(lambda k: k.ranged) == ("imgsz", "batch", "workers", "freeze", "gpus")
    assert parse_fix([f"{n}={value_text(v)}" for n, v in CHANGED.items()]).keys() == set(KNOB_NAMES)
    aliases = " ".join(f"{a}={value_text(CHANGED[k.name])}" for k in KNOBS.values() for a in k.aliases)
    assert parse_baseline(aliases) == dataclasses.replace(Knobs(), **{k.name: CHANGED[k.name] for k in KNOBS.values() if k.aliases})
    with pytest.raises(UsageError, match="unknown knob"):
        parse_fix(["lr=0.1"])


def test_engines_fix_the_optional_knobs_they_do_not_honour():
    from speedopt import engines

    optional = set(knob_names(lambda k: k.option))
    assert optional == {"compile", "channels_last", "deterministic"}
    for name in ("ultralytics", "yolov5", "standin"):
        engine = engines.get(name)
        assert engine.honours <= optional
        fixed = engine.fixed_knobs("0")
        assert {k for k in optional if k in fixed} == optional - engine.honours
        assert all(fixed[k][0] == KNOBS[k].default for k in optional - engine.honours)
        assert "channels_last" in engine.fixed_knobs("cpu")  # CUDA-only: fixed on the CPU by every engine
    assert "deterministic" not in engines.get("ultralytics").fixed_knobs("cpu")  # it acts on the CPU too
    assert engines.get("yolov5").fixed_knobs("cpu")["deterministic"] == (True, "the yolov5 trainer has no deterministic option")


def test_the_yolo_dialect_writes_every_knob_the_registry_spells():
    from speedopt.command import parse_python_train, parse_yolo_train, python_train, yolo_train

    knobs = Knobs(**{**CHANGED, "gpus": 1, "data": "original"})
    assert set(yolo_args(knobs)) == {k.yolo for k in KNOBS.values() if k.yolo and k.name != "model"}
    assert not {"compile", "channels_last", "deterministic"} & set(yolo_args(Knobs()))  # newer keys only where set
    assert yolo_args(Knobs(deterministic=False))["deterministic"] is False
    assert parse_yolo_train(yolo_train("d.yaml", knobs)).knobs == knobs
    assert parse_python_train(python_train("d.yaml", knobs)).knobs == knobs



def test_the_classic_dialect_writes_each_knob_under_the_registrys_flag():
    from speedopt.command import parse_train_py, train_py

    knobs = Knobs(**{**CHANGED, "gpus": 1, "data": "original", "compile": "off", "channels_last": "default", "amp": True,
                       "deterministic": True})  # train.py has no flag for these
    words = train_py("d.yaml", knobs, device="0").split()
    for k in KNOBS.values():
        if k.train_py:
            assert words[words.index(k.train_py) + 1] == value_text(CHANGED[k.name]), k.name
    assert parse_train_py(" ".join(words)).knobs == knobs


def test_compile_is_the_one_time_cost_decided_at_the_end():
    assert knob_names(lambda k: k.at_end) == ("compile",)


#: Lists of knob names that stay outside the registry, and why: frozen formats of stored keys (a knob added since
#: is written after them, only where set) and the machine's default domains (tested above to cover every knob);
#: engines/ lists what its trainers do (what they honour, change silently).
ALLOWED = {("measure/_ceilings.py", "_KEY_FORMAT"), ("search/_memory_model.py", "_KEY_FORMAT"), ("search/_space.py", "default_space")}


def _knob_lists(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing assignment or function, line) of every literal tuple, list, set or dict of 2+ knob names."""
    found = []
    for top in ast.walk(tree):
        if not isinstance(top, (ast.Assign, ast.AnnAssign, ast.FunctionDef)):
            continue
        name = top.name if isinstance(top, ast.FunctionDef) else ast.unparse(top.targets[0] if isinstance(top, ast.Assign) else top.target)
        for node in ast.walk(top):
            items = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
            names = [e.value for e in items if isinstance(e, ast.Constant) and e.value in KNOB_NAMES]
            if len(names) >= 2 and len(names) == len(items):
                found.append((name, node.lineno))
    return found


def test_no_module_outside_the_registry_and_the_engines_writes_its_own_list_of_knobs():
    package = Path(__file__).parents[1] / "speedopt"
    lists = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if where == "knobs.py" or where.startswith("engines/"):
            continue
        lists += [f"{where}:{line} ({name})" for name, line in _knob_lists(ast.parse(path.read_text()))
                  if (where, name) not in ALLOWED]
    assert lists == []


@pytest.mark.parametrize("changed", [None, *CHANGED])
def test_speedopt_trials_command_reads_back_into_the_knobs_it_was_written_from(changed):
    """Issue 55: `speedopt trial`'s printed command writes each knob's registry flag, and the CLI reads the flags back
    through the same entries: every knob with a flag at its default, or at another value (data has no flag: it is the
    data.yaml given)."""
    from speedopt import command
    from speedopt.cli import build_parser
    from speedopt.cli._options import knobs_of

    knobs = Knobs(model="yolov5n", imgsz=128, batch=4, workers=0, amp=False)
    if changed is not None and KNOBS[changed].flag is not None:
        knobs = dataclasses.replace(knobs, **{changed: CHANGED[changed]})
    line = command.speedopt_trial("d.yaml", knobs, "cpu", 3, 1)
    args = build_parser().parse_args(shlex.split(line)[1:])
    assert knobs_of(args) == knobs, line
    assert all(k.flag.name in line for k in KNOBS.values() if k.flag and k.flag_always)


@pytest.mark.parametrize("command", ["trial", "ceilings"])
def test_the_knob_flags_a_command_takes_are_the_registrys(command):
    """Issue 55: `speedopt trial` and `speedopt ceilings` define their knob flags from the registry (Knob.flag), so
    a new knob's flag is its registry entry: each flag's default and help are the entry's, an integer flag takes
    its range's ends and refuses one past them, a flag of words refuses any other word; trial alone has its own
    (--gpus)."""
    import argparse

    from speedopt.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    actions = {a.option_strings[0]: a for a in sub._actions if a.option_strings}
    flagged = {k.flag.name: k for k in KNOBS.values() if k.flag and (k.flag.common or command == "trial")}
    assert set(flagged) <= set(actions) and ("--gpus" in actions) == (command == "trial")
    for name, entry in flagged.items():
        flag, action = entry.flag, actions[name]
        assert (action.default, action.help) == (flag.default, flag.help), name
        if flag.choices is not None:
            assert tuple(action.choices) == flag.choices
        if flag.low is not None:
            high = flag.high() if callable(flag.high) else flag.high
            assert action.type(str(flag.low)) == flag.low and action.type(str(high)) == high
            for wrong in (str(flag.low - 1), str(high + 1)):
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(wrong)
