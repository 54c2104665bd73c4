"""The search's stopwatch: stages timed once each (nested ones apart), added up in the study's bill."""

from __future__ import annotations

import time

import optuna
import pytest

from speedopt.isolation import measuring
from speedopt.study import schema
from speedopt.study._clock import Clock


def test_a_nested_stage_counts_once_and_the_outer_stage_adds_the_run_to_the_studys_bill():
    study = optuna.create_study()
    clock = Clock()
    clock.bind(study)
    with clock.stage("trials"):
        time.sleep(0.05)
        with clock.stage("probes"), measuring("clock"):  # a run that measures (one that does not: tests/faults)
            time.sleep(0.1)
        assert "bill" not in study.user_attrs  # written when the outermost stage ends
    bill = schema.read_bill(study)
    assert bill.seconds["probes"] >= 0.1 and bill.seconds["trials"] >= 0.05
    assert bill.seconds["trials"] < 0.05 + bill.seconds["probes"]  # the probes' time is not the trials' too
    clock.add("prepare", 2.0)
    again = Clock()
    again.bind(study)  # a resumed search, or another worker: its seconds add to the study's
    with again.stage("trials"), measuring("clock"):
        time.sleep(0.02)
    bill = schema.read_bill(study)
    assert bill.seconds["prepare"] == 2.0 and bill.seconds["trials"] > 0.06
    assert bill.total_s == pytest.approx(sum(bill.seconds.values()))
    assert bill.lines()[0].startswith("2 s prepare")  # largest first, stages under a second left out
