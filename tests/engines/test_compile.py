"""torch.compile in a trial (issue 31): the modes read from the installed trainer, the loss check, failures as a
status, and which engines offer the newer knobs where. The real compiled trial is in test_ultralytics.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from speedopt import engines
from speedopt.engines import _compile
from speedopt.engines._ultralytics_cfg import close_mosaic, compile_modes
from speedopt.status import Status, TrialRejected, status_of


def test_the_modes_are_read_from_the_installed_trainers_default_yaml():
    import importlib.util

    spec = importlib.util.find_spec("ultralytics")
    assert spec is not None and spec.submodule_search_locations
    line = next(t for t in (Path(next(iter(spec.submodule_search_locations))) / "cfg" / "default.yaml").read_text().splitlines()
                if t.startswith("compile:"))
    modes = compile_modes()
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
        assert "deterministic" not in fixed  # torch's deterministic mode acts on the CPU too
    else:
        assert fixed["compile"] == ("off", f"the {eng.name} trainer has no torch.compile option")
        assert fixed["channels_last"][0] == "default" and "no channels_last option" in fixed["channels_last"][1]
        assert fixed["deterministic"] == (True, f"the {eng.name} trainer has no deterministic option")  # train.py: always on
        assert eng.accepted(device) == {}


def test_ultralytics_on_a_gpu_without_bfloat16_takes_no_bf16(monkeypatch):
    # No GPU here: NVML's answer is the one thing mocked (a GPU of compute capability 7.5 has no bfloat16).
    from speedopt.engines import ultralytics  # imported here: the package does not import its engines itself

    monkeypatch.setattr(ultralytics.machine, "bf16_supported", lambda device: False)
    allowed, why = engines.get("ultralytics").accepted("0")["amp"]
    assert "bf16" not in allowed and True in allowed and "compute capability 8.0" in why
    monkeypatch.setattr(ultralytics.machine, "bf16_supported", lambda device: True)
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


TINY_YAML = """# A tiny detector (tests only): three conv stages and a one-level Detect head at stride 32. torch.compile of
# yolov5n takes minutes cold on a 2-core CPU; this compiles in seconds, through the same trainer code.
nc: 3
backbone:
  - [-1, 1, Conv, [8, 3, 4]]
  - [-1, 1, Conv, [16, 3, 4]]
  - [-1, 1, Conv, [16, 3, 2]]
head:
  - [[2], 1, Detect, [nc]]
"""


@pytest.mark.slow
def test_a_search_over_compile_modes_compiles_no_trial_and_decides_compile_once_at_the_end(demo_yaml, tmp_path):
    """A search whose space lists compile modes runs every trial eager, then measures the recommendation eager and
    compiled with the real trainer on the CPU (a C++ compiler is here): the compiled rounds report their one-time
    cost apart from their steady images/s and pass the loss check. With one epoch to win it back on 48 images, the
    cost cannot pay: the decision is "keep eager" whichever measured faster, and the command stays eager."""
    from speedopt.reporting import recommend
    from speedopt.study import find_study, outcome, records
    from tests.conftest import EVERY_CONFIG, run_cli

    model = tmp_path / "tiny.yaml"
    model.write_text(TINY_YAML)
    space = tmp_path / "space.yaml"
    space.write_text("compile: [off, default]\n")
    url = f"sqlite:///{tmp_path}/s.db"
    done = run_cli(
        "search", "--data", str(demo_yaml), "--space", str(space), "--fix", "cache=none", "--trials", "1",
        "--baseline", f"model={model} imgsz=128 batch=4 workers=0", "--storage", url, "--study", "compile",
        "--steps", "5", "--max-steps", "5", "--warmup", "2", "--device", "cpu", "--quality", "off", "--epochs", "1",
        "--finalists", "1", "--repeats", "2", "--no-ablation", "--no-report", *EVERY_CONFIG, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    study = find_study(url, "compile")
    assert all(r.result.requested.compile == "off" and r.config.compile == "off" for r in records(study))  # none compiled
    decision = outcome(study).compile
    assert decision is not None and decision.complete and decision.modes == ("default",), done.stdout
    compiled = [m for m in decision.measured if m.of == 1]
    assert len(compiled) == 2 and all(m.status.value == "ok" for m in compiled), decision
    cost = decision.cost("default")
    steady_step_s = 4 / min(m.images_per_s or 1.0 for m in compiled)  # batch 4 at the slowest compiled round
    assert cost is not None and cost > 3 * steady_step_s  # the warm-up took the compile: more than 3 steady steps
    assert decision.choice is None and "torch.compile: keep eager" in done.stdout
    rec = recommend(study)
    assert rec is not None and rec.knobs.compile == "off" and "compile=" not in rec.command()


def test_the_mosaic_off_epochs_are_the_installed_trainers_close_mosaic():
    assert close_mosaic() == 10  # Ultralytics' default.yaml: close_mosaic: 10
    assert engines.get("ultralytics").mosaic_off_epochs(100) == 10 and engines.get("ultralytics").mosaic_off_epochs(6) == 6
    assert engines.get("yolov5").mosaic_off_epochs(100) == 0  # the classic train.py keeps mosaic to the end
