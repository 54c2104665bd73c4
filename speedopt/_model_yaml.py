"""Look inside a model ``.yaml`` before a trainer builds from it (``--model x.yaml``, a space's or a baseline's
model, a stored study's): :func:`check_model_yaml`.

Both trainers evaluate strings of a model yaml as Python: Ultralytics ``eval``\\ s its ``activation:`` key
(nn/tasks.py ``parse_model``) and looks each layer's module up by name; the classic yolov5 package's
``models/yolo.py`` ``eval``\\ s ``activation:``, each layer's module name and each string argument. A crafted yaml
(``activation: __import__('os').system(...) or nn.SiLU()``) therefore runs its code in the trial. So every key
is held to the forms the trainers define: numbers, flags and lists where they read numbers; layer names from a
fixed list (the layers their own yamls use and their ``parse_model`` knows); string arguments from the few names
``parse_model`` resolves (``nc``, ``anchors``, ``None``, the upsampling modes); an activation written as
``nn.<Activation>(<literal arguments>)``. Anything else is refused with one line naming the file, the key and the
value (issue 44). The Ultralytics engine also sets the trainer's own no-eval switch (``ULTRALYTICS_SAFE_LOAD``).

The file is read every way a trainer reads it (UTF-8 and ASCII, errors ignored; Ultralytics' retry without
special characters; PyYAML's Python and C safe loaders): every reading that parses must pass.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from speedopt.errors import UsageError

#: The layers a model yaml may name (both trainers' own YOLO yamls and their ``parse_model`` branches), plain
#: names looked up in the trainer's module, ``nn.<name>`` in ``torch.nn``.
LAYERS = frozenset(
    {"Conv", "GhostConv", "DWConv", "Focus", "ConvTranspose", "DWConvTranspose2d", "MixConv2d", "CrossConv",
     "Bottleneck", "BottleneckCSP", "GhostBottleneck", "C1", "C2", "C2f", "C3", "C3x", "C3TR", "C3SPP", "C3Ghost",
     "C3k2", "C2PSA", "C2fPSA", "C2fAttn", "C2fCIB", "PSA", "SCDown", "RepC3", "RepNCSPELAN4", "ELAN1", "ADown",
     "AConv", "SPPELAN", "A2C2f", "SPP", "SPPF", "Concat", "Contract", "Expand", "Detect", "v10Detect", "HGStem",
     "HGBlock", "ResNetLayer", "AIFI", "CBLinear", "CBFuse", "ImagePoolingAttn",
     # heads of other tasks (their own yamls): classes, built as any layer; the detection trainer refuses them itself
     "Classify", "Segment", "Segment26", "SemanticSegment", "Pose", "Pose26", "OBB", "OBB26", "Depth", "RTDETRDecoder",
     "WorldDetect", "YOLOEDetect", "YOLOESegment", "YOLOESegment26"}
)
NN_LAYERS = frozenset(
    {"Upsample", "ConvTranspose2d", "BatchNorm2d", "Identity", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d",
     "ZeroPad2d", "Dropout"}
)
#: Activations ``activation:`` may name: ``nn.<name>(...)`` or ``torch.nn.<name>(...)`` with literal arguments.
ACTIVATIONS = frozenset(
    {"SiLU", "ReLU", "LeakyReLU", "Hardswish", "Mish", "GELU", "Sigmoid", "Tanh", "ReLU6", "Hardsigmoid", "ELU",
     "SELU", "CELU", "Identity", "PReLU"}
)
#: The strings a layer's arguments may hold: names ``parse_model`` resolves, literals, the upsampling modes.
ARG_NAMES = frozenset(
    {"nc", "anchors", "kpt_shape", "None", "True", "False", "nearest", "bilinear", "bicubic", "linear", "area",
     "nearest-exact"}
)
_NUMBER_KEYS = ("depth_multiple", "width_multiple")
_INT_KEYS = ("nc", "ch", "channels", "reg_max")
_FLAG_KEYS = ("inplace", "end2end")
_TEXT_KEYS = ("scale", "yaml_file", "text_model")  # read as names, never evaluated
_TEXT = re.compile(r"[\w.:/ -]{0,200}")
_MAX_NODES = 100_000  # a yaml's aliases can make a small file a huge tree: a model yaml has a few hundred values
_MAX_DEPTH = 64  # brackets nested deeper than this are no model yaml (the trainers' own nest 3 deep)


def _flow_depth(raw: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in ``raw``: a cheap bound checked before any parser recurses
    (a parser spends seconds on 50,000 brackets before its recursion gives up)."""
    depth = most = 0
    for byte in raw:
        if byte in b"[{":
            depth += 1
            most = max(most, depth)
        elif byte in b"]}":
            depth = max(0, depth - 1)
    return most


