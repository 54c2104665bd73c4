"""The one schema of what a study stores: each record written and read back, the schema version checked."""

from __future__ import annotations

import optuna
import pytest

from speedopt.engines import LabelCacheBuild, SplitLabels
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, LabelCaches, TrialResult
from speedopt.search import SearchConfig, plan
from speedopt.status import Status
from speedopt.study import Ablation, Finals, TrialRecord, find_study, flat_attrs, schema
from speedopt.study._ablation import Change, Probe
from speedopt.study.record_types import Ranking, Repeat


@pytest.fixture
def study(tmp_path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path}/s.db", direction="maximize")


def _reloaded(study: optuna.Study) -> optuna.Study:
    """The study as another process reads it: through the storage (its JSON), not this object."""
    return optuna.load_study(study_name=study.study_name, storage=study._storage)


def test_a_new_study_stores_the_schema_version_and_its_protocol(study, demo_yaml, tmp_path):
    proto = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", storage=f"sqlite:///{tmp_path}/s.db")).protocol
    schema.write_protocol(study, proto)
    again = _reloaded(study)
    assert again.user_attrs[schema.SCHEMA] == schema.SCHEMA_VERSION == 1
    assert schema.read_protocol(again) == proto
    schema.check(again)  # this speedopt reads it
    assert find_study(f"sqlite:///{tmp_path}/s.db", "s").study_name == "s"


def test_every_study_record_is_read_back_as_written(study):
    assert (schema.read_labels(study), schema.read_ranking(study), schema.read_finals(study), schema.read_ablation(study)) == (None,) * 4
    assert (schema.read_ceilings(study), schema.read_ceilings_for(study), schema.read_memory_fits(study)) == ({}, {}, {})
    assert (schema.read_stopped(study), schema.read_verification(study), schema.read_artifacts(study)) == (None, None, {})

    split = SplitLabels("train", "/data/labels/train.cache", 48, 0.5, False, "h1", "1.0.3")
    labels = LabelCaches((LabelCacheBuild("/data/data.yaml", (split,)),), (("/other.yaml", "error: boom"),))
    schema.write_labels(study, labels)
    data = Ceiling("data", "k1", Status.OK, "", 120.0, 0.02, 10, 5.0)
    compute = Ceiling("compute", "k2", Status.OOM, "out of memory")
    schema.write_ceiling(study, "data|k1", data)
    schema.write_ceiling(study, "compute|k2", compute)  # added beside the first, which stays
    schema.write_ceilings_for(study, 0, 3)
    ranking = Ranking(3, 4, True, "ranked 3 configs", ((Knobs(cache="ram"), 50.0),), space_bound=60.0, wall_s=3.0)
    schema.write_ranking(study, ranking)
    schema.write_memory_fits(study, {"gpu yolov5n 96": {"key": "gpu yolov5n 96", "batches": [8, 16]}})
    finals = Finals((0, 1), 2, (Repeat(0, 0, Status.OK, 10.0), Repeat(0, 1, Status.OOM, None)), min_gain=0.05)
    schema.write_finals(study, finals)
    schema.set_aside_finals(study, finals)
    start, end = Knobs(workers=0), Knobs(workers=2, cache="ram")
    ablation = Ablation(
        0, 1, start, end, (Change("workers", 0, 2), Change("cache", "none", "ram")), (), 2, 0.05,
        (Probe(("workers",), "cache", Status.OK, 12.0), Probe((), "cache", None, None, "refused")),
        (("workers",), ("cache",)), ("a note",), (Repeat(0, 0, Status.OK, 10.0),),
    )
    schema.write_ablation(study, ablation)
    schema.write_stopped(study, "the space is used up")
    schema.write_val_time(study, "abc", {"status": "ok", "val_s": 1.5, "val_images": 8, "save_s": None})
    schema.write_artifacts(study, {"history.png": "5f1b9c2e-7a3d-4b8e-9f10-2c6d8e4a1b37"})
    schema.write_verification(study, {"study": "s", "status": "ok"})

    again = _reloaded(study)
    assert schema.read_labels(again) == labels
    assert schema.read_ceilings(again) == {"data|k1": data, "compute|k2": compute}
    assert schema.read_ceilings_for(again) == {"baseline": 0, "recommended": 3}
    assert schema.read_ranking(again) == ranking
    assert schema.read_memory_fits(again) == {"gpu yolov5n 96": {"key": "gpu yolov5n 96", "batches": [8, 16]}}
    assert schema.read_finals(again) == finals
    assert again.user_attrs[schema.FINALS_PREVIOUS] == [finals.to_attr()]
    assert schema.read_ablation(again) == ablation
    assert schema.read_stopped(again) == "the space is used up"
    assert schema.read_val_time(again, "abc") == {"status": "ok", "val_s": 1.5, "val_images": 8, "save_s": None}
    assert schema.read_val_time(again, "other") is None
    assert schema.read_artifacts(again) == {"history.png": "5f1b9c2e-7a3d-4b8e-9f10-2c6d8e4a1b37"}
    assert schema.read_verification(again) == {"study": "s", "status": "ok"}
    schema.write_stopped(study, None)  # a resumed search samples again
    assert schema.read_stopped(_reloaded(study)) is None


def test_a_trial_stores_its_key_figures_by_name_and_the_rest_in_two_json_attrs(study):
    asked = Knobs(model="yolov5n", imgsz=128, batch=8, workers=8)
    result = TrialResult(Status.OK, "", asked, asked, "cpu", "ultralytics", images_per_s=12.0, data_wait_fraction=0.25, steps=10)
    verdict = {"feasible": True, "map_loss": 0.002, "probes_run": 2, "quality_reason": "kept"}
    trial = study.ask()
    schema.write_measurement(trial, result.to_dict())
    schema.write_verdict(trial, verdict)
    study.tell(trial, 12.0)
    stored = _reloaded(study).trials[0]
    assert set(stored.user_attrs) == {*schema.SHOWN, schema.MEASUREMENT, schema.ACCURACY}
    assert stored.user_attrs[schema.IMAGES_PER_S] == 12.0 and stored.user_attrs[schema.MEASUREMENT]["steps"] == 10
    assert flat_attrs(stored.user_attrs)["quality_reason"] == "kept"
    record = TrialRecord.from_frozen(stored)
    assert record is not None and record.result == result and record.probes_run == 2


@pytest.mark.parametrize(
    "version, says",
    [
        (None, "has no speedopt schema version (this speedopt reads schema 1): it was not made by speedopt search"),
        (2, "was stored with schema version 2, newer than this speedopt reads (schema 1); upgrade speedopt"),
        ("one", "has an unknown schema version 'one' (this speedopt reads schema 1); re-run the search"),
        (True, "has an unknown schema version True"),
        (0, "has an unknown schema version 0"),
    ],
)
def test_a_study_of_another_schema_is_refused_in_one_line(study, tmp_path, version, says):
    if version is not None:
        study.set_user_attr(schema.SCHEMA, version)
    with pytest.raises(UsageError, match="study 's'") as refused:
        schema.check(study)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(UsageError, match="schema"):  # every command that opens a study by name
        find_study(f"sqlite:///{tmp_path}/s.db", "s")
