"""Ceilings that steer: the space bounded by its ceilings, the highest bounds measured first, hopeless configs skipped."""

from __future__ import annotations

import optuna
import pytest

from speedopt.knobs import Knobs
from speedopt.measure import Ceiling
from speedopt.measure._ceilings import key_of
from speedopt.search import _rank as rank
from speedopt.search._ceiling_stop import space_reached
from speedopt.search._skip import hopeless
from speedopt.status import Status
from speedopt.study import Space, records, schema
from speedopt.study.record_types import Domain, Ranking
from tests.conftest import run_cli


def _space(**sampled: tuple[object, ...]) -> Space:
    domains = {"model": Domain(choices=("yolov5n",)), "imgsz": Domain(choices=(96,)), "batch": Domain(choices=(4,)),
               "workers": Domain(choices=(0,)), "cache": Domain(choices=("none",)), "amp": Domain(choices=(False,)),
               "freeze": Domain(choices=(0,)), "gpus": Domain(choices=(1,))}
    domains.update({k: Domain(choices=v) for k, v in sampled.items()})
    return Space(domains)


def _known(data: dict[tuple[int, str], float], compute: dict[str, float], grid: list[Knobs]) -> dict[str, Ceiling]:
    """Ceilings by ``kind|key`` for the grid: data by (workers, cache), compute by model."""
    return _ceilings(grid, lambda k: data[(k.workers, k.cache)], lambda k: compute[k.model])


def _ceilings(grid, data, compute) -> dict[str, Ceiling]:
    """Ceilings by ``kind|key`` for the grid, their images/s from ``data(knobs)`` and ``compute(knobs)``."""
    known = {}
    for k in grid:
        for kind, speed in (("data", data(k)), ("compute", compute(k))):
            key = key_of(kind, k)
            known[f"{kind}|{key}"] = Ceiling(kind, key, Status.OK, "", speed, 0.02, 10, 3.0)
    return known


def test_the_space_is_enumerated_and_needs_one_job_per_ceiling_key():
    grid = rank.configs(_space(workers=(0, 1, 2), cache=("none", "ram"), model=("yolov5n", "yolov5s")))
    assert grid is not None and len(grid) == 12 and len(set(grid)) == 12
    jobs = rank.representatives(grid)
    assert sorted(name.split("|")[0] for name in jobs).count("data") == 6  # workers x cache
    assert sorted(name.split("|")[0] for name in jobs).count("compute") == 2  # model
    assert rank.configs(_space(workers=tuple(range(17)), batch=tuple(range(1, 17)), imgsz=tuple(range(32, 672, 32)))) is None


def test_auto_ranks_only_a_space_larger_than_the_budget():
    assert rank.skip_mode("auto", 48, 20) is None
    assert "fit the budget of 20 trials" in (rank.skip_mode("auto", 12, 20) or "")
    assert rank.skip_mode("on", 12, 20) is None  # forced
    assert "off" in (rank.skip_mode("off", 48, 20) or "")
    assert "nothing to rank" in (rank.skip_mode("on", 2, 20) or "")


