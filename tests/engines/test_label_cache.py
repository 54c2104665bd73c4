"""The trainer's label cache, built once and read by every trial, for both engines (real trainers, CPU).

A trial trains on a leading subset of the train set. After the labels job its subset's labels come
from the full split's cache (no scan) and that file is left byte for byte as it was; without a built
cache the trial scans its subset, still without touching the full cache a user already has. The
cache is the one the user's own trainer run (here: the trainer's dataset code on the user's
data.yaml, in a fresh process) finds valid.
"""

import dataclasses
import importlib.util
import os
import subprocess
import sys

import pytest

from speedopt import data as demo_data
from speedopt import engines, measure
from speedopt.knobs import Knobs
from speedopt.measure._jobs import LabelsJob
from speedopt.offline import cache_dir
from speedopt.status import Status

# The trainer's own dataset code on the user's data.yaml, as their real run builds its datasets; prints
# how many label scans it made (0: it found the caches valid).
USERS_RUN = {
    "ultralytics": """
import sys
from pathlib import Path
from speedopt.engines.ultralytics import UltralyticsEngine
UltralyticsEngine().prepare(Path(sys.argv[2]))
from ultralytics.cfg import get_cfg
from ultralytics.data import build_yolo_dataset
from ultralytics.data.dataset import YOLODataset
from ultralytics.data.utils import check_det_dataset
scans = []
scan = YOLODataset.cache_labels
YOLODataset.cache_labels = lambda self, path: scans.append(path) or scan(self, path)
data = check_det_dataset(sys.argv[1])
for split in ("train", "val"):
    build_yolo_dataset(get_cfg(), data[split], 16, data, mode=split)
print("scans", len(scans))
""",
    "yolov5": """
import sys
from pathlib import Path
from speedopt.engines.yolov5 import Yolov5Engine
Yolov5Engine().prepare(Path(sys.argv[2]))
from yolov5.utils.dataloaders import LoadImagesAndLabels
from yolov5.utils.general import check_dataset
scans = []
scan = LoadImagesAndLabels.cache_labels
LoadImagesAndLabels.cache_labels = lambda self, path, prefix="": scans.append(path) or scan(self, path, prefix)
data = check_dataset(sys.argv[1])
for split in ("train", "val"):
    LoadImagesAndLabels(data[split], 640, 16, augment=split == "train", rect=split == "val", prefix=split)
print("scans", len(scans))
""",
}


def _installed(engine):
    if engine == "yolov5" and importlib.util.find_spec("yolov5") is None:
        pytest.skip("the classic YOLOv5 code is not installed: pip install -e '.[yolov5]'")


def _users_run_scans(engine, data, tmp_path):
    env = {**os.environ, **engines.get(engine).environment(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", USERS_RUN[engine], str(data), str(tmp_path / "cache")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split("scans")[-1])


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ultralytics", "yolov5"])
def test_subset_trials_read_the_built_label_cache_and_never_rewrite_it(engine, tmp_path, request):
    _installed(engine)
    request.getfixturevalue(f"warm_{engine}")  # the jobs fork from a warm worker, as a search's do
    data = demo_data.generate(tmp_path / "set", demo_data.DemoSpec(train=16, val=4, width=160, height=120))
    labels = data.parent / "labels"
    job = LabelsJob(engine, None, str(data), 300.0, str(cache_dir()))
    built = measure.run_job(job, "test")
    assert built.status is Status.OK, (built.message, built.log_tail)
    build = built.labels()
    assert [(s.split, s.images, s.reused) for s in build.splits] == [("train", 16, False), ("val", 4, False)]
    assert [s.cache for s in build.splits] == [str((labels / "train.cache").resolve()), str((labels / "val.cache").resolve())]
    caches = {p: p.read_bytes() for p in (labels / "train.cache", labels / "val.cache")}
    assert _users_run_scans(engine, data, tmp_path) == 0  # the user's own run finds the caches valid

    knobs = Knobs(model="yolov5n", imgsz=64, batch=2, workers=0)
    options = measure.TrialOptions(device="cpu", engine=engine, steps=2, warmup=1, max_steps=2)
    subset = measure.make_request(str(data), knobs, options, label_caches=build.splits)
    assert subset.images < subset.images_total == 16  # a subset: its own label hash matches no cache
    result = measure.run_trial(subset)
    assert result.status is Status.OK, result.message + result.log_tail
    assert result.label_scan_s == 0.0
    assert {p: p.read_bytes() for p in caches} == caches

    scanned = measure.run_trial(measure.make_request(str(data), knobs, options))  # no built cache handed over: it scans
    assert scanned.status is Status.OK, scanned.message + scanned.log_tail
    assert scanned.label_scan_s > 0
    assert {p: p.read_bytes() for p in caches} == caches  # ... its subset's cache elsewhere, never over the user's
    assert sorted(p.name for p in labels.glob("*.cache")) == ["train.cache", "val.cache"]

    stale = tuple(dataclasses.replace(s, hash="not-the-file's") for s in build.splits)  # the file changed since the build
    distrusted = measure.run_trial(measure.make_request(str(data), knobs, options, label_caches=stale))
    assert distrusted.status is Status.OK, distrusted.message + distrusted.log_tail
    assert distrusted.label_scan_s > 0 and {p: p.read_bytes() for p in caches} == caches

    again = measure.run_job(job, "test").labels()  # a second build finds them valid
    assert again is not None and all(s.reused for s in again.splits)
    assert [s.hash for s in again.splits] == [s.hash for s in build.splits]
