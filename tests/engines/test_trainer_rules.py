"""Every rule that depends on which trainer runs lives in engines/: the rest of the house asks the engine.

Two scans of the package's source (no import of a trainer): engines/ imports nothing from the modules
above it (speedopt.command first of all), and no module outside engines/ compares a value with an
engine's name; and what each engine declares in place of those comparisons.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

import speedopt
from speedopt import engines

PACKAGE = Path(speedopt.__file__).parent
ENGINES = PACKAGE / "engines"
ENGINE_NAMES = frozenset(get_args(engines.EngineName))
DIALECTS = frozenset(get_args(engines.Dialect))


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    """``name`` (``speedopt.x.y``) is a module or package of the source tree (read from the files, nothing imported)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported(path: Path) -> set[str]:
    """The speedopt modules ``path`` imports, anywhere in it (function-local and type-checking imports too);
    ``from speedopt import machine`` is ``speedopt.machine``, not the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("speedopt"))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module.startswith("speedopt"):
            subs = {f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")}
            found.update(subs if len(subs) == len(node.names) else subs | {node.module})
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(path): _imported(path) for path in PACKAGE.rglob("*.py")}


def _inside(module: str) -> bool:
    return module == "speedopt.engines" or module.startswith("speedopt.engines.")


def _above_engines(graph: dict[str, set[str]]) -> set[str]:
    """The modules outside engines/ that import engines/, directly or through others: the floors above it."""
    above: set[str] = set()
    grew = True
    while grew:
        grew = False
        for module, imports in graph.items():
            if module not in above and not _inside(module) and any(_inside(m) or m in above for m in imports):
                above.add(module)
                grew = True
    return above


def test_engines_import_nothing_from_the_command_module_nor_from_any_module_above_them():
    graph = _graph()
    above = _above_engines(graph)
    assert "speedopt.command" in above  # command.py prints the trainers' commands: it sits above the engines
    upward = sorted(f"{m} -> {t}" for m, imports in graph.items() if _inside(m) for t in imports if t in above)
    assert upward == []
    assert not any(t == "speedopt.command" for m, imports in graph.items() if _inside(m) for t in imports)


def _names_compared(tree: ast.AST, names: frozenset[str] = ENGINE_NAMES) -> list[tuple[int, str]]:
    """``(line, name)`` of each engine name (or other of ``names``) a comparison (``==``, ``!=``, ``in``, ``not in``; also in a tuple,
    list or set operand) or a ``case`` pattern holds as a string literal."""

    def literals(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [text for element in node.elts for text in literals(element)]
        return []

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        else:
            continue
        found += [(node.lineno, text) for operand in operands for text in literals(operand) if text in names]
    return found


def test_the_scan_finds_a_comparison_with_an_engine_name():
    code = (
        'a = p.engine == "yolov5"\nb = "ultralytics" != engine\nc = engine in ("standin", "x")\n'
        'match engine:\n    case "yolov5":\n        pass\nd = engine == "yolov5s"\n'
    )
    assert _names_compared(ast.parse(code)) == [(1, "yolov5"), (2, "ultralytics"), (3, "standin"), (5, "yolov5")]


def test_no_module_outside_engines_compares_with_an_engines_name():
    """The report, the command, the plan and the doctor ask the engine (its dialect, its supports_* flags)."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {name!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(ENGINES)
        for line, name in _names_compared(ast.parse(path.read_text()))
    ]
    assert found == []


def test_no_module_outside_engines_compares_a_value_with_a_dialect():
    """Issue 55: reporting and the doctor read a dialect's words (engines.words), never test which dialect it is.
    command.py is left out: it spells the commands and reads them back, word by word ("yolo", "train.py")."""
    assert _names_compared(ast.parse('if engine.dialect == "train.py": pass'), DIALECTS) == [(1, "train.py")]
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {name!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(ENGINES) and path != PACKAGE / "command.py"
        for line, name in _names_compared(ast.parse(path.read_text()), DIALECTS)
    ]
    assert found == []


@pytest.mark.parametrize("name", sorted(ENGINE_NAMES))
def test_each_engine_has_the_words_of_its_dialect(name):
    words = engines.words(name)
    assert words.dialect == engines.engine_class(name).dialect
    assert "{saves}" in words.noval and "{saves}" in words.nosave  # the advice says what it saves
    assert "comet_ml" in words.logger_off.format(name="comet", package="comet_ml") or "comet=" in words.logger_off.format(
        name="comet", package="comet_ml"
    )
    assert (words.checkout is None) == (words.checkout_or is None)


@pytest.mark.parametrize(
    ("name", "dialect", "exact"), [("ultralytics", "yolo", True), ("yolov5", "train.py", False), ("standin", "yolo", False)]
)
def test_each_engine_declares_its_dialect_and_whether_a_lossless_copy_is_exact(name, dialect, exact):
    declared = engines.engine_class(name)
    assert declared.name == name
    assert (declared.dialect, declared.lossless_copy_exact) == (dialect, exact)


def test_the_default_engine_is_a_trainer_a_user_picks():
    assert engines.DEFAULT in engines.NAMES
