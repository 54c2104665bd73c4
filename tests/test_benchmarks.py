"""The benchmarks run, in a reduced form (tiny sizes): they work and print their figures.

The figures themselves come from running the benchmarks with their defaults, never from these tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_benchmark(name: str, *args: str, timeout: float = 300) -> str:
    """Run ``benchmarks/<name>`` as a user would; its stdout (the test fails with its output if it fails)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def figure(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"no line matching {pattern!r} in:\n{text}"
    return found


@pytest.mark.slow
def test_trial_overhead_runs():
    out = run_benchmark("trial_overhead.py", "--repeats", "1", "--steps", "3", "--warmup", "1", "--imgsz", "64")
    assert re.search(r"^\s*mode\s+wall s\s+setup s\s+measured s\s+fixed s\s+images/s\s+fixed$", out, re.MULTILINE), out
    for mode in ("cold", "warm"):
        found = figure(rf"^{mode}: fixed cost ([\d.]+) s per trial, (\d+)% of its wall time; images/s min ([\d.]+), median ([\d.]+), max ([\d.]+)", out)
        assert float(found.group(1)) > 0 and 0 <= int(found.group(2)) <= 100
        low, median, high = (float(found.group(i)) for i in (3, 4, 5))
        assert 0 < low <= median <= high
    assert float(figure(r"^warm/cold images/s per round: .*\(median ([\d.]+)\)", out).group(1)) > 0


@pytest.mark.slow
def test_search_efficiency_runs():
    # 4 configs (yolov5n 64 px, batch 2/4, cache none/ram), a 2-trial budget, finals 1 x 2 rounds; no stop at
    # the ceiling, so the search samples its second trial whatever the baseline measured.
    out = run_benchmark("search_efficiency.py", "--small", "--no-stop-at-ceiling", timeout=600)
    assert figure(r"^space: (\d+) configs", out).group(1) == "4"
    assert figure(r"^grid: +(\d+) configs in ([\d.]+) s", out).group(1) == "4"
    figure(r"^search: \d+ trials .* in [\d.]+ s", out)
    figure(r"^search phases: set-up, label cache and ceiling ranking [\d.]+ s \(ranking [\d.]+ s\); \d+ trials measured", out)
    ratio = float(figure(r"^search wall / grid wall: ([\d.]+) \(", out).group(1))
    assert ratio > 0
    assert float(figure(r"^grid best: ([\d.]+) images/s", out).group(1)) > 0
    pick = figure(r"^pick in the grid: ([\d.]+) images/s = ([\d.]+) of the grid best; rank (\d+) of 4$", out)
    assert float(pick.group(1)) > 0 and 0 < float(pick.group(2)) <= 1.0
    assert 1 <= int(pick.group(3)) <= 4
    assert 1 <= int(figure(r"^grid spread: (\d+) of 4 configs within 10% of the grid best", out).group(1)) <= 4
    figure(r"^targets: >= 0\.95 of the grid best: (met|missed) .*<= 35% of the grid time: (met|missed)", out)


def test_replay_replays_the_search_against_its_stored_tables():
    """The tables are in the repository; a replay of 2 seeds each runs the shipped search in seconds."""
    out = run_benchmark("replay.py", "--replay", "--seeds", "2", timeout=120)
    for table in ("compute", "data"):
        assert len(re.findall(rf"^{table}: \d+ configs, best .* at [\d.]+ images/s", out, re.MULTILINE)) == 1, out
    shares = re.findall(r"pick within 5% of the best: (\d+)% of 2 seeds", out)
    costs = re.findall(r"cost over the grid's: median ([\d.]+)x", out)
    assert len(shares) == len(costs) == 2 and all(0 <= int(s) <= 100 for s in shares) and all(float(c) > 0 for c in costs)


def test_the_gpu_checks_search_space_is_one_the_plan_accepts_with_quality_off(tmp_path):
    """gpu_check.sh runs on a lent GPU only, where a refused space costs the device's time: its space file must
    parse, and under its --quality off it may list several values of no accuracy knob (the plan refuses those)."""
    from speedopt.quality import ACCURACY_KNOBS
    from speedopt.search._space import load_file

    script = (Path(__file__).parent.parent / "benchmarks" / "gpu_check.sh").read_text()
    printed = re.search(r"printf '([^']*)' > \"\$OUT/space.yaml\"", script)
    assert printed is not None and "--quality off" in script
    space = tmp_path / "space.yaml"
    space.write_text(printed.group(1).encode().decode("unicode_escape"))
    domains = load_file(str(space))
    assert {"compile", "channels_last"} <= set(domains)
    assert not [k for k in ACCURACY_KNOBS if k in domains and len(domains[k].values()) > 1]
