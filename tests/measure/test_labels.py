"""The label-cache records and job: what a study stores of its labels job, and what crosses into a child."""

from speedopt.engines import LabelCacheBuild, SplitLabels
from speedopt.knobs import Knobs
from speedopt.measure import JobOutcome, LabelCaches, TrialRequest, TrialResult
from speedopt.measure._jobs import LabelsJob, job_from_json, job_to_json
from speedopt.measure._labels import MULTI_GPU_NOTE, labels_timeout_s
from speedopt.status import Status


def _split(split, images, reused=False):
    return SplitLabels(split, f"/d/labels/{split}.cache", images, 1.5, reused, f"hash-{split}", "1.0.12")


BUILD = LabelCacheBuild("/d/data.yaml", (_split("train", 100), _split("val", 20)))


def test_the_study_attr_round_trips_and_names_each_split():
    caches = LabelCaches((BUILD,), (("/e/data.yaml", "timeout: took too long"),))
    attr = caches.to_attr()
    assert attr["data"]["/d/data.yaml"]["train"] == {**_split("train", 100).to_dict()}
    assert attr["data"]["/d/data.yaml"]["val"]["images"] == 20 and attr["data"]["/d/data.yaml"]["val"]["reused"] is False
    assert attr["seconds"] == 3.0 and attr["images"] == 120 and attr["note"] == MULTI_GPU_NOTE
    assert attr["failed"] == {"/e/data.yaml": "timeout: took too long"}
    assert LabelCaches.from_attr(attr) == caches


def test_a_trial_gets_the_caches_of_its_own_data_only():
    caches = LabelCaches((BUILD,))
    assert caches.for_data("/d/data.yaml") == BUILD.splits
    assert caches.for_data("/other/data.yaml") == () and caches.build_for("/other/data.yaml") is None


def test_no_attr_or_a_foreign_one_means_no_cache():
    assert LabelCaches.from_attr(None) == LabelCaches() and LabelCaches.from_attr("junk") == LabelCaches()
    assert LabelCaches().for_data("/d/data.yaml") == ()


def test_the_summary_says_built_or_found_and_failures():
    assert "built once for 120 images: 3.0 s" in LabelCaches((BUILD,)).summary()
    found = LabelCacheBuild("/d/data.yaml", (_split("train", 100, True), _split("val", 20, True)))
    assert "found valid once for 120 images" in LabelCaches((found,)).summary()
    failed = LabelCaches((), (("/d/data.yaml", "error: no"),)).summary()
    assert "not built (error: no): trials scan their labels" in failed


def test_label_caches_and_the_subset_cross_into_the_child():
    request = TrialRequest(
        data_yaml="/d/data.yaml", knobs=Knobs(), requested=Knobs(), device="cpu", images=2, images_total=100,
        train_subset=("/d/images/train/a.jpg", "/d/images/train/b.jpg"), label_caches=BUILD.splits,
    )
    job = LabelsJob("yolov5", None, "/d/data.yaml", 60.0, "/c")
    for one in (request, job):
        assert job_from_json(job_to_json(one)) == one


def test_the_labels_outcome_reads_back_as_a_build():
    ok = JobOutcome(Status.OK, "x", {"build": BUILD.to_dict()}, 1.0, "", (), 0.0, 1.0)
    assert ok.labels() == BUILD
    assert JobOutcome(Status.TIMEOUT, "x", {}, 1.0, "", (), 0.0, 1.0).labels() is None


def test_a_large_set_gets_a_longer_labels_timeout():
    assert labels_timeout_s(1_000_000) > labels_timeout_s(100) >= 600


def test_an_old_trial_record_has_no_label_scan():
    old = {"status": "ok", "config": Knobs().to_dict(), "images_per_s": 3.0}
    assert TrialResult.from_dict(old).label_scan_s is None
    new = TrialResult(Status.OK, "", Knobs(), Knobs(), "cpu", "ultralytics", label_scan_s=0.0)
    assert TrialResult.from_dict(new.to_dict()).label_scan_s == 0.0
