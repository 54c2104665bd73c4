"""Faulty datasets: a symlink loop in an image folder, class names with gaps, images and labels the
trainer's own label check drops, a sparse file among the images.

Each case builds the damaged dataset itself and runs the real CLI (or the real listing the CLI runs); the
cases that start a trainer or a job are ``slow``.
"""

from __future__ import annotations

import pytest

from tests.conftest import TINY
from tests.faults.conftest import Faults, one_line_error

# --- names with gaps -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["trial", "search"])
def test_names_with_gaps_are_refused_at_plan_time(faults: Faults, command: str) -> None:
    data = faults.dataset()
    data.write_text(data.read_text().split("names:")[0] + "names: {0: a, 2: c, 5: f}\n")
    args = TINY if command == "trial" else ["--device", "cpu", "--quality", "off"]
    line = one_line_error(faults.run(command, "--data", str(data), *args, timeout=60), "names", "0, 1, 2", str(data))
    assert "missing 1, 3, 4" in line, line
    faults.unchanged()
