"""The engine spec: made once at the edge, spelled in records as the two fields studies and jobs always had."""

from __future__ import annotations

import pytest

from speedopt import engines
from speedopt.engines import EngineSpec
from speedopt.errors import UsageError


def test_a_spec_reads_as_the_records_fields_and_back():
    spec = EngineSpec("yolov5", "/src/yolov5")
    assert spec.record() == {"engine": "yolov5", "yolov5_dir": "/src/yolov5"}
    assert EngineSpec(**{"name": spec.record()["engine"], "checkout": spec.record()["yolov5_dir"]}) == spec
    assert EngineSpec() == EngineSpec(engines.DEFAULT, None)


def test_resolved_makes_the_checkout_absolute_and_leaves_none_or_empty_as_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert EngineSpec("yolov5", "clone/").resolved() == EngineSpec("yolov5", str(tmp_path / "clone"))
    assert EngineSpec("yolov5", "").resolved() == EngineSpec("yolov5", None)
    assert EngineSpec("ultralytics").resolved() == EngineSpec("ultralytics")


def test_the_engine_is_built_once_and_its_words_are_its_dialects():
    spec = EngineSpec("ultralytics")
    assert spec.engine is spec.engine and spec.engine.name == "ultralytics"
    assert spec.dialect == engines.engine_class("ultralytics").dialect
    assert spec.words == engines.words("ultralytics") and EngineSpec("yolov5").words.dialect == "train.py"


def test_a_checkout_for_an_engine_without_one_is_refused_as_get_refuses_it():
    with pytest.raises(UsageError, match="--yolov5-dir is for --engine yolov5 only"):
        _ = EngineSpec("ultralytics", "/src/yolov5").engine


def test_a_yolov5_spec_checks_its_checkout_when_its_engine_is_built(tmp_path):
    spec = EngineSpec("yolov5", f"{tmp_path}/missing/")
    assert spec.dialect == "train.py"  # read from the class: nothing checked
    with pytest.raises(UsageError, match=r"missing/: no such folder"):  # the path as the user gave it
        _ = spec.engine
