"""The package's shape: light at import time, one public API per subpackage, no reach into another's privates."""

import ast
import subprocess
import sys
from pathlib import Path

import speedopt

PACKAGE = Path(speedopt.__file__).parent
SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def test_import_speedopt_and_the_cli_loads_no_trainer_no_optuna_no_pandas():
    code = (
        "import speedopt, speedopt.cli, sys; "
        "print(sorted({'torch', 'ultralytics', 'yolov5', 'optuna', 'pandas', 'matplotlib', 'pynvml'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_jobs_entry_point_imports_its_own_subpackages_only():
    """A trial's process (cold, or each warm worker) imports the job's code, not the search, the report or the doctor."""
    code = "import speedopt.measure._child, sys; print(sorted(m for m in sys.modules if m.startswith('speedopt.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m.split(".")[1] for m in ast.literal_eval(done.stdout)}
    assert loaded.isdisjoint({"_api", "search", "reporting", "doctor", "cli"}), loaded


def test_the_function_search_is_not_shadowed_by_the_subpackage_search():
    code = "import speedopt.search, speedopt; from speedopt.search import SearchConfig; print(callable(speedopt.search))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


def test_public_api_is_exported():
    for name in ("search", "trial", "report", "best", "worker", "SearchConfig", "TrialResult", "TrialRecord", "Knobs"):
        assert name in speedopt.__all__ and hasattr(speedopt, name)
    assert callable(speedopt.trial) and callable(speedopt.report)  # not shadowed by a subpackage


def test_every_subpackage_declares_what_it_exports():
    import importlib

    for sub in SUBPACKAGES:
        module = importlib.import_module(f"speedopt.{sub}")
        exported = getattr(module, "__all__", None) if sub != "cli" else ["main", "build_parser"]
        assert exported, sub
        for name in exported:
            assert hasattr(module, name), f"speedopt.{sub}.{name}"


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports absolutely (``from X import ...`` and ``import X``), anywhere in it."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found.extend(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return found


def test_no_module_imports_another_packages_private_module():
    """``speedopt.X._y`` is X's business: other packages use what X exports (tests may test ``_y`` directly)."""
    reaching = []
    for path in PACKAGE.rglob("*.py"):
        inner = path.relative_to(PACKAGE).parts
        home = inner[0] if len(inner) > 1 else ""
        for name in _imports(path):
            parts = name.split(".")
            private = len(parts) >= 3 and parts[2].startswith("_") and not parts[2].startswith("__")
            if parts[0] == "speedopt" and private and parts[1] in SUBPACKAGES and parts[1] != home:
                reaching.append(f"{path.relative_to(PACKAGE.parent)} -> {name}")
    assert reaching == []


def test_every_public_surface_is_small():
    """At most 25 names in any package's ``__all__`` (Optuna's study package exports ten)."""
    import importlib

    sizes = {sub: len(getattr(importlib.import_module(f"speedopt.{sub}"), "__all__", ())) for sub in SUBPACKAGES}
    sizes["speedopt"] = len(speedopt.__all__)
    assert {name: size for name, size in sizes.items() if size > 25} == {}
