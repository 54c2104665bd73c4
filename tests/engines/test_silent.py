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
from speedopt.engines.ultralytics import _knobs_as_run, _silent_why
from speedopt.knobs import Knobs
from speedopt.status import Status, TrialRejected

ASKED = Knobs(model="yolov5n", imgsz=320, batch=16, workers=0, cache="ram", amp=True, freeze=0)


class _Model(torch.nn.Module):
    """Two layers named as a YOLO model's (``model.0.``, ``model.1.``), scale n."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(4, 4, 1))
        self.yaml = {"scale": "n"}


def _trainer(batch: int = 16, cache: str | None = "ram", amp: bool = True) -> SimpleNamespace:
    dataset = SimpleNamespace(cache=cache)
    loader = SimpleNamespace(dataset=dataset, num_workers=0)
    return SimpleNamespace(model=_Model(), args=SimpleNamespace(imgsz=320), batch_size=batch, train_loader=loader, amp=amp)


def _changes(trainer: SimpleNamespace) -> list:
    return silent_changes(ASKED, _knobs_as_run(trainer, ASKED), _silent_why(ASKED))


def test_a_trainer_that_ran_what_was_asked_changes_nothing():
    assert _knobs_as_run(_trainer(), ASKED) == ASKED
    assert _changes(_trainer()) == []
    reject([])  # nothing to reject: no exception


@pytest.mark.parametrize(
    ("trainer", "knob", "ran", "status", "why"),
    [
        (_trainer(batch=8), "batch", 8, Status.OOM, "halves the batch"),
        (_trainer(cache=None), "cache", "none", Status.INFEASIBLE, "RAM check"),
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
