"""The public Python API: the same calls the CLI makes, returning typed records."""

import optuna
import pytest
from optuna.trial import TrialState, create_trial

import speedopt
from speedopt import command
from speedopt.search import SearchConfig, plan
from speedopt.status import Status
from speedopt.study import Finals, schema
from speedopt.study.record_types import Repeat


def test_search_takes_a_config_or_options_not_both(demo_yaml):
    with pytest.raises(TypeError):
        speedopt.search(SearchConfig(data=str(demo_yaml)), trials=3)
    with pytest.raises(speedopt.UsageError, match="data.yaml not found"):
        speedopt.search("missing/data.yaml")


def test_trial_rejects_a_ram_cache_that_cannot_fit_without_running(demo_yaml):
    notes = []
    result = speedopt.trial(
        str(demo_yaml), speedopt.Knobs(model="yolov5n", imgsz=128, batch=4, cache="ram"), device="cpu",
        ram_limit_gb=0.001, on_note=notes.append,
    )
    assert result.status is speedopt.Status.INFEASIBLE and "--ram-limit" in result.message
    assert not result.ok and any("AMP needs CUDA" in n for n in notes)


def test_best_reads_a_stored_study(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    proto = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", storage=url)).protocol
    study = optuna.create_study(study_name="api", storage=url, direction="maximize")
    schema.write_protocol(study, proto)
    with pytest.raises(speedopt.UsageError, match="no feasible trial"):
        speedopt.best("api", storage=url)
    fast = speedopt.Knobs(model="yolov5n", imgsz=96, batch=8, workers=1, amp=False)
    for ips, knobs, role in ((10.0, proto.baseline, "baseline"), (30.0, fast, None)):
        attrs = {"status": "ok", "message": "", "images_per_s": ips, "config": knobs.to_dict(), "feasible": True}
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=ips, user_attrs={**attrs, "role": role}))
    rec = speedopt.best(storage=url)
    assert rec.trial.number == 1 and rec.speedup is None and "no speedup claimed" in rec.verdict  # no finals
    rounds = [Repeat(r, t, Status.OK, ips) for r in range(2) for t, ips in ((0, 10.0), (1, 29.0 + 2 * r))]
    study.set_user_attr("finals", Finals((0, 1), 2, tuple(rounds)).to_attr())
    rec = speedopt.best(storage=url)
    assert rec.trial.number == 1 and rec.speedup.median == pytest.approx(3.0) and rec.speedup.low == pytest.approx(2.9)
    assert rec.images_per_s == pytest.approx(30.0) and not rec.keep_settings

    assert command.parse_yolo_train(rec.command(epochs=50)).knobs == fast
    assert rec.to_dict()["config"] == fast.to_dict() and "speedopt trial" in rec.measure_again()


@pytest.mark.slow
def test_a_search_through_the_api(demo_yaml, tmp_path, shared_warm):
    result = speedopt.search(
        str(demo_yaml), trials=2, storage=f"sqlite:///{tmp_path}/s.db", study="api", quality="off", device="cpu",
        baseline="model=yolov5n imgsz=128 batch=4 workers=0", steps=3, max_steps=3, warmup=1, stop_at_ceiling=0.0, prune_margin=0.0,
        repeats=0, ends=False,  # the API's surface: the finals, the ablation and the ends are the CLI tests'
    )
    assert isinstance(result, speedopt.SearchOutcome) and result.complete == 2
    assert result.baseline is not None and result.baseline.result.ok
    assert result.best is not None and result.best.ok_and_feasible
    written = speedopt.report("api", storage=f"sqlite:///{tmp_path}/s.db", out_dir=tmp_path / "r", measure_validation=False)
    assert written.markdown.is_file() and written.csv.read_text().startswith("number,")
