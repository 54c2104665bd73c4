"""A trial's note: its one-screen summary in the dashboard."""

from __future__ import annotations

import dataclasses

import optuna
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.quality import Feasibility
from speedopt.status import Status
from speedopt.study import _note as note
from speedopt.study._record import TrialRecord


def _record(number: int, ips: float | None, role: str | None = None, **changes: object) -> TrialRecord:
    asked = Knobs(model="yolov5n", imgsz=128, batch=8, workers=8)
    result = TrialResult(
        Status.OK if ips else Status.OOM, "" if ips else "out of memory at batch=8", dataclasses.replace(asked, workers=2), asked,
        "cpu", "ultralytics", notes=("workers 8 -> 2: the trainer caps workers at the CPU cores",), images_per_s=ips,
        data_wait_fraction=0.25, steps=10, ci_rel=0.04,
    )
    feasibility = Feasibility.FEASIBLE if ips else Feasibility.NOT_MEASURED
    return TrialRecord(number, result, feasibility, role=role, **changes)  # type: ignore[arg-type]


def test_the_note_says_speed_with_its_unit_speedup_wait_config_trainer_change_and_verdict():
    base = _record(0, 10.0, role="baseline")
    text = note.trial_note(_record(3, 15.0, map_loss=0.004, allowed_map_loss=0.01, probes_run=1), base)
    assert text.startswith("## Trial 3\n")
    assert "**15.0 images/s** measured over 10 steps, +/-4%" in text
    assert "1.50x the baseline's 10.0 images/s (trial 0" in text
    assert "data wait: 25%" in text
    assert "config as run: `" in text and "w2" in text and "asked: `" in text and "w8" in text
    assert "the trainer: workers 8 -> 2" in text
    assert "accuracy: accuracy kept (mAP50-95 loss +0.004 (allowed 0.010); 1 probe(s) ran" in text
    own = note.trial_note(base, base)
    assert "(the baseline: your settings)" in own and "x the baseline" not in own


def test_a_trial_that_did_not_measure_says_its_status_and_message():
    text = note.trial_note(_record(2, None), _record(0, 10.0, role="baseline"))
    assert "**oom**: out of memory at batch=8" in text and "x the baseline" not in text
    assert "not judged (not measured)" in text


def test_the_callback_saves_the_note_the_dashboard_reads(tmp_path):
    from optuna_dashboard._note import get_note_from_system_attrs

    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/n.db", direction="maximize")
    for record in (_record(0, 10.0, role="baseline"), _record(1, 12.0)):
        attrs = {**record.result.to_dict(), "feasible": True, "role": record.role}
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=record.images_per_s, user_attrs=attrs))
    frozen = study.get_trials()[1]
    note.write(study, frozen)
    saved = get_note_from_system_attrs(study._storage.get_study_system_attrs(study._study_id), frozen._trial_id)["body"]
    assert saved.startswith("## Trial 1\n") and "**12.0 images/s**" in saved and "1.20x the baseline's 10.0" in saved


def test_a_trial_off_the_searched_space_says_so_and_why():
    from speedopt.study import Domain, Space

    space = Space({"model": Domain(choices=("yolov5n",)), "batch": Domain(choices=(4, 8)), "workers": Domain(choices=(0, 2))})
    base = _record(0, 10.0, role="baseline")
    assert space.outside(dataclasses.replace(base.config, model="yolov5s")) == "it ran model=yolov5s, which the search fixes at yolov5n"
    assert space.outside(dataclasses.replace(base.config, batch=16)) == "it ran batch=16, a value the search does not try"
    assert space.outside(base.config) is None  # workers=2 as run is one of the space's values
    text = note.trial_note(base, base, outside="it ran model=yolov5s, which the search fixes at yolov5n")
    assert "not a point of the searched space: it ran model=yolov5s" in text and "leaves it out of the importance" in text