def test_bounds_rank_the_grid_and_the_baseline_is_not_enqueued_again():
    grid = rank.configs(_space(workers=(0, 2), cache=("none", "ram"), model=("yolov5n", "yolov5s")))
    assert grid is not None
    data = {(0, "none"): 20.0, (0, "ram"): 40.0, (2, "none"): 30.0, (2, "ram"): 60.0}
    known = _known(data, {"yolov5n": 50.0, "yolov5s": 10.0}, grid)
    # workers=0: loading and computing take turns, 1 / (1/40 + 1/50) = 22.2; workers=2: min(60, 50) = 50
    assert rank.bound_of(Knobs(model="yolov5n", imgsz=96, batch=4, workers=0, cache="ram", amp=False), known) == pytest.approx(22.22, abs=0.01)
    best = Knobs(model="yolov5n", imgsz=96, batch=4, workers=2, cache="ram", amp=False)
    ranking = rank.rank(grid, known, 2, skip=[best])
    assert ranking.space_bound == pytest.approx(50.0)  # the skipped config still bounds the space
    assert [b for _, b in ranking.enqueued] == [pytest.approx(30.0), pytest.approx(22.22, abs=0.01)]
    assert ranking.enqueued[0][0].cache == "none" and ranking.enqueued[0][0].workers == 2
    assert Ranking.from_dict(ranking.to_dict()) == ranking
    # yolov5s's compute ceilings unknown: yolov5n's bound them (less work per image), the space keeps its bound
    assert rank.rank(grid, {k: v for k, v in known.items() if "yolov5s" not in k}, 3).space_bound == pytest.approx(50.0)
    # yolov5n's unknown and a data ceiling too: that config has nothing to bound it, nor has the space
    partial = {k: v for k, v in known.items() if "yolov5n" not in k and "workers=2 cache=ram" not in k}
    assert rank.rank(grid, partial, 3).space_bound is None


def test_less_work_per_image_bounds_the_compute_ceiling_of_more():
    n64, s96 = Knobs(model="yolov5n", imgsz=64), Knobs(model="yolov5s", imgsz=96)
    assert rank.less_work(n64, s96) and not rank.less_work(s96, n64)
    assert rank.less_work(Knobs(model="yolov5n", imgsz=96, freeze=10), Knobs(model="yolov5n", imgsz=96, freeze=0))
    assert not rank.less_work(Knobs(model="yolov5n", imgsz=128), Knobs(model="yolov5s", imgsz=96))  # no order: imgsz larger
    assert not rank.less_work(n64, Knobs(model="yolov5s", imgsz=96, batch=8))  # another batch: not comparable
    assert not rank.less_work(n64, Knobs(model="yolov5s", imgsz=96, amp=False))  # nor another precision
    assert not rank.less_work(Knobs(model="own.yaml", imgsz=64), s96)  # a model file has no scale


def test_branch_and_bound_measures_only_the_ceilings_that_can_change_the_top():
    """A known truth answers each job: the search measures 5 of the 8 ceiling jobs and still finds the top bound."""
    grid = rank.configs(_space(model=("yolov5n", "yolov5s"), imgsz=(64, 96), cache=("none", "ram")))
    assert grid is not None and len(grid) == 8
    compute = {("yolov5n", 64): 100.0, ("yolov5n", 96): 60.0, ("yolov5s", 64): 40.0, ("yolov5s", 96): 25.0}
    data = {"none": 30.0, "ram": 500.0}
    known: dict[str, Ceiling] = {}
    jobs = []
    while (job := rank.next_job(grid, known)) is not None:
        kind, knobs = job
        key = key_of(kind, knobs)
        assert f"{kind}|{key}" not in known  # never the same job twice
        speed = compute[(knobs.model, knobs.imgsz)] if kind == "compute" else data[knobs.cache]
        known[f"{kind}|{key}"] = Ceiling(kind, key, Status.OK, "", speed, 0.02, 10, 3.0)
        jobs.append((kind, knobs.model, knobs.imgsz, knobs.cache if kind == "data" else ""))
    assert jobs[0] == ("compute", "yolov5n", 64, "")  # least work first: it bounds every other compute ceiling
    assert len(jobs) < len(rank.representatives(grid)) == 8
    truth = {k: rank.bound_of(k, {**known, **_every(grid, compute, data)}) for k in grid}
    top = max(truth, key=lambda k: truth[k] or 0.0)
    ranking = rank.rank(grid, known, 1)
    assert ranking.enqueued[0][0] == top and ranking.space_bound == pytest.approx(truth[top])
    assert ranking.jobs == len(jobs) and "of the 8 ceiling jobs" in ranking.message


def _every(grid: list[Knobs], compute: dict[tuple[str, int], float], data: dict[str, float]) -> dict[str, Ceiling]:
    return _ceilings(grid, lambda k: data[k.cache], lambda k: compute[(k.model, k.imgsz)])


