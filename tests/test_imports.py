"""The package's shape: light at import time, no import cycle, one public API."""

import subprocess
import sys

import speedopt


def test_import_speedopt_and_the_cli_loads_no_trainer_no_optuna_no_pandas():
    code = (
        "import speedopt, speedopt.cli, sys; "
        "print(sorted({'torch', 'ultralytics', 'yolov5', 'optuna', 'pandas', 'matplotlib', 'pynvml'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_public_api_is_exported():
    for name in ("search", "trial", "report", "best", "worker", "SearchConfig", "TrialResult", "TrialRecord", "Knobs"):
        assert name in speedopt.__all__ and hasattr(speedopt, name)
    assert callable(speedopt.trial) and callable(speedopt.report)  # not shadowed by a subpackage


def test_every_subpackage_declares_what_it_exports():
    import importlib

    for sub in ("cli", "data", "engines", "measure", "quality", "reporting", "study"):
        module = importlib.import_module(f"speedopt.{sub}")
        exported = getattr(module, "__all__", None) if sub != "cli" else ["main", "build_parser"]
        assert exported, sub
        for name in exported:
            assert hasattr(module, name), f"speedopt.{sub}.{name}"
