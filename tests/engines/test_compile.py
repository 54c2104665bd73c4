"""torch.compile in a trial (issue 31): the modes read from the installed trainer, the loss check, failures as a
status, and which engines offer the newer knobs where. The real compiled trial is in test_ultralytics.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from speedopt import engines
from speedopt.engines import _compile
from speedopt.status import Status, TrialRejected, status_of


def test_the_modes_are_read_from_the_installed_trainers_default_yaml():
    import importlib.util

    spec = importlib.util.find_spec("ultralytics")
    assert spec is not None and spec.submodule_search_locations
    line = next(t for t in (Path(next(iter(spec.submodule_search_locations))) / "cfg" / "default.yaml").read_text().splitlines()
                if t.startswith("compile:"))
    modes = _compile.compile_modes()
    assert modes and "default" in modes and all(m in line for m in modes)  # each one is in the file's own comment
    assert all(re.fullmatch(r"[a-z0-9-]+", m) for m in modes) and "inductor" not in modes  # the backend is not a mode


@pytest.mark.parametrize(("engine", "device"), [("ultralytics", "cpu"), ("yolov5", "cpu"), ("yolov5", "0"), ("standin", "0")])
def test_the_knobs_table_for_each_engine_and_device_kind(engine, device):
    """Ultralytics offers compile everywhere and channels_last on CUDA only; the classic trainer and the stand-in
    offer neither, and each fixed knob says why (the plan prints it)."""
    eng = engines.get(engine)
    fixed = eng.fixed_knobs(device)
    if engine == "ultralytics":
        assert "compile" not in fixed and "default" in eng.accepted(device)["compile"][0]
        assert fixed["channels_last"] == ("default", "channels_last is a CUDA-only option: the trainer ignores it on the CPU")
    else:
        assert fixed["compile"] == ("off", f"the {eng.name} trainer has no torch.compile option")
        assert fixed["channels_last"][0] == "default" and "no channels_last option" in fixed["channels_last"][1]
        assert eng.accepted(device) == {}


def test_ultralytics_on_a_gpu_without_bfloat16_takes_no_bf16(monkeypatch):
    # No GPU here: NVML's answer is the one thing mocked (a GPU of compute capability 7.5 has no bfloat16).
    monkeypatch.setattr(engines.ultralytics.machine, "bf16_supported", lambda device: False)
    allowed, why = engines.get("ultralytics").accepted("0")["amp"]
    assert "bf16" not in allowed and True in allowed and "compute capability 8.0" in why
    monkeypatch.setattr(engines.ultralytics.machine, "bf16_supported", lambda device: True)
    assert "amp" not in engines.get("ultralytics").accepted("0")


def test_a_compiled_loss_that_differs_from_eager_is_infeasible():
    assert _compile.check_loss(2.0, 2.0 * (1 + 1e-6), "default") == pytest.approx(1e-6)
    with pytest.raises(TrialRejected) as info:
        _compile.check_loss(2.0, 2.1, "max-autotune-no-cudagraphs")
    assert info.value.status is Status.INFEASIBLE and "5.00%" in str(info.value) and "keep compile=off" in str(info.value)


def test_a_compiler_failure_is_a_status_with_the_compilers_message():
    from torch._dynamo.exc import BackendCompilerFailed

    try:
        raise BackendCompilerFailed(lambda *a: None, RuntimeError("g++: fatal error: no input files\nmore detail"), None)
    except BackendCompilerFailed as exc:
        caught = exc
    assert _compile.is_compile_error(caught) and not _compile.is_compile_error(RuntimeError("other"))
    status, message = status_of(_compile.failure(caught, "default"))
    assert status is Status.INFEASIBLE and "torch.compile (compile=default) failed on this machine" in message
    assert "g++: fatal error" in message and "\n" not in message