def test_a_config_whose_bound_cannot_reach_the_best_is_hopeless():
    grid = rank.configs(_space(model=("yolov5n", "yolov5s")))
    assert grid is not None
    known = _known({(0, "none"): 1000.0}, {"yolov5n": 50.0, "yolov5s": 10.0}, grid)
    small, large = grid
    assert "bound it at 9.9 images/s" in (hopeless(large, known, 40.0, 0.5) or "")
    assert hopeless(small, known, 40.0, 0.5) is None
    assert hopeless(large, known, 40.0, 0.0) is None  # --prune-margin 0: never
    assert hopeless(large, {}, 40.0, 0.5) is None  # no ceilings known: measure it


def test_the_space_bound_stops_a_search():
    ranking = Ranking(8, 6, True, "ranked", (), 50.0)
    assert "96% of the highest bound" in (space_reached(48.0, ranking, 0.95) or "")
    assert space_reached(47.0, ranking, 0.95) is None
    assert space_reached(49.0, ranking, 0.0) is None
    assert space_reached(49.0, Ranking(8, 6, False, "skipped"), 0.95) is None
    assert space_reached(58.0, ranking, 0.95, ci_rel=0.05) is None  # the best beat the highest bound: it does not hold
    assert space_reached(51.0, ranking, 0.95, ci_rel=0.05) is not None


