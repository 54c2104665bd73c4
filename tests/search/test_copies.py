"""The data knob in a plan: offered where copies exist, lossless copies accuracy-neutral, JPEG ones probed.

Copies are made by the real `speedopt prepare` code on real generated images (no trainer runs here,
except Ultralytics' own image loader in the pixel test).
"""

import dataclasses

import numpy as np
import pytest

from speedopt import data
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.quality import Feasibility
from speedopt.reporting import Recommendation
from speedopt.search import SearchConfig, find_copies, plan
from speedopt.study import StudyProtocol, TrialRecord, flat_attrs

BASELINE = "model=yolov5n imgsz=96 batch=4 workers=0"


@pytest.fixture
def photos(tmp_path, monkeypatch):
    """Six 640x480 images (far above imgsz 96), in a working directory of their own (copies go to ./prepared)."""
    monkeypatch.chdir(tmp_path)
    return data.load(data.generate(tmp_path / "photos", data.DemoSpec(train=6, val=2, width=640, height=480)))


def _config(ds, tmp_path, **change):
    given = {"data": str(ds.yaml_path), "device": "cpu", "baseline": BASELINE, "storage": f"sqlite:///{tmp_path}/s.db"}
    return SearchConfig(**{**given, **change})


def _prepare(ds, fmt, imgsz=96):
    return data.prepare(ds, data.PrepareSpec(imgsz=imgsz, format=fmt), jobs=1).copy


def test_without_a_copy_the_data_knob_is_not_offered_and_asking_for_it_says_how(photos, tmp_path):
    p = plan(_config(photos, tmp_path, quality="off"))
    assert "data" not in p.protocol.space.domains and p.protocol.copies == ()
    with pytest.raises(UsageError, match="speedopt prepare") as info:
        plan(_config(photos, tmp_path, quality="off", fix=("data=resized",)))
    assert "\n" not in str(info.value)


def test_prepare_asked_of_a_search_is_planned_not_done(photos, tmp_path):
    p = plan(_config(photos, tmp_path, quality="off", prepare="png"))
    assert p.to_prepare == (96,) and p.prepare_format == "png"
    assert not (tmp_path / "prepared").exists()  # a plan writes nothing
    assert p.protocol.space.domains["data"].values() == ("original", "resized")


def test_a_lossless_copy_is_searched_with_quality_off_and_recorded(photos, tmp_path):
    copy = _prepare(photos, "png")
    p = plan(_config(photos, tmp_path, quality="off"))
    proto = p.protocol
    assert proto.space.domains["data"].values() == ("original", "resized")
    assert proto.quality.neutral == ("data",) and p.to_prepare == ()
    assert [c.yaml for c in proto.copies] == [str(copy.yaml_path)] and proto.copies[0].format == "png"
    assert proto.data_yaml(Knobs(imgsz=96, data="resized")) == str(copy.yaml_path)
    assert proto.data_yaml(Knobs(imgsz=96)) == str(photos.yaml_path)
    assert StudyProtocol.from_attrs(proto.to_attrs()) == proto  # workers and reports read the same copies


def test_a_jpeg_copy_is_an_accuracy_knob(photos, tmp_path):
    _prepare(photos, "jpg")
    off = plan(_config(photos, tmp_path, quality="off"))
    assert off.protocol.space.domains["data"].values() == ("original",)
    assert any("JPEG" in n and "--prepare png" in n for n in off.notes)
    probed = plan(_config(photos, tmp_path, quality="probe", fix=("imgsz=96",)))  # a copy at every imgsz searched
    assert probed.protocol.space.domains["data"].values() == ("original", "resized")
    assert probed.protocol.quality.neutral == ()


def test_a_copy_made_before_the_source_changed_is_refused_as_stale(photos, tmp_path):
    _prepare(photos, "png")
    victim = photos.train_images[0]
    victim.write_bytes(victim.read_bytes() + b"\0")  # the source changed since the copy was made
    with pytest.raises(UsageError, match="stale"):
        find_copies(photos, (96,))


def test_a_lossless_copy_holds_the_pixels_the_trainer_computes(photos):
    # The claim behind "neutral": Ultralytics' own loader gives the same arrays from the copy as from the original.
    from ultralytics.data.dataset import YOLODataset

    copy = data.load(_prepare(photos, "png").yaml_path)

    def loaded(ds):
        folder = ds.train_images[0].parent
        built = YOLODataset(img_path=str(folder), imgsz=96, augment=True, data={"names": dict(enumerate(ds.names)), "channels": 3})
        return [built.load_image(i)[0] for i in range(len(built))]

    ours, theirs = loaded(copy), loaded(photos)
    assert len(ours) == len(theirs) == 6
    assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(ours, theirs))


def test_the_recommended_command_trains_on_the_copy(photos, tmp_path):
    from speedopt.measure import TrialResult
    from speedopt.status import Status

    copy = _prepare(photos, "png")
    proto = plan(_config(photos, tmp_path, quality="off")).protocol
    knobs = dataclasses.replace(proto.baseline, data="resized")
    result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=10.0)
    rec = Recommendation("s", proto, TrialRecord(number=1, result=result, feasibility=Feasibility.FEASIBLE), None)
    assert f"data={copy.yaml_path}" in rec.command() and str(copy.yaml_path) in rec.measure_again()
    assert rec.to_dict()["data"] == str(copy.yaml_path)


