"""The report's "knobs the real run honours" table, for each engine and device kind (issue 31's rows)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from speedopt.engines import EngineSpec
from speedopt.knobs import Knobs
from speedopt.reporting._recommended import gives_up, honoured_section


def _rows(engine: str, device: str) -> dict[str, str]:
    lines = honoured_section(SimpleNamespace(engine_spec=EngineSpec(engine), device=device))  # type: ignore[arg-type]
    return {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ") and " | " in line[2:]}


def test_ultralytics_on_the_cpu_honours_compile_and_not_channels_last():
    rows = _rows("ultralytics", "cpu")
    assert "| yes | as the command says; it takes off, default" in rows["compile"]
    assert "no working inductor backend" in rows["compile"] and rows["compile"].endswith("a trial ended infeasible |")
    assert "| no | always default: channels_last is a CUDA-only option" in rows["channels_last"]
    assert "| yes | as the command says; where the trainer runs it otherwise (its init_seeds" in rows["deterministic"]
    assert "| no | off: AMP needs CUDA" in rows["amp"] and "| no | always 0" in rows["workers"]
    assert "halves the batch" in rows["batch"] and rows["batch"].endswith("a trial ended oom |")
    assert "too little free RAM or disk" in rows["cache"] and rows["cache"].endswith("a trial ended infeasible |")


@pytest.mark.parametrize("device", ["cpu", "0"])
def test_the_classic_trainer_honours_neither_newer_knob(device):
    rows = _rows("yolov5", device)
    assert "| no | always off: the yolov5 trainer has no torch.compile option" in rows["compile"]
    assert "| no | always default: the yolov5 trainer has no channels_last option" in rows["channels_last"]
    assert "| no | always on: the yolov5 trainer has no deterministic option" in rows["deterministic"]
    assert "a trial ended" not in rows["batch"]  # the classic engine declares no silent rules: its checks are inline


def test_the_report_says_what_turning_deterministic_off_gives_up_only_when_the_recommendation_does():
    off, on = Knobs(deterministic=False), Knobs()
    said = gives_up(on, off)
    assert said[0].startswith("deterministic=off: runs with the same seed are no longer bit-identical")
    assert "expected accuracy is unchanged" in said[0]
    assert gives_up(on, on) == [] and gives_up(off, off) == []  # kept on, or already off in the user's own run