def check_model_yaml(path: Path, what: str) -> None:
    """Refuse, with one line naming ``what`` (``model x.yaml``), the key and the value, a model yaml with a key
    or a value form no trainer defines: the trainer would evaluate it as Python. Every file the trainer may read
    for ``path`` (:func:`trainer_reads`) is inspected."""
    for read in trainer_reads(path):
        _check_one(read, what if read == path else f"{what} (read as {read})")


def _check_one(path: Path, what: str) -> None:
    if _flow_depth(path.read_bytes()) > _MAX_DEPTH:
        raise UsageError(f"{what} nests brackets more than {_MAX_DEPTH} deep: that is no model yaml; give a model .yaml the trainer reads")
    readings = list(_readings(path))
    if not readings:
        raise UsageError(f"{what} is not a YAML model file (it does not parse); give a model .yaml the trainer reads")
    for model in readings:
        if not isinstance(model, dict):
            raise UsageError(f"{what} is not a model yaml (its top level is no mapping of keys); give a model .yaml")
        problem = yaml_problem(model)
        if problem is not None:
            where, value, form = problem
            raise UsageError(
                f"{what}: {where} = {shown(value)} is not {form}; refusing it (the trainer would evaluate it as "
                "Python); give a model yaml in the trainers' own form"
            )


def _readings(path: Path) -> Iterator[Any]:
    """Every tree a trainer may build from ``path`` (see the module's doc); a reading that fails to parse fails
    in the trainer too, and runs nothing."""
    import yaml

    raw = path.read_bytes()
    utf8 = raw.decode("utf-8", errors="ignore")
    stripped = re.sub(r"[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]+", "", utf8)
    loaders: list[Any] = [yaml.SafeLoader, *([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])]
    for text in dict.fromkeys((utf8, stripped, raw.decode("ascii", errors="ignore"))):
        for loader in loaders:
            try:
                tree = yaml.load(text, Loader=loader)  # a safe loader: no tag builds an object
            except (yaml.YAMLError, RecursionError):  # RecursionError: nesting deeper than the parser goes
                continue
            yield tree


def yaml_problem(model: Any) -> tuple[str, Any, str] | None:
    """(where, value, the form expected) of the first key or value no trainer defines, or None. Also for the yaml a
    checkpoint's pickled model carries (:func:`speedopt.checkpoint.refusal`)."""
    if not isinstance(model, dict):
        return "the model yaml", model, "a mapping of keys"
    if _size(model) > _MAX_NODES:
        return "the file", f"more than {_MAX_NODES} values", "a model's size"
    for key, value in model.items():
        problem = _key_problem(str(key), value) if isinstance(key, str) else (repr(key), key, "a key of text")
        if problem is not None:
            return problem
    for part in ("backbone", "head"):
        if part not in model:
            return part, "(missing)", "present: a model yaml has a list of [from, number, module, args] layers there"
    return None


def _key_problem(key: str, value: Any) -> tuple[str, Any, str] | None:
    """Whether ``value`` has the form the trainers give ``key`` (None when it has)."""
    expected: str | None = None
    if key in ("backbone", "head"):
        return _layers_problem(key, value)
    if key == "activation":
        ok = value in (None, "") or (isinstance(value, str) and _is_activation(value))  # empty: the default
        expected = "nn.<Activation>(<numbers>) with a torch.nn activation"
    elif key in _INT_KEYS:
        ok, expected = _is_int(value) and value > 0, "a positive whole number"
    elif key in _NUMBER_KEYS:
        ok, expected = _is_number(value) and value > 0, "a positive number"
    elif key in _FLAG_KEYS:
        ok, expected = isinstance(value, bool), "true or false"
    elif key in _TEXT_KEYS:
        ok, expected = value is None or (isinstance(value, str) and bool(_TEXT.fullmatch(value))), "a plain name"
    elif key == "kpt_shape":
        ok, expected = isinstance(value, list) and all(_is_int(v) for v in value), "a list of whole numbers"
    elif key == "scales":
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, list) and all(_is_number(x) for x in v) for k, v in value.items()
        )
        expected = "a mapping of scale letters to [depth, width, max_channels]"
    elif key == "anchors":
        ok, expected = (_is_int(value) and value > 0) or _numbers_only(value), "a number of anchors or lists of numbers"
    else:  # a key no trainer reads (e.g. hub/anchors.yaml's anchor sets): plain numbers only, nothing it could evaluate
        ok, expected = _numbers_only(value), "plain numbers (no trainer reads this key; text here is refused)"
    return None if ok else (key, value, expected)