@pytest.mark.slow
def test_search_ranks_the_space_by_its_ceilings_and_stops_at_the_space_bound(demo_yaml, tmp_path):
    """--ceiling-rank on forces the ranking on a 3-config space (auto would skip: 4 ceiling jobs for 3 configs; the
    trainer runs workers=0 on a CPU, so cache is the one knob);
    --stop-at-ceiling 1% forces the stop rule after the baseline, whatever this machine measures: it stops, or,
    where the baseline beat the highest bound beyond its interval, says so and measures on."""
    url = f"sqlite:///{tmp_path}/r.db"
    (tmp_path / "space.yaml").write_text("cache: [none, ram, disk]\n")
    done = run_cli(
        "search", "--data", str(demo_yaml), "--trials", "4", "--storage", url, "--study", "rank", "--quality", "off",
        "--baseline", "model=yolov5n imgsz=64 batch=4 workers=0 cache=none", "--space", str(tmp_path / "space.yaml"),
        "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu", "--ceiling-rank", "on", "--stop-at-ceiling", "1%", "--repeats", "0",
        "--no-ablation", cwd=tmp_path, timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    study = optuna.load_study(study_name="rank", storage=url)
    ranking = schema.read_ranking(study)
    assert ranking is not None and ranking.ran and ranking.configs == 3 and ranking.jobs == 4, ranking
    found = schema.read_ceilings(study)
    kinds = sorted(n.split("|")[0] for n in found if not n.startswith("data-no-mosaic|"))
    assert kinds == ["compute"] + ["data"] * 3 and all(c.ok for c in found.values())
    # and the ends' mosaic-off loader of the baseline and the pick (one or two, as they share a loader or not)
    off = [n.split("|", 1)[1] for n in found if n.startswith("data-no-mosaic|")]
    assert 1 <= len(off) <= 2 and all(f"data|{key}" in found for key in off)
    grid = rank.configs(study_space(study))
    assert grid is not None
    others = sorted((rank.bound_of(k, found) or 0.0 for k in grid if k.cache != "none"), reverse=True)
    assert len(ranking.enqueued) == 1 and ranking.enqueued[0][1] == pytest.approx(others[0])
    queued = [t for t in study.trials if t.user_attrs.get("role") == "ceiling-rank"]
    report = (tmp_path / "reports" / "rank.md").read_text()
    assert len(queued) == 1 and queued[0].number == 1 and "Ceiling ranking: ranked 3 configs" in report
    if "measurement fault" in done.stderr:  # the baseline beat the space's highest bound beyond its interval: no stop there
        # not on the space bound it beat (the baseline's own ceilings, where they hold, may still stop it)
        assert "highest bound of any" not in study.user_attrs.get("stopped", ""), study.user_attrs.get("stopped")
        return
    assert queued[0].state.name == "WAITING"
    assert [t.number for t in study.trials if t.state.name == "COMPLETE"] == [0]
    # which rule stopped it follows from what was measured: the baseline's own bound within the noise of the space's
    # (its interval, at least 1%) stops on the space's bound; else its own ceilings (compute binds; cache moves only data)
    base = records(study)[0]
    own = rank.bound_of(base.config, found)
    assert own is not None and ranking.space_bound is not None
    if own >= (1 - max(base.result.ci_rel or 0.0, 0.01)) * ranking.space_bound:
        assert "highest bound of any of the space's 3 configs" in study.user_attrs["stopped"]
    else:
        assert "of min(ceilings)" in study.user_attrs["stopped"], study.user_attrs["stopped"]
    assert "The search stopped early" in report


def study_space(study: optuna.Study) -> Space:
    return Space.from_dict(study.user_attrs["space"])


def test_once_a_trial_beats_its_ceilings_no_ceiling_skips_or_stops():
    """Issue 30: a rule acts only on ceilings that hold; one trial above min(its ceilings) beyond both
    intervals voids them all (:func:`speedopt.search._skip.beaten`)."""
    from optuna.trial import TrialState, create_trial

    from speedopt.measure import TrialResult
    from speedopt.search._skip import beaten

    grid = rank.configs(_space(model=("yolov5n", "yolov5s")))
    assert grid is not None
    small, large = grid
    study = optuna.create_study(direction="maximize")
    for name, ceiling in _known({(0, "none"): 1000.0}, {"yolov5n": 50.0, "yolov5s": 10.0}, grid).items():
        schema.write_ceiling(study, name, ceiling)

    def add(rate: float, ci: float) -> None:
        result = TrialResult(Status.OK, "", small, small, "cpu", "ultralytics", images_per_s=rate, ci_rel=ci)
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=rate, user_attrs={**result.to_dict(), "feasible": True}))

    add(52.0, 0.05)  # above the compute ceiling 50, but within the intervals: the ceilings may hold
    assert beaten(study) is None
    assert hopeless(large, schema.read_ceilings(study), 52.0, 0.5) is not None  # so the skip may act
    add(60.0, 0.03)  # 60 x 0.97 = 58.2 > 50 x 1.02 = 51: beaten
    why = beaten(study)
    assert why is not None and why.startswith("trial 1: measurement fault") and "60.0 images/s" in why
    from types import SimpleNamespace

    from speedopt.search._skip import Skips

    skips = Skips(SimpleNamespace(protocol=SimpleNamespace(prune_margin=0.5)))  # type: ignore[arg-type]
    assert skips.why(study.ask(), large, large) is None  # bound 9.9 < half the best, yet measured: the bounds fail


def test_the_best_configs_own_bound_is_held_against_the_highest_bound_within_the_noise():
    """Bound against bound (issue 47): the serial bound of a config with no loader workers runs 1-17% under its own
    speed in the replay's tables, so a measured speed against the highest bound stopped a search 6% short of the best."""
    ranking = Ranking(18, 21, True, "ranked", (), 30.5)
    assert space_reached(30.2, ranking, 0.95, ci_rel=0.03, own_bound=29.5) is None  # 97% of the highest bound: go on
    why = space_reached(31.0, ranking, 0.95, ci_rel=0.03, own_bound=30.4) or ""
    assert "its bound 30.4 images/s is 100% of the highest bound" in why
    assert space_reached(30.0, ranking, 0.95, ci_rel=None, own_bound=30.3) is not None  # within the 1% floor
    assert space_reached(30.0, ranking, 0.95, ci_rel=None, own_bound=30.1) is None
