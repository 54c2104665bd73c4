"""Shared fixtures: a tiny demo dataset made by the real generator, and helpers to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from speedopt import demo_data

# Trials in tests are tiny: small images, a few steps. Real trainer, real data, CPU.
TINY = ["--model", "yolov5n", "--imgsz", "128", "--batch", "4", "--steps", "3", "--warmup", "1", "--device", "cpu"]


@pytest.fixture(scope="session")
def demo_yaml(tmp_path_factory) -> Path:
    """A 48-image demo dataset at 160x120, shared by the whole session (read-only by convention)."""
    root = tmp_path_factory.mktemp("demo") / "shapes"
    return demo_data.generate(root, demo_data.DemoSpec(train=48, val=8, width=160, height=120, seed=1))


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real `speedopt` entry point in a subprocess, as a user would."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "speedopt", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