@pytest.mark.slow
def test_a_search_with_prepare_measures_both_data_values_and_trains_the_copy(tmp_path):
    # Large images, a 2-config space (data original/resized; everything else pinned): the search makes the
    # copy, measures both, and the resized trial's trainer read the copy. Which is faster is not asserted.
    import json

    import optuna

    from tests.conftest import EVERY_CONFIG, run_cli

    work = tmp_path / "work"
    work.mkdir()
    yaml_path = data.generate(work / "photos", data.DemoSpec(train=12, val=2, width=1280, height=960))
    url = f"sqlite:///{work}/s.db"
    done = run_cli(
        "search", "--data", str(yaml_path), "--trials", "2", "--storage", url, "--study", "d", "--prepare", "png",
        "--quality", "off", "--baseline", "model=yolov5n imgsz=64 batch=2 workers=0", "--fix", "cache=none",
        "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu", "--repeats", "0", "--no-report", *EVERY_CONFIG, cwd=work, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "prepare: copy at imgsz=64" in done.stderr
    copy = work / "prepared"
    manifests = list(copy.rglob("speedopt-prepared.json"))
    assert len(manifests) == 1 and json.loads(manifests[0].read_text())["spec"]["format"] == "png"
    study = optuna.load_study(study_name="d", storage=url)
    trials = {t.user_attrs["config"]["data"]: t for t in study.get_trials() if t.state.name == "COMPLETE"}
    assert set(trials) == {"original", "resized"}
    assert all(t.user_attrs["status"] == "ok" for t in trials.values())
    # The trainer of the resized trial read the copy's images (their long side is imgsz), the other the originals.
    assert flat_attrs(trials["resized"].user_attrs)["image_long_side"] == 64
    assert flat_attrs(trials["original"].user_attrs)["image_long_side"] == 1280
    assert study.user_attrs["copies"][0]["format"] == "png"
    bill = study.user_attrs["bill"]  # issue 30: the search's own cost, by stage, the copy it made included
    assert bill["prepare"] > 0 and bill["trials"] > 0 and "bill: this search took" in done.stdout


def test_a_search_that_prepared_a_copy_measures_it_right_after_the_baseline_and_stops_not_before(photos, tmp_path):
    """Issue 30: the demo prepared a copy, then a stop rule ended the search before data=resized ran."""
    from types import SimpleNamespace

    import optuna
    from optuna.trial import TrialState

    from speedopt.measure import TrialResult
    from speedopt.search._ceiling_stop import CeilingStop
    from speedopt.search._open import open_study, prepared_first
    from speedopt.status import Status
    from speedopt.study import open_storage, schema
    from speedopt.study._storage import Need
    from speedopt.study.record_types import Ranking

    _prepare(photos, "png")
    p = plan(_config(photos, tmp_path, quality="off"))
    assert prepared_first(p) == {"cache": "none", "data": "resized"}  # quality off: data and cache vary (the baseline's)
    study, notes = open_study(p, open_storage(p.storage_url, Need.CREATE))
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [t.user_attrs["role"] for t in queued] == ["baseline", "prepared"] and queued[1].system_attrs["fixed_params"]["data"] == "resized"
    assert any("measured right after the baseline" in n for n in notes)
    on_copy = dataclasses.replace(p.protocol, baseline=dataclasses.replace(p.protocol.baseline, data="resized"))
    assert prepared_first(dataclasses.replace(p, protocol=on_copy)) is None  # the baseline trains on the copy already

    # The space bound is reached after the baseline; the stop waits for the prepared trial, then acts.
    base = study.ask()
    knobs = p.protocol.baseline
    result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=30.0, ci_rel=0.02)
    for k, v in {**result.to_dict(), "feasible": True}.items():
        base.set_user_attr(k, v)
    study.tell(base, 30.0)
    schema.write_ranking(study, Ranking(2, 2, True, "", space_bound=30.5))
    rule = CeilingStop(SimpleNamespace(protocol=dataclasses.replace(p.protocol, stop_at_ceiling=0.95)),  # type: ignore[arg-type]
                       SimpleNamespace(note=lambda line: None), lambda knobs: None)  # type: ignore[arg-type]
    frozen = study.get_trials()[base.number]
    assert rule.why(study, frozen) is None  # the prepared trial still waits
    prepared = study.ask()  # Optuna hands out the enqueued trials in order: the prepared one is next
    assert prepared.user_attrs.get("role") == "prepared"
    study.tell(prepared, state=TrialState.FAIL)
    stopped = rule.why(study, frozen) or ""
    assert "98% of the highest bound" in stopped
    # then what bounds it and what is left: no ceilings stored for the baseline; on a CPU no peak; quality off kept
    # the accuracy knobs on the compute side, and the CPU space leaves compile out
    assert "What bounds it and what is left: its ceilings not measured; peak unknown on a CPU: " in stopped, stopped
    assert "(drop --quality off to let model, imgsz, batch and freeze vary)" in stopped, stopped
    optuna.delete_study(study_name=study.study_name, storage=p.storage_url)
