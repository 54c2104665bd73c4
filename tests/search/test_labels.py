"""A study lists its dataset once and builds the trainer's label caches once, before its first trial.

The fast tests run the real optimise loop in this process with the trial and the labels job faked
(no trainer): they count what the loop itself does. The slow one runs a real search.
"""

import optuna
import pytest

from speedopt import data as demo_data
from speedopt.data import _dataset
from speedopt.engines import LabelCacheBuild, SplitLabels
from speedopt.measure import LabelCaches, TrialResult
from speedopt.search import QuietView, SearchConfig, plan, run
from speedopt.search import _memory as memory_mod
from speedopt.search import _runner as runner_mod
from speedopt.status import Status
from speedopt.study import flat_attrs, schema
from tests.conftest import EVERY_CONFIG, run_cli

BASELINE = "model=yolov5n imgsz=128 batch=4 workers=0"


@pytest.fixture
def small(tmp_path):
    return demo_data.generate(tmp_path / "set", demo_data.DemoSpec(train=48, val=4, width=64, height=48))


def _config(data, tmp_path, trials=3):
    return SearchConfig(
        data=str(data), device="cpu", baseline=BASELINE, storage=f"sqlite:///{tmp_path}/s.db", study="s",
        quality="off", trials=trials, repeats=0, steps=3, warmup=1,
        warm=False,  # no warm worker: with the faked jobs below, no process starts at all
        ends=False,  # nor the ends' validation timing (a real job)
        ceiling_rank="off",  # nor a ranking's ceiling jobs: the trials alone are counted here
    )


@pytest.fixture
def fakes(monkeypatch):
    """The trial and the labels job, faked: what each was asked is recorded."""
    seen = {"requests": [], "builds": [], "datasets": [], "ceilings": []}

    def trial(request, progress=None, on_wait=None, owner="", dataset=None):
        if request.mode != "train":  # a ceiling job (the search measures the best config's): not a trial
            seen["ceilings"].append(request)
            return TrialResult(Status.OK, "fake", request.knobs, request.requested, request.device, request.engine,
                               images_per_s=1000.0, steps=3)
        seen["requests"].append(request)
        seen["datasets"].append(dataset)
        speed = 10.0 + len(seen["requests"])
        return TrialResult(Status.OK, "fake", request.knobs, request.requested, request.device, request.engine,
                           images_per_s=speed, steps=3, images_total=request.images_total, label_scan_s=0.0)

    def build(yamls, engine_spec, images, owner, progress=None, on_wait=None):
        seen["builds"].append(list(yamls))
        splits = (SplitLabels("train", "/x/labels/train.cache", 48, 0.1, False, "h1", "1.0.12"),
                  SplitLabels("val", "/x/labels/val.cache", 4, 0.1, False, "h2", "1.0.12"))
        return LabelCaches(tuple(LabelCacheBuild(y, splits) for y in yamls))

    monkeypatch.setattr(runner_mod, "run_trial", trial)
    monkeypatch.setattr(memory_mod, "predicted", lambda study, p, request, *a: (request, None))  # no memory fit
    monkeypatch.setattr(runner_mod, "build_label_caches", build, raising=False)
    return seen


def _count_listings(monkeypatch, data):
    """Count every listing of ``data``'s train split (speedopt.data.load walks it once per call)."""
    calls = []
    split_images = _dataset._split_images

    def counted(root, entry, split, yaml_path, *rest):
        if split == "train" and yaml_path == data.resolve():
            calls.append(yaml_path)
        return split_images(root, entry, split, yaml_path, *rest)

    monkeypatch.setattr(_dataset, "_split_images", counted)
    return calls


def test_the_dataset_is_listed_once_for_every_trial_of_a_study(small, tmp_path, monkeypatch, fakes):
    listings = _count_listings(monkeypatch, small)
    searched = plan(_config(small, tmp_path))
    assert len(listings) == 1  # the plan lists it
    run(searched)
    assert len(fakes["requests"]) == 3  # three trials were prepared and measured ...
    assert len(listings) == 1  # ... on the plan's one listing
    assert all(d is not None and d.yaml_path == small.resolve() for d in fakes["datasets"])
    subset = fakes["requests"][0]
    assert subset.images < subset.images_total and len(subset.train_subset) == subset.images  # the child lists nothing


def test_the_label_caches_are_built_once_per_study_and_reach_every_trial(small, tmp_path, monkeypatch, fakes):
    run(plan(_config(small, tmp_path, trials=2)))
    assert fakes["builds"] == [[str(small.resolve())]]
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/s.db")
    attr = study.user_attrs[schema.LABELS]
    assert set(attr["data"][str(small.resolve())]) == {"train", "val"} and attr["images"] == 52
    assert all(r.label_caches and r.label_caches[0].hash == "h1" for r in fakes["requests"])
    run(plan(_config(small, tmp_path, trials=3)))  # resumed with one more trial: the attr is there, nothing built
    assert len(fakes["builds"]) == 1 and len(fakes["requests"]) == 3
    assert fakes["requests"][-1].label_caches == fakes["requests"][0].label_caches


def test_a_failed_build_is_a_note_and_the_trials_scan(small, tmp_path, monkeypatch, fakes):
    monkeypatch.setattr(runner_mod, "build_label_caches", lambda yamls, *a, **k: LabelCaches((), ((yamls[0], "error: boom"),)))
    said = []

    class Listening(QuietView):
        def note(self, message):
            said.append(message)

    run(plan(_config(small, tmp_path, trials=2)), Listening())
    assert any("building the trainer's label cache once for 52 images" in m for m in said)
    assert any("not built (error: boom): trials scan their labels" in m for m in said)
    assert all(r.label_caches == () for r in fakes["requests"])


@pytest.mark.slow
def test_a_real_search_builds_the_label_cache_once_and_no_trial_scans(tmp_path):
    data = demo_data.generate(tmp_path / "set", demo_data.DemoSpec(train=24, val=4, width=96, height=72))
    url = f"sqlite:///{tmp_path}/s.db"
    args = ["search", "--data", str(data), "--trials", "2", "--storage", url, "--study", "s", "--baseline",
            "model=yolov5n imgsz=64 batch=2 workers=0", "--fix", "model=yolov5n",
            "--steps", "2", "--max-steps", "2", "--warmup", "1", "--device", "cpu", "--quality", "off",
            "--repeats", "0", "--no-report", *EVERY_CONFIG]  # both configs measured, whatever is faster
    space = tmp_path / "space.yaml"
    space.write_text("cache: [none, disk]\n")  # two configs: the baseline's and one more
    done = run_cli(*args, "--space", str(space), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "building the trainer's label cache once for 28 images" in done.stderr
    study = optuna.load_study(study_name="s", storage=url)
    attr = study.user_attrs[schema.LABELS]
    built = attr["data"][str(data.resolve())]
    assert (built["train"]["images"], built["val"]["images"]) == (24, 4) and not built["train"]["reused"]
    assert built["train"]["cache"] == str((data.parent / "labels" / "train.cache").resolve())
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(trials) == 2 and all(t.user_attrs["status"] == "ok" for t in trials)
    assert all(flat_attrs(t.user_attrs)["images_used"] < 24 for t in trials)  # subsets: without the cache, each would scan
    assert [flat_attrs(t.user_attrs)["label_scan_s"] for t in trials] == [0.0, 0.0]
    again = run_cli(*args, "--space", str(space), cwd=tmp_path, timeout=900)
    assert again.returncode == 0, again.stderr
    assert "building the trainer's label cache" not in again.stderr
    assert optuna.load_study(study_name="s", storage=url).user_attrs[schema.LABELS] == attr
