"""A trial's note: its one-screen summary in the dashboard."""

from __future__ import annotations

import dataclasses

import optuna
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.quality import Feasibility
from speedopt.status import Status
from speedopt.study import notes as note
from speedopt.study._finals import Finals, Repeat
from speedopt.study._record import TrialRecord
from speedopt.study._schema import SHOWN, flat_attrs, measurement_attrs, verdict_attrs


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
    text = note.trial_note(_record(3, 15.0, map_loss=0.004, map_spread=0.003, allowed_map_loss=0.01, probes_run=2), base)
    assert text.startswith("## Trial 3\n")
    assert "**15.0 images/s** measured over 10 steps, +/-4%" in text
    assert "1.50x the baseline's 10.0 images/s (trial 0" in text
    assert "data wait: 25%" in text
    assert "config as run: `" in text and "w2" in text and "asked: `" in text and "w8" in text
    assert "the trainer: workers 8 -> 2" in text
    assert "accuracy: accuracy kept (mAP50-95 loss +0.0040 +/- 0.0030 (allowed 0.0100); 2 probe(s) ran" in text
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
        attrs = {**measurement_attrs(record.result.to_dict()), **verdict_attrs({"feasible": True, "probes_run": 0}), "role": record.role}
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=record.images_per_s, user_attrs=attrs))
    frozen = study.get_trials()[1]
    note.write_note(study, frozen)
    saved = get_note_from_system_attrs(study._storage.get_study_system_attrs(study._study_id), frozen._trial_id)["body"]
    assert saved.startswith("## Trial 1\n") and "**12.0 images/s**" in saved and "1.20x the baseline's 10.0" in saved

    # The finals rewrite the finalists' notes with their medians and the paired interval.
    measured = [Repeat(r, t, Status.OK, ips) for r, pair in enumerate([(10.0, 13.0), (9.0, 12.0), (11.0, 12.5)]) for t, ips in zip((0, 1), pair)]
    finals = Finals((0, 1), 3, tuple(measured), min_gain=0.05)
    note.write_finals_notes(study, finals)
    saved = get_note_from_system_attrs(study._storage.get_study_system_attrs(study._study_id), frozen._trial_id)["body"]
    assert "- finals: **recommended**; 12.5 images/s median of 3 rounds (min-max 12.0-13.0); **1.30x** the baseline beside it (interval 1.14-1.33x)" in saved
    base = get_note_from_system_attrs(study._storage.get_study_system_attrs(study._study_id), study.get_trials()[0]._trial_id)["body"]
    assert "- finals: 10.0 images/s median of 3 rounds (min-max 9.0-11.0), measured beside the finalists" in base


def test_a_trial_keeps_few_named_user_attrs_and_reads_back_as_before():
    result = _record(1, 12.0).result.to_dict()
    verdict = {"feasible": True, "map_loss": 0.002, "probes_run": 2, "quality_reason": "kept"}
    stored = {**measurement_attrs(result), **verdict_attrs(verdict)}
    assert set(stored) == {*SHOWN, "measurement", "accuracy"}  # a dozen keys, the key figures readable by name
    assert stored["measurement"]["steps"] == 10 and "images_per_s" not in stored["measurement"]
    assert flat_attrs(stored) == {**result, **verdict}
    study = optuna.create_study()
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=12.0, user_attrs=stored))
    record = TrialRecord.from_frozen(study.trials[0])
    assert record is not None and record.result == _record(1, 12.0).result and record.probes_run == 2
    assert record.feasibility is Feasibility.FEASIBLE and record.quality_reason == "kept"


def test_a_trial_off_the_searched_space_says_so_and_why():
    from speedopt.study import Space
    from speedopt.study.record_types import Domain

    space = Space({"model": Domain(choices=("yolov5n",)), "batch": Domain(choices=(4, 8)), "workers": Domain(choices=(0, 2))})
    base = _record(0, 10.0, role="baseline")
    assert space.outside(dataclasses.replace(base.config, model="yolov5s")) == "it ran model=yolov5s, which the search fixes at yolov5n"
    assert space.outside(dataclasses.replace(base.config, batch=16)) == "it ran batch=16, a value the search does not try"
    assert space.outside(base.config) is None  # workers=2 as run is one of the space's values
    text = note.trial_note(base, base, outside="it ran model=yolov5s, which the search fixes at yolov5n")
    assert "not a point of the searched space: it ran model=yolov5s" in text and "leaves it out of the importance" in text
