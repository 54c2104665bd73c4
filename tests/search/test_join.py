"""Searches that open one new study at the same moment: one creates it, the others wait and join it (no
trainer runs: the study is opened, not optimised)."""

import dataclasses
import multiprocessing

import optuna
import pytest
from optuna.trial import TrialState

from speedopt.search import SearchConfig, plan
from speedopt.search import _open as open_mod
from speedopt.study import Need, open_storage, schema
from speedopt.study import _storage as storage_mod

BASELINE = "model=yolov5n imgsz=64 batch=4 workers=0"


def _open_at_once(search, barrier, results):
    barrier.wait()
    try:
        study, _ = open_mod.open_study(search, open_storage(search.storage_url, Need.CREATE))
        results.put(("ok", len(study.trials)))
    except Exception as exc:  # the race this test is about
        results.put((f"{type(exc).__name__}: {exc}", 0))


@pytest.fixture
def search(demo_yaml, tmp_path):
    config = SearchConfig(data=str(demo_yaml), device="cpu", quality="off", baseline=BASELINE, trials=3, study="race",
                          storage=f"sqlite:///{tmp_path}/s.db")
    return plan(config)


@pytest.mark.slow  # starts processes
def test_searches_opening_one_new_study_at_once_make_one_baseline(search, tmp_path):
    ctx = multiprocessing.get_context("fork")
    for attempt in range(3):  # the race is lost only sometimes: give it three chances on new storages
        fresh = dataclasses.replace(search, storage_url=f"sqlite:///{tmp_path}/race{attempt}.db")
        barrier, results = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(fresh, barrier, results)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        outcomes = [results.get(timeout=5) for _ in procs]
        assert [o for o, _ in outcomes] == ["ok"] * 3, outcomes
        study = optuna.load_study(study_name="race", storage=fresh.storage_url)
        assert [t.user_attrs.get("role") for t in study.trials] == ["baseline"]  # enqueued once, by the one creator
        assert study.trials[0].state == TrialState.WAITING and study.user_attrs["trials"] == 3


def test_a_study_whose_creator_stopped_half_way_is_set_up_by_the_next_search(search, monkeypatch):
    storage = open_storage(search.storage_url, Need.CREATE)
    optuna.create_study(study_name="race", storage=storage, direction="maximize")  # no attrs, no baseline
    monkeypatch.setattr(open_mod, "SETUP_WAIT_S", 0.3)
    study, _ = open_mod.open_study(search, storage)
    assert [t.user_attrs.get("role") for t in study.trials] == ["baseline"] and "space" in study.user_attrs


def test_a_search_resumes_only_a_study_of_its_schema(search):
    storage = open_storage(search.storage_url, Need.CREATE)
    study, _ = open_mod.open_study(search, storage)
    assert study.user_attrs[schema.SCHEMA] == schema.SCHEMA_VERSION  # written once, by the creator
    open_mod.open_study(search, storage)  # resumed
    study.set_user_attr(schema.SCHEMA, schema.SCHEMA_VERSION + 1)
    with pytest.raises(storage_mod.UsageError, match="newer than this speedopt reads .*upgrade speedopt"):
        open_mod.open_study(search, storage)


def test_the_study_name_is_checked_before_any_storage_is_made(demo_yaml, tmp_path):
    config = SearchConfig(data=str(demo_yaml), device="cpu", quality="off", study="a\nb", storage=f"sqlite:///{tmp_path}/s.db")
    with pytest.raises(storage_mod.UsageError, match="control characters"):
        plan(config)
    assert not (tmp_path / "s.db").exists()
