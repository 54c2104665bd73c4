"""A study's ceilings: --stop-at-ceiling stops the search, the ends' ceilings reach the report."""

from __future__ import annotations

import optuna
import pytest

from speedopt.measure import Ceiling, Ceilings
from speedopt.search._ceiling_stop import reached
from speedopt.status import Status
from speedopt.study import schema
from tests.conftest import run_cli


def _ok(kind: str, speed: float) -> Ceiling:
    return Ceiling(kind, "k", Status.OK, "", speed, 0.02, 10, 5.0)


def test_reached_needs_the_share_both_ceilings_and_no_knob_that_moves_the_binding_one():
    found = Ceilings(_ok("data", 100.0), _ok("compute", 50.0))
    assert "the compute ceiling binds" in reached(47.6, found, 0.95, ["cache", "workers"])
    assert reached(47.6, found, 0.95, ["cache", "imgsz"]) is None  # another imgsz may raise the compute ceiling
    assert reached(47.0, found, 0.95, []) is None
    assert reached(49.0, found, 0.0, []) is None  # 0: never stop
    assert reached(49.0, Ceilings(_ok("data", 100.0), None), 0.95, []) is None
    data_bound = Ceilings(_ok("data", 40.0), _ok("compute", 50.0))
    assert reached(39.0, data_bound, 0.95, ["model", "amp"]) is not None
    assert reached(39.0, data_bound, 0.95, ["workers"]) is None


def test_a_trial_above_its_ceiling_is_a_fault_not_a_stop():
    found = Ceilings(_ok("data", 100.0), _ok("compute", 50.0))
    assert reached(58.0, found, 0.95, [], ci_rel=0.03) is None  # 116%: the ceiling does not hold
    assert reached(51.0, found, 0.95, [], ci_rel=0.03) is not None  # 102%, within the intervals: at the ceiling


@pytest.mark.slow
def test_search_stops_at_the_ceiling_and_reports_the_ends(demo_yaml, tmp_path):
    """--stop-at-ceiling 1% forces the stop rule at the first best trial (the baseline), whatever this machine measures:
    it stops, or, where the trial beat its own ceilings beyond both intervals, says so and searches on."""
    url = f"sqlite:///{tmp_path}/c.db"
    done = run_cli(
        "search", "--data", str(demo_yaml), "--trials", "4", "--storage", url, "--study", "ceil", "--quality", "off",
        "--baseline", "model=yolov5n imgsz=96 batch=4 workers=0", "--fix", "cache=none", "--steps", "4", "--max-steps", "4", "--warmup", "1",
        "--device", "cpu", "--stop-at-ceiling", "1%", "--repeats", "0", cwd=tmp_path, timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    study = optuna.load_study(study_name="ceil", storage=url)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    if "measurement fault" in done.stderr:  # the trial beat its ceilings beyond both intervals (noise here can): no stop
        assert "search stopped early" not in done.stdout, done.stdout
        assert "of its compute ceiling" in done.stderr or "of its data ceiling" in done.stderr
    else:
        assert "search stopped early" in done.stdout and "of min(ceilings)" in done.stdout, done.stdout
        assert len(complete) == 1
    found = schema.read_ceilings(study)
    # the ends also measure the recommendation's loader with mosaic off (Ultralytics' last close_mosaic epochs)
    assert sorted(name.split("|")[0] for name in found) == ["compute", "data", "data-no-mosaic"]
    assert all(c.ok and c.images_per_s > 0 for c in found.values())
    ends = schema.read_ceilings_for(study)
    assert ends["baseline"] == 0 and ends["recommended"] in {t.number for t in complete}
    # The search timed the validation the report projects (after a stop the baseline is the recommendation),
    # forked from its warm worker, before the report was written: the report found it stored.
    timings = [v for k, v in study.user_attrs.items() if k.startswith(schema.VAL_TIME)]
    assert timings and all(t["status"] == "ok" and t["val_s"] > 0 for t in timings)
    assert done.stderr.index("timing one validation pass") < done.stderr.index("report: writing")
    ranking = schema.read_ranking(study)  # one config (the trainer runs workers=0 on a CPU): nothing to rank
    assert ranking is not None and not ranking.ran and "nothing to rank" in ranking.message
    report = (tmp_path / "reports" / "ceil.md").read_text()
    section = report[report.index("## Ceilings"):]
    assert "| baseline (trial 0) |" in section and "compute ceiling" in section
    assert "The search stopped early" in section
    (row,) = [line for line in report.splitlines() if line.startswith("| validation per epoch |")]
    assert "| - |" not in row, row  # the stored timing reached the projection


def test_the_stop_rule_measures_ceilings_only_while_the_trials_left_outnumber_the_jobs():
    """Issue 30: two ceiling jobs to maybe save one trial cost more than they can save."""
    from types import SimpleNamespace

    from optuna.trial import TrialState, create_trial

    from speedopt.knobs import Knobs
    from speedopt.measure import TrialResult
    from speedopt.search._ceiling_stop import CeilingStop
    from speedopt.study import Space
    from speedopt.study.record_types import Domain

    knobs = Knobs(model="yolov5n", imgsz=96, batch=4, workers=0, amp=False)
    study = optuna.create_study(direction="maximize")
    result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=30.0, ci_rel=0.02)
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=30.0, user_attrs={**result.to_dict(), "feasible": True}))
    asked = []
    space = Space({"cache": Domain(choices=("none", "ram"))})  # data knobs only: the compute ceiling may bind
    for trials, measured in ((2, False), (3, False), (4, True)):
        plan = SimpleNamespace(protocol=SimpleNamespace(stop_at_ceiling=0.95, space=space, trials=trials))
        rule = CeilingStop(plan, SimpleNamespace(note=lambda line: None), lambda k: asked.append(k))  # type: ignore[arg-type]
        rule.why(study, study.get_trials()[0])
        assert bool(asked) is measured, trials  # 1 trial spent: 1, 2 or 3 left against 2 missing ceiling jobs


def test_the_ends_measure_again_a_ceiling_the_config_beat():
    """Issue 56, item 5: a ceiling is one short job at one moment; a figure above it beyond both intervals (the README
    demo under load: 105% of min(ceilings)) means the load moved between the jobs, so the ends measure that ceiling
    again beside the finals. Only the binding one, and only on a fault."""
    from speedopt.search._ends import beaten

    found = Ceilings(_ok("data", 100.0), _ok("compute", 50.0))
    assert beaten(found, 58.0, 0.03) == ("compute",)  # 116%: beyond 3% + 2% + the 10% drift
    assert beaten(found, 51.0, 0.03) == ()  # within the intervals: it holds
    assert beaten(Ceilings(_ok("data", 40.0), _ok("compute", 50.0)), 47.0, 0.02) == ("data",)
    assert beaten(Ceilings(_ok("data", 40.0), None), 90.0, 0.02) == () and beaten(None, 90.0, 0.02) == ()
