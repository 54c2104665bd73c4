"""Pruning: a trial clearly slower than the best is stopped part-way, and its trainer process goes with it.

The pruner's rule is checked on a real Optuna study with stored trials; the kill path runs a real
trial whose progress callback prunes it at its first measured step (forced: no speed comparison).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from speedopt.knobs import Knobs
from speedopt.measure import TrialOptions, TrialProgress, TrialResult, make_request, run_trial
from speedopt.search._prune import BestMargin, pruned_text
from speedopt.status import Status

KNOBS = Knobs(model="yolov5n", imgsz=96, batch=4, workers=0, amp=False)


def _study_with_best(images_per_s: float) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    result = TrialResult(Status.OK, "", KNOBS, KNOBS, "cpu", "ultralytics", images_per_s=images_per_s)
    attrs = {**result.to_dict(), "feasible": True}
    study.add_trial(optuna.trial.create_trial(value=images_per_s, params={}, distributions={}, user_attrs=attrs))
    return study


def _running(study: optuna.Study, rates: dict[int, float]) -> optuna.trial.FrozenTrial:
    trial = study.ask()
    for step, rate in rates.items():
        trial.report(rate, step)
    return study._storage.get_trial(trial._trial_id)


def test_prunes_below_the_margin_only_after_min_steps():
    study = _study_with_best(100.0)
    pruner = BestMargin(margin=0.5, min_steps=3)
    assert not pruner.prune(study, _running(study, {1: 10.0, 2: 10.0}))  # too few steps, however slow
    assert pruner.prune(study, _running(study, {1: 10.0, 2: 10.0, 3: 49.0}))
    assert not pruner.prune(study, _running(study, {3: 51.0}))  # within the margin
    assert not BestMargin(margin=0.0, min_steps=3).prune(study, _running(study, {5: 1.0}))  # 0: never
    empty = optuna.create_study(direction="maximize")
    assert not pruner.prune(empty, _running(empty, {5: 1.0}))  # no best yet
    assert "below 50% of trial 0's 100.0 images/s" in pruned_text(40.0, 4, study, 0.5)


def _folders_of_this_process() -> list[Path]:
    """Private folders whose lease names this process (other processes may run trials meanwhile)."""
    mine = []
    for owner in Path(tempfile.gettempdir()).glob("speedopt-*/owner.json"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(owner.read_text()).get("pid") == os.getpid():
                mine.append(owner.parent)
    return mine


def _our_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_a_pruned_trial_leaves_no_process_and_no_folder(demo_yaml):
    request = make_request(str(demo_yaml), KNOBS, TrialOptions(device="cpu", steps=6, warmup=1))
    seen = []

    def prune_at_first_step(update: TrialProgress) -> None:
        seen.append(update)
        if update.phase == "measure" and update.images_per_s:
            raise optuna.TrialPruned("forced")

    before = {p.pid for p in _our_children()}  # earlier tests' processes are not this trial's
    with pytest.raises(optuna.TrialPruned):
        run_trial(request, progress=prune_at_first_step)
    assert any((u.images_per_s or 0) > 0 for u in seen)  # the child reported a running rate
    assert [p for p in _our_children() if p.pid not in before] == []
    assert _folders_of_this_process() == []  # its private folder went with it


def test_search_reports_to_the_pruner_and_records_why(demo_yaml, tmp_path):
    """The study's objective reports the running rate as intermediate values (fast: a study of one pruned trial
    is built by hand through the same callback the search uses)."""
    from speedopt.search._prune import reporting

    class Plan:
        class protocol:
            prune_margin = 0.5

    study = _study_with_best(100.0)
    study.pruner = BestMargin(0.5, 3)
    trial = study.ask()
    callback = reporting(trial, Plan, lambda update: None)  # type: ignore[arg-type]
    callback(TrialProgress("warmup", 1, 3))
    callback(TrialProgress("measure", 1, 10, images_per_s=20.0))
    with pytest.raises(optuna.TrialPruned):
        callback(TrialProgress("measure", 3, 10, images_per_s=20.0))
    frozen = study._storage.get_trial(trial._trial_id)
    assert frozen.intermediate_values == {1: 20.0, 3: 20.0}
    assert "pruned after 3 measured steps at 20.0 images/s" in frozen.user_attrs["pruned"]
    assert frozen.state is TrialState.RUNNING  # Optuna marks it PRUNED when the objective raises


def test_the_report_lists_pruned_trials_and_their_reason():
    from speedopt.reporting._markdown import _pruned

    study = _study_with_best(100.0)
    why = pruned_text(30.0, 4, study, 0.5)
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.PRUNED, params={"cache": "ram"}, distributions={"cache": optuna.distributions.CategoricalDistribution(["none", "ram"])},
        user_attrs={"pruned": why},
    ))
    study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, params={}, distributions={}, user_attrs={"duplicate_of": 0}))
    lines = _pruned(study)
    assert any("trial 1 `cache=ram`: pruned after 4 measured steps at 30.0 images/s" in line for line in lines)
    assert not any("trial 2" in line for line in lines)  # a duplicate is not a pruned measurement


def test_a_pruned_config_is_never_measured_again():
    """Pruned trials do not count as complete, so without this the sampler would propose the slow config forever."""
    from speedopt.search._skip import duplicate_of
    from speedopt.study import schema

    study = optuna.create_study(direction="maximize")
    slow = Knobs(model="yolov5n", imgsz=96, batch=4, workers=0, amp=False, cache="disk")
    study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, params={}, distributions={},
                                              user_attrs={schema.PRUNED_CONFIG: slow.to_dict(), schema.PRUNED: "slow"}))
    failed = TrialResult(Status.ERROR, "not run", slow, slow, "cpu", "ultralytics")
    assert duplicate_of(study, slow, failed) == 0
    assert duplicate_of(study, KNOBS, failed) is None


def test_the_budget_counts_trials_pruned_part_way_and_not_configs_skipped_before_they_ran():
    """``--trials 6`` means 6 runs of the trainer: a trial pruned after reporting steps spent budget, a skip did not."""
    from speedopt.search._budget import Target, full, spent
    from speedopt.study import outcome

    study = _study_with_best(100.0)  # one complete trial
    study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, params={}, distributions={},
                                              intermediate_values={3: 20.0}))  # pruned part-way: it ran
    study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, params={}, distributions={},
                                              user_attrs={"duplicate_of": 0}))  # skipped: it never ran
    assert spent(study) == 2 and full(study, 2) and not full(study, 3)
    assert outcome(study).pruned == 1 and "1 pruned part-way" in outcome(study).counts_text()
    target = Target(3)  # what the trials loop asks after each trial
    assert target.why(study, study.get_trials()[-1]) is None and not target.kept
    study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, params={}, distributions={},
                                              intermediate_values={4: 10.0}))
    assert target.why(study, study.get_trials()[-1]) == "the study has its 3 trials run or running"


def test_repeated_proposals_queue_an_unmeasured_config_and_a_measured_space_stops():
    """TPE past its random start keeps proposing its best in a small space: after QUEUE_AFTER repeats in a row the
    skip queues a config the space has not measured (a neighbour of the best), and stops once none is left."""
    from types import SimpleNamespace

    from speedopt.search._skip import QUEUE_AFTER, Skips, unmeasured
    from speedopt.study import Space, schema
    from speedopt.study.record_types import Domain

    space = Space({"model": Domain(choices=("yolov5n",)), "imgsz": Domain(choices=(96,)), "batch": Domain(choices=(4,)),
                   "workers": Domain(choices=(0,)), "amp": Domain(choices=(False,)), "cache": Domain(choices=("none", "ram"))})
    study = _study_with_best(100.0)  # KNOBS, cache none, measured as trial 0
    study.stop = lambda: None  # outside Study.optimize: the stop is read from the study's attr
    skips = Skips(SimpleNamespace(protocol=SimpleNamespace(prune_margin=0.5, space=space), seed=1))  # type: ignore[arg-type]
    assert [k.cache for k in unmeasured(study, space)] == ["ram"]
    failed = TrialResult(Status.ERROR, "", KNOBS, KNOBS, "cpu", "ultralytics")
    for _ in range(QUEUE_AFTER):
        assert not study.get_trials(states=(TrialState.WAITING,))
        trial = study.ask()
        with pytest.raises(optuna.TrialPruned, match="already measured in trial 0"):
            skips.check(trial, KNOBS, failed, baseline=False)
        study.tell(trial, state=TrialState.PRUNED)
    (queued,) = study.get_trials(states=(TrialState.WAITING,))
    assert queued.user_attrs["role"] == "unmeasured" and queued.system_attrs["fixed_params"] == {"cache": "ram"}
    assert unmeasured(study, space) == []  # queued counts: never queued twice
    trial = study.ask()  # the queued one; say its proposal repeated a measured config too: nothing new is left
    with pytest.raises(optuna.TrialPruned):
        skips.check(trial, KNOBS, failed, baseline=False)
    assert "the space is used up" in (schema.read_stopped(study) or "")
