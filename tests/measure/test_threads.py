"""The CPU threads a job runs torch with: the printed command's, whatever the job's process imported first."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from speedopt import engines


@pytest.mark.parametrize(
    "engine, omp, expected",
    [
        ("yolov5", None, 2),  # train.py imports torch before its utils set OMP_NUM_THREADS: torch's default
        ("yolov5", "3", 3),  # the user's OMP_NUM_THREADS, which torch reads when it loads
        ("yolov5", "many", 2),  # not a count: torch's default
        ("ultralytics", None, 1),  # ultralytics sets OMP_NUM_THREADS=1 before torch loads
        ("ultralytics", "3", 3),  # unless the user set it
    ],
)
def test_each_engine_names_the_threads_its_printed_command_runs(engine, omp, expected):
    assert engines.get(engine).torch_threads(omp, 2) == expected


@pytest.mark.slow
def test_a_process_reads_torchs_default_with_the_variable_unset_and_keeps_the_users_value():
    # Started under OMP_NUM_THREADS=1 (what an Ultralytics import leaves): the default is still torch's own.
    code = (
        "import os\n"
        "from speedopt.measure._threads import at_start\n"
        "start = at_start()\n"
        "print(start.omp_env, start.torch_default, os.environ['OMP_NUM_THREADS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**env, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    fresh = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], capture_output=True, text=True,
                           timeout=120, env=env)
    assert done.stdout.split() == ["1", fresh.stdout.strip(), "1"]
