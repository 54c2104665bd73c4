"""Warm start from a study made on a bigger machine (a fake fingerprint: 64 cores and an H200;
no such machine exists here), adapted to this one and run for real."""

import os

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt import data as dataset
from speedopt.knobs import Knobs
from speedopt.quality import CACHE_STUDY
from speedopt.study import Space, flat_attrs, schema
from speedopt.study._source import adapt
from speedopt.study.record_types import Domain
from tests.conftest import EVERY_CONFIG, run_cli

BIG = {"key": {"cpu_model": "AMD EPYC 9654", "cpu_cores": 64, "ram_gb": 1024, "gpus": ["NVIDIA H200"]},
       "gpus": [{"name": "NVIDIA H200", "memory_mb": 143771}], "ram_total_gb": 1024}


def _source(path, dataset_id):
    url = f"sqlite:///{path}"
    study = optuna.create_study(study_name="big-h200", storage=url, direction="maximize")
    study.set_user_attr(schema.SCHEMA, schema.SCHEMA_VERSION)
    study.set_user_attr(schema.DATASET, {"id": dataset_id})
    study.set_user_attr(schema.MACHINE, BIG)
    configs = [  # (images/s there, feasible, config)
        (1000.0, False, Knobs("yolov5n", 96, 128, 32, "ram", True, 0)),  # rejected by its mAP constraint
        (900.0, True, Knobs("yolov5n", 96, 64, 16, "ram", True, 0)),
        (700.0, True, Knobs("yolov5n", 128, 32, 8, "disk", True, 0)),
        (600.0, True, Knobs("yolov5n", 96, 16, 2, "none", False, 0)),  # the same as the first, once adapted
        (500.0, True, Knobs("yolov5n", 128, 8, 1, "none", False, 0)),
    ]
    for ips, feasible, knobs in configs:
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=ips, user_attrs={
            "status": "ok", "images_per_s": ips, "feasible": feasible, "config": knobs.to_dict()}))
    cache = optuna.create_study(study_name=CACHE_STUDY, storage=url)
    cache.set_user_attr("probe:fake", {"dataset": dataset_id, "status": "ok", "map50_95": 0.5})
    cache.set_user_attr("probe:other", {"dataset": "another", "status": "ok", "map50_95": 0.1})
    return url


def test_adapt_explains_every_change():
    space = Space({"workers": Domain(low=0, high=2), "batch": Domain(choices=(2, 4, 8, 16)),
                   "imgsz": Domain(choices=(96, 128)), "cache": Domain(choices=("none", "disk")),
                   "amp": Domain(choices=(False,)), "model": Domain(choices=("yolov5n",)), "freeze": Domain(choices=(0,))})
    knobs, changes = adapt(Knobs("yolov5n", 96, 64, 16, "ram", True, 0), space, Knobs("yolov5n", 128, 4, 0),
                           cores=2, cuda=False, ram_fits=lambda k: False)
    assert knobs == Knobs("yolov5n", 96, 16, 2, "none", False, 0)
    assert len(changes) == 4 and any("cores" in c for c in changes) and any("batch 64 -> 16" in c for c in changes)


