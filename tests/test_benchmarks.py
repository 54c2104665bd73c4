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
    """The tables are in the repository; a replay of 2 seeds each of the two small ones runs the shipped search in
    seconds, its ranking's ceiling jobs answered from the tables (billed to the ceilings stage)."""
    out = run_benchmark("replay.py", "--replay", "--seeds", "2", "--ceiling-rank", "on", "--tables", "compute", "data", timeout=120)
    for table in ("compute", "data"):
        assert len(re.findall(rf"^{table}: \d+ configs, best .* at [\d.]+ images/s", out, re.MULTILINE)) == 1, out
    shares = re.findall(r"pick within 5% of the best: (\d+)% of 2 seeds", out)
    costs = re.findall(r"cost over the grid's: median ([\d.]+)x", out)
    assert len(shares) == len(costs) == 2 and all(0 <= int(s) <= 100 for s in shares) and all(float(c) > 0 for c in costs)
    ceilings = [float(s) for s in re.findall(r"by stage \(median s\): ceilings ([\d.]+)", out)]
    assert len(ceilings) == 2 and all(s > 0 for s in ceilings), out


def test_verdict_error_drives_the_shipped_judge_and_prints_its_table():
    """A few simulated searches per cell, one process: the real Judge with a scripted probe source."""
    out = run_benchmark("verdict_error.py", "--searches", "30", "--dists", "normal", "--jobs", "1", timeout=120)
    rows = re.findall(r"^\| normal \| ([\d.]+)x \| ([15]) \| (-|[\d.]+%[^|]*) \| (-|[\d.]+%[^|]*) \| ([\d.]+) \| ([\d.]+) \|$", out, re.MULTILINE)
    assert len(rows) == 10, out  # 5 true losses x 1 and 5 candidates
    for multiple, _, lossy, kept, probes, _ in rows:
        assert (lossy == "-") == (float(multiple) < 1) and (kept == "-") == (float(multiple) >= 1)
        assert float(probes) > 0  # the Judge asked the scripted source for probes
    figure(r"^goals \(normal, t3, collapse; 'late' is beyond them\): ", out)


GPU_CHECK = ROOT / "benchmarks" / "gpu_check.sh"
GPU_TESTS = ROOT / "tests" / "gpu"
#: Issue 46: the GPU check fits a 15-minute device slot in 8 minutes, and no GPU test takes over 90 s.
GPU_CHECK_BUDGET_S = 480
GPU_TEST_LIMIT_S = 90


def _shell_value(script: str, name: str) -> str:
    return figure(rf"^{name}=(\S+)", script).group(1)


def test_the_gpu_checks_search_space_is_one_the_plan_accepts_with_quality_off(tmp_path):
    """gpu_check.sh runs on a lent GPU only, where a refused space costs the device's time: its space file must
    parse, and under its --quality off it may list several values of no accuracy knob (the plan refuses those).
    It lists no compile mode: a search decides compile once at its end, a cold compile that its limit leaves no
    room for (tests/gpu covers it)."""
    from speedopt.quality import ACCURACY_KNOBS
    from speedopt.search._space import load_file

    script = GPU_CHECK.read_text()
    printed = re.search(r"printf '([^']*)' > \"\$MORE/space.yaml\"", script)
    assert printed is not None and "--quality off" in script
    space = tmp_path / "space.yaml"
    space.write_text(printed.group(1).encode().decode("unicode_escape"))
    domains = load_file(str(space))
    assert {"workers", "cache"} <= set(domains) and "compile" not in domains
    assert not [k for k in ACCURACY_KNOBS if k in domains and len(domains[k].values()) > 1]


def test_the_gpu_check_states_its_8_minute_budget_and_its_step_limits_fit_in_it():
    """Read, not run: the stated budget, each step's limit (all of them used, in order) and the install margin
    within it; the tier in one pytest process (no xdist), not stopping at its first failure, each test limited."""
    script = GPU_CHECK.read_text()
    budget, margin, grace = (int(_shell_value(script, n)) for n in ("BUDGET_S", "INSTALL_MARGIN_S", "GRACE_S"))
    limits = {k: int(v) for k, v in re.findall(r"\[([\w-]+)\]=(\d+)", figure(r"^declare -A LIMIT=\((.*)\)$", script).group(1))}
    order = figure(r"^ORDER=\((.*)\)$", script).group(1).split()
    run = re.findall(r"^(?:if ! )?step ([\w-]+) ", script, re.MULTILINE)
    assert budget == GPU_CHECK_BUDGET_S and margin > 0
    assert sum(limits.values()) + margin <= budget, (limits, margin)
    assert run == order and sorted(order) == sorted(limits) and all(limit > grace for limit in limits.values())
    tier = figure(r"^step gpu-tier (.*)$", script).group(1)
    assert "-m pytest tests/gpu" in tier and "-p no:xdist" in tier
    assert not re.search(r"\s(-n|--numprocesses)[ =]?(?!0\b)\S", tier) and not re.search(r"\s(-x|--exitfirst)\b", tier)
    assert '--timeout "$TEST_LIMIT_S"' in tier and int(_shell_value(script, "TEST_LIMIT_S")) <= GPU_TEST_LIMIT_S


def _limits_in(path: Path) -> list[tuple[str, float]]:
    """Every time limit a test file states: ``timeout=`` keywords, ``pytest.mark.timeout(N)``, the value after a
    ``--timeout`` or ``--trial-timeout`` flag (module constants resolved), and ``GPU_TEST_LIMIT_S = N``."""
    import ast
    import itertools

    tree = ast.parse(path.read_text())
    names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
             for t in n.targets if isinstance(t, ast.Name)}

    def value(node: ast.AST) -> object:
        return node.value if isinstance(node, ast.Constant) else names.get(node.id) if isinstance(node, ast.Name) else None

    found = [(n, float(v)) for n, v in names.items() if n == "GPU_TEST_LIMIT_S"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += [(f"timeout={value(k.value)}", float(value(k.value))) for k in node.keywords if k.arg == "timeout"]
            if isinstance(node.func, ast.Attribute) and node.func.attr == "timeout" and node.args:
                found.append(("mark.timeout", float(value(node.args[0]))))
        if isinstance(node, (ast.List, ast.Tuple, ast.Call)):
            items = node.args if isinstance(node, ast.Call) else node.elts
            for flag, limit in itertools.pairwise(items):
                if value(flag) in ("--timeout", "--trial-timeout"):
                    found.append((str(value(flag)), float(value(limit))))
    return found


def test_every_gpu_test_has_a_limit_of_at_most_90_s_and_the_oom_test_runs_last():
    """The tier's one process runs each test under conftest's GPU_TEST_LIMIT_S (pytest-timeout), and no limit a
    test states is longer; the OOM test, which fills the GPU, is the file's last, so nothing runs behind it."""
    import ast

    conftest = dict(_limits_in(GPU_TESTS / "conftest.py"))
    assert conftest["GPU_TEST_LIMIT_S"] == conftest["mark.timeout"] <= GPU_TEST_LIMIT_S, conftest
    for path in sorted(GPU_TESTS.glob("test_*.py")):
        limits = _limits_in(path)
        assert limits and all(0 < limit <= GPU_TEST_LIMIT_S for _, limit in limits), (path.name, limits)
    tests = [n.name for n in ast.parse((GPU_TESTS / "test_gpu.py").read_text()).body
             if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert "oom" in tests[-1] and not [t for t in tests[:-1] if "oom" in t], tests