def _layers_problem(part: str, layers: Any) -> tuple[str, Any, str] | None:
    """The first layer of ``backbone``/``head`` not in the form ``[from, number, module, args]``."""
    if not isinstance(layers, list) or not layers:
        return part, layers, "a list of [from, number, module, args] layers"
    for i, layer in enumerate(layers):
        where = f"{part}[{i}]"
        if not isinstance(layer, list) or len(layer) != 4:
            return where, layer, "a layer [from, number, module, args]"
        source, number, module, args = layer
        if not (_is_int(source) or (isinstance(source, list) and source and all(_is_int(s) for s in source))):
            return f"{where} from", source, "a layer index or a list of them"
        if not (_is_int(number) and number > 0):
            return f"{where} number", number, "a positive whole number"
        if not (isinstance(module, str) and _is_layer(module)):
            return f"{where} module", module, "a layer of the trainers' own model yamls (Conv, C3, SPPF, Concat, nn.Upsample, Detect...)"
        if not isinstance(args, list):
            return f"{where} args", args, "a list of arguments"
        for arg in _leaves(args):
            if not (arg is None or _is_number(arg) or isinstance(arg, bool) or arg in ARG_NAMES):
                return f"{where} args", arg, f"a number or one of {', '.join(sorted(ARG_NAMES))}"
    return None


def _is_layer(module: str) -> bool:
    return module in LAYERS or (module.startswith("nn.") and module[3:] in NN_LAYERS)


def _is_activation(text: str) -> bool:
    """``nn.X(...)``/``torch.nn.X(...)`` with X an activation and only literal numbers, flags or None as arguments."""
    try:
        call = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return False
    head = ast.unparse(call.func.value)
    if head not in ("nn", "torch.nn") or call.func.attr not in ACTIVATIONS:
        return False
    values = [*call.args, *(k.value for k in call.keywords)]
    return all(k.arg is not None for k in call.keywords) and all(_is_literal(v) for v in values)


def _is_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float)))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers_only(value: Any) -> bool:
    """Numbers, flags and nulls, in lists and mappings of them: nothing a trainer could evaluate."""
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and _numbers_only(v) for k, v in value.items())
    return all(v is None or _is_number(v) or isinstance(v, bool) for v in _leaves(value))


def _leaves(value: Any) -> Iterator[Any]:
    """The values inside nested lists, however deep (a mapping is a leaf: no argument is one)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(reversed(node))
        else:
            yield node


def _size(value: Any) -> int:
    """How many values the tree holds, each shared node (a yaml alias) counted every time it appears, stopping
    past :data:`_MAX_NODES` (a billion-laughs file is refused, not walked)."""
    count, stack = 0, [value]
    while stack and count <= _MAX_NODES:
        node = stack.pop()
        count += 1
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return count


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so a hostile value cannot flood the one-line error."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def trainer_reads(path: Path) -> list[Path]:
    """The files a trainer given ``path`` may read: ``path``, and where Ultralytics renames a P6 model's name
    (``yolov5n6.yaml`` -> ``yolov5n-p6.yaml``, then the scale-less ``yolov5-p6.yaml``) the neighbours it turns to;
    each that exists is inspected (a file it finds in its own package instead is its own)."""
    found = [path]
    if re.fullmatch(r"yolov[58][nsmlx]6", path.stem):
        renamed = path.with_name(re.sub(r"(\d+)([nslmx])6(.+)?$", r"\1\2-p6\3", path.stem) + path.suffix)
        unified = Path(re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", str(renamed)))
        found += [p for p in (renamed, unified) if p.is_file()]
    return found