@pytest.mark.slow
def test_warm_start_from_a_bigger_machine(demo_yaml, tmp_path):
    fid = dataset.fingerprint(dataset.load(demo_yaml)).id
    src = _source(tmp_path / "big.db", fid)
    url = f"sqlite:///{tmp_path}/here.db"
    done = run_cli(
        "search", "--data", str(demo_yaml), "--trials", "4", "--storage", url, "--study", "warm",
        "--warm-start", f"{tmp_path / 'big.db'}::big-h200", "--baseline", "model=yolov5n imgsz=128 batch=4 workers=0",
        "--fix", "model=yolov5n", "--fix", "freeze=0", "--space", str(_space(tmp_path)), "--ram-limit", "0.001",
        "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu", "--probe-epochs", "1", "--probe-fraction", "0.5",
        "--probe-grow", "0", *EVERY_CONFIG,  # tiny probes from scratch: growing them is test_judge's, not this test's
        "--repeats", "0",  # the warm start is the trials' order: no finals, no ablation
        cwd=tmp_path, timeout=900,
    )
    assert done.returncode == 0, done.stderr
    cores = len(os.sched_getaffinity(0))
    trials = optuna.load_study(study_name="warm", storage=url).get_trials(states=(TrialState.COMPLETE,))
    assert [t.user_attrs.get("role") for t in trials] == ["baseline", "warm-start", "warm-start", "warm-start"]
    assert [t.user_attrs["source_trial"] for t in trials[1:]] == [1, 2, 4]  # fastest feasible first, no duplicate
    for t in trials[1:]:
        cfg = t.user_attrs["config"]
        assert t.user_attrs["status"] == "ok", flat_attrs(t.user_attrs)["message"]
        assert cfg["workers"] <= cores and cfg["amp"] is False and cfg["batch"] <= 16 and cfg["cache"] != "ram"
    assert [t.user_attrs["config"]["imgsz"] for t in trials[1:]] == [96, 128, 128]
    assert [t.user_attrs["config"]["cache"] for t in trials[1:]] == ["none", "disk", "none"]
    cache = optuna.load_study(study_name=CACHE_STUDY, storage=url).user_attrs
    assert cache["probe:fake"]["map50_95"] == 0.5 and "probe:other" not in cache  # same dataset only
    report = (tmp_path / "reports" / "warm.md").read_text()
    assert "## Warm start" in report and "`big-h200`" in report and "workers 16 -> " in report
    assert len(optuna.load_study(study_name="big-h200", storage=src).trials) == 5  # the source is untouched


def _space(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("imgsz: [96, 128]\ncache: [none, ram, disk]\n")
    return path


PG = os.environ.get("SPEEDOPT_TEST_POSTGRES")  # set by .ci/run, which starts a real server on loopback


def test_a_warm_start_source_is_read_only_and_never_changed(demo_yaml, tmp_path):
    from speedopt.errors import UsageError
    from speedopt.search import SearchConfig, plan

    fid = dataset.fingerprint(dataset.load(demo_yaml)).id
    _source(tmp_path / "big.db", fid)
    before = (tmp_path / "big.db").read_bytes()
    config = SearchConfig(data=str(demo_yaml), device="cpu", quality="off", warm_start=f"{tmp_path / 'big.db'}::big-h200")
    warm = plan(config).protocol.warm_start
    assert warm is not None and warm.configs  # read, adapted to this space
    assert (tmp_path / "big.db").read_bytes() == before
    (tmp_path / "other.db").write_bytes(b"")  # an empty file: not a storage, and it stays empty
    with pytest.raises(UsageError, match="holds no Optuna storage"):
        plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", warm_start=f"{tmp_path / 'other.db'}::x"))
    assert (tmp_path / "other.db").stat().st_size == 0


@pytest.mark.skipif(not PG, reason="no PostgreSQL server: .ci/run starts one and sets SPEEDOPT_TEST_POSTGRES")
def test_a_warm_start_url_is_stored_without_its_password(demo_yaml, tmp_path):
    from speedopt.search import SearchConfig, plan

    assert PG is not None
    name = f"warm-src-{os.getpid()}"
    source = optuna.create_study(study_name=name, storage=PG, direction="maximize")
    for key, value in ((schema.SCHEMA, schema.SCHEMA_VERSION), (schema.DATASET, {"id": "elsewhere"}), (schema.MACHINE, BIG)):
        source.set_user_attr(key, value)
    source.add_trial(create_trial(state=TrialState.COMPLETE, value=9.0, user_attrs={
        "status": "ok", "images_per_s": 9.0, "feasible": True, "config": Knobs("yolov5n", 64, 4, 0, "ram").to_dict()}))
    head, _, tail = PG.partition("@")
    secret = "hunter2-secret"
    with_password = f"{head}:{secret}@{tail}"  # the test server trusts loopback: any password connects
    proto = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", warm_start=f"{with_password}::{name}")).protocol
    assert proto.warm_start is not None and len(proto.warm_start.configs) == 1
    stored = str(proto.to_attrs())
    assert secret not in stored and f"{head}:***@{tail}::{name}" in stored
