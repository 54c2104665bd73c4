"""Faults of the classic engine (``--engine yolov5``): what it refuses, and why, is true of it."""

from __future__ import annotations

from tests.faults.conftest import Faults, one_line_error


def test_a_lossless_copy_for_the_classic_engine_is_refused_for_what_it_is(faults: Faults) -> None:
    # Issue 27 item 12: with --prepare png the refusal said "the prepared copy is JPEG". The copy is PNG;
    # what keeps it from being accuracy-neutral is classic train.py's own resize, not the format.
    data = faults.dataset()
    space = faults.work / "space.yaml"
    space.write_text("data: [original, resized]\nimgsz: [64]\n")
    faults.watch(data.parent)
    done = faults.run(
        "search", "--data", str(data), "--engine", "yolov5", "--prepare", "png", "--quality", "off",
        "--space", str(space), "--device", "cpu", timeout=60,
    )
    line = one_line_error(done, "classic train.py", "1 px over imgsz", "INTER_AREA", "--quality probe")
    assert "JPEG" not in line, line
    assert not (faults.work / "prepared").exists()  # refused before any copy was made
    faults.unchanged()
