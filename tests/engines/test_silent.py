"""What ran, not what was asked: the silent-change readers on synthetic trainer state (issue 31).

The trainer state is built by hand, as the Ultralytics trainer holds it after set-up (no trainer runs here):
a batch the trainer halved after an OOM, a cache its space check dropped, AMP its check turned off.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from speedopt.engines._silent import reject, silent_changes
from speedopt.engines.ultralytics import _SILENT_RULES, _knobs_as_run
from speedopt.knobs import Knobs
from speedopt.status import Status, TrialRejected

ASKED = Knobs(model="yolov5n", imgsz=320, batch=16, workers=0, cache="ram", amp=True, freeze=0)


class _Model(torch.nn.Module):
    """Two layers named as a YOLO model's (``model.0.``, ``model.1.``), scale n."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 4, 1))
        self.yaml = {"scale": "n"}


class _Compiled(torch.nn.Module):
    """What torch.compile returns: a wrapper holding the eager model as ``_orig_mod``."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self._orig_mod = model


def _trainer(
    batch: int = 16, cache: str | None = "ram", amp: bool = True, asked_amp: object = True, compiled: bool = False,
    nhwc: bool = False,
) -> SimpleNamespace:
    dataset = SimpleNamespace(cache=cache)
    loader = SimpleNamespace(dataset=dataset, num_workers=0)
    model: torch.nn.Module = _Model()
    if nhwc:
        model = model.to(memory_format=torch.channels_last)
    args = SimpleNamespace(imgsz=320, amp=asked_amp)
    return SimpleNamespace(
        model=_Compiled(model) if compiled else model, args=args, batch_size=batch, train_loader=loader, amp=amp
    )


@pytest.fixture(autouse=True)
def _deterministic_torch():
    """torch's deterministic mode on, as the trainer's init_seeds leaves it by default (read back as run)."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(False)


def _changes(trainer: SimpleNamespace) -> list:
    return silent_changes(ASKED, _knobs_as_run(trainer, ASKED), _SILENT_RULES)


def test_a_trainer_that_ran_what_was_asked_changes_nothing():
    assert _knobs_as_run(_trainer(), ASKED) == ASKED  # off CUDA channels_last=default stays default
    assert _changes(_trainer()) == []
    reject([])  # nothing to reject: no exception


@pytest.mark.parametrize(
    ("trainer", "knob", "ran", "status", "why"),
    [
        (_trainer(batch=8), "batch", 8, Status.OOM, "halves the batch"),
        (_trainer(cache=None), "cache", "none", Status.INFEASIBLE, "space check found too little free RAM"),
        (_trainer(amp=False), "amp", False, Status.INFEASIBLE, "AMP check failed"),
    ],
    ids=["batch halved", "cache dropped", "amp off"],
)
def test_each_silent_change_is_read_back_and_ends_the_trial_with_its_status(trainer, knob, ran, status, why):
    changes = _changes(trainer)
    assert [(c.knob, c.ran, c.status) for c in changes] == [(knob, ran, status)]
    assert why in changes[0].text() and "the trial is not the config asked" in changes[0].text()
    with pytest.raises(TrialRejected) as info:
        reject(changes)
    assert info.value.status is status and f"{knob}=" in str(info.value)


def test_only_the_knobs_named_are_compared_and_the_first_change_decides():
    ran = dataclasses.replace(ASKED, batch=4, cache="none")
    assert [c.knob for c in silent_changes(ASKED, ran, {}, ("cache",))] == ["cache"]
    both = silent_changes(ASKED, ran, {})
    assert [c.knob for c in both] == ["batch", "cache"] and "the trainer's own rule" in both[0].why
    with pytest.raises(TrialRejected) as info:
        reject(both)
    assert info.value.status is Status.OOM


def test_compile_bf16_and_channels_last_are_read_back_from_the_trainer():
    asked = dataclasses.replace(ASKED, amp="bf16", compile="default", channels_last="on")
    ran = _knobs_as_run(_trainer(asked_amp="bf16", compiled=True, nhwc=True), asked)
    assert (ran.amp, ran.compile, ran.channels_last) == ("bf16", "default", "on")
    assert silent_changes(asked, ran, _SILENT_RULES) == []


@pytest.mark.parametrize(
    ("trainer", "asked", "knob", "why"),
    [
        (_trainer(compiled=False), {"compile": "default"}, "compile", "no working inductor backend"),
        (_trainer(nhwc=False), {"channels_last": "on"}, "channels_last", "CUDA-only"),
        (_trainer(amp=False, asked_amp="bf16"), {"amp": "bf16"}, "amp", "AMP check failed"),
    ],
    ids=["compile fell back to eager", "channels_last ignored off CUDA", "bf16 turned off"],
)
def test_a_newer_knob_the_trainer_dropped_is_infeasible(trainer, asked, knob, why):
    wanted = dataclasses.replace(ASKED, **asked)
    changes = silent_changes(wanted, _knobs_as_run(trainer, wanted), _SILENT_RULES)
    assert [(c.knob, c.status) for c in changes] == [(knob, Status.INFEASIBLE)] and why in changes[0].text()


def test_deterministic_is_read_back_from_torch_as_the_trainer_left_it():
    torch.use_deterministic_algorithms(False)  # what init_seeds(deterministic=False) leaves
    off = dataclasses.replace(ASKED, deterministic=False)
    assert _knobs_as_run(_trainer(), off) == off
    changes = silent_changes(ASKED, _knobs_as_run(_trainer(), ASKED), _SILENT_RULES)  # asked on, torch runs off
    assert [(c.knob, c.status) for c in changes] == [("deterministic", Status.INFEASIBLE)]
    assert "torch 2.0 or newer" in changes[0].text()


def test_channels_last_default_is_recorded_as_the_trainer_ran_it_on_cuda():
    # No GPU here: only the trainer's device type says cuda (the model itself stays on the CPU).
    on_cuda = _trainer(nhwc=True)
    on_cuda.device = SimpleNamespace(type="cuda")
    ran = _knobs_as_run(on_cuda, ASKED)
    assert ran.channels_last == "on" and silent_changes(ASKED, ran, _SILENT_RULES) == []
