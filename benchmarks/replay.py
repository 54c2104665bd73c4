"""Replay: search strategies compared against measured grids in seconds, not hours (issue 30).

Measure once (``--measure NAME``): every config of a named space, ``--repeats`` times each, in interleaved
passes (every config once, then again), each job forked from a warm worker as a search's are. The table
(``benchmarks/replay/NAME.json``) keeps, per config, each repeat's images/s, the job's wall time as the caller
waits for it (``wall_s``) and the part of it the measured steps took (``measured_s``; the rest is the job's
fixed cost: request, fork, set-up, warm-up, result).

Replay (``--replay``): for each table and each of ``--seeds`` seeds, the search's own code runs with the
table in place of the trainer: Optuna's TPE sampler seeded as a search seeds it, the baseline first, the
skip of measured configs, ``--trials`` trials, then the finals (``speedopt.search._finals``: the sequential
rounds) and the ablation (``speedopt.search._ablation``: its reuse). Each config the search measures answers
with one of its repeats drawn at random and costs that repeat's wall time. Not replayed: the pruner (the
table holds no per-step rates), the ceilings and their rules (no ceiling jobs in the table), quality
probes (every config counts as accurate enough, as in ``search_efficiency.py``), memory fits.

Printed per table: the share of seeds whose pick (the finals' recommendation, or the baseline) has a mean
images/s within 5% of the best config's mean; the median of the search's cost over the grid's (the grid:
each config measured once, at its mean wall time); and the median cost by stage. ``--before`` replays the
search as it was before issue 30 (every finals round for every finalist, the ablation measuring its whole
path again), so one run prints both. Goals (issue 30): a pick within 5% in at least 90% of seeds, at a
median cost of at most 35% of the grid's.

    python benchmarks/replay.py --measure data [--repeats 3]     # 18 configs: about 30 min on 2 CPU cores
    python benchmarks/replay.py --measure compute [--repeats 3]  # 24 configs: about 20 min
    python benchmarks/replay.py --replay [--seeds 50] [--trials 6] [--before]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna

import speedopt
from speedopt import data, engines
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult, warm_worker
from speedopt.offline import cache_dir
from speedopt.search import _ablation as ablation_mod
from speedopt.search import _finals as finals_mod
from speedopt.search import _sequential as sequential
from speedopt.search._objective import suggest
from speedopt.search._open import sampler
from speedopt.search._stop import DUPLICATE_LIMIT, QUEUE_AFTER, duplicate_of, enqueue_unmeasured, unmeasured
from speedopt.status import Status
from speedopt.study import Domain, Space, outcome, records, schema

TABLES = Path(__file__).parent / "replay"
#: The named spaces: what varies, the fixed knobs, the baseline's values, and the images they train on.
SPACES: dict[str, dict[str, Any]] = {
    "data": {  # 1920x1080 camera JPEGs (the README's demo): decode-bound, the data levers matter
        "vary": {"cache": ["none", "ram", "disk"], "data": ["original", "resized"], "batch": [4, 8, 16]},
        "fixed": {"model": "yolov5n", "imgsz": 160, "workers": 0, "amp": False, "freeze": 0},
        "baseline": {"cache": "none", "data": "original", "batch": 8},
        "images": {"train": 96, "val": 16, "width": 1920, "height": 1080, "quality": 95},
    },
    "compute": {  # small images: the model's step binds, model/imgsz/batch matter
        "vary": {"model": ["yolov5n", "yolov5s"], "imgsz": [64, 96, 128, 160], "batch": [2, 4, 8]},
        "fixed": {"workers": 0, "cache": "ram", "amp": False, "freeze": 0, "data": "original"},
        "baseline": {"model": "yolov5s", "imgsz": 160, "batch": 8},
        "images": {"train": 128, "val": 16, "width": 320, "height": 240, "quality": 90},
    },
}
WITHIN = 0.05  # a pick within 5% of the best config's mean images/s is a good pick
before = [False]  # replaying the search as it was before issue 30 (before_issue_30)


def before_sampler(seed: int) -> optuna.samplers.BaseSampler:
    """The search's sampler before issue 30: Optuna's default 10 random trials first."""
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def _key(values: dict[str, Any], vary: dict[str, list[Any]]) -> str:
    return " ".join(f"{k}={values[k]}" for k in vary)


def measure(name: str, repeats: int, steps: int, warmup: int) -> Path:
    """Measure every config of space ``name`` ``repeats`` times (interleaved passes) and write its table."""
    space = SPACES[name]
    vary, fixed = space["vary"], space["fixed"]
    configs = [dict(zip(vary, values)) for values in itertools.product(*vary.values())]
    rows: dict[str, list[dict[str, float]]] = {_key(c, vary): [] for c in configs}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = data.generate(Path(tmp) / "images", data.DemoSpec(**space["images"]))
        ds = data.load(yaml_path)
        copy = None
        if "data" in vary:
            copy = data.prepare(ds, data.PrepareSpec(imgsz=fixed["imgsz"], format="png"), Path(tmp) / "copy", jobs=2).copy.yaml_path
        env = engines.get("ultralytics").environment(cache_dir())
        with warm_worker("ultralytics", None, env):
            for rnd in range(repeats):
                for i, c in enumerate(configs):
                    knobs = Knobs(**{**fixed, **c, "data": "original"})
                    where = copy if c.get("data") == "resized" else yaml_path
                    t0 = time.monotonic()
                    result = speedopt.trial(str(where), knobs, device="cpu", steps=steps, warmup=warmup)
                    job_s = time.monotonic() - t0  # the whole job as the caller waits for it: what a search pays
                    if not result.ok or not result.images_per_s:
                        raise SystemExit(f"{_key(c, vary)} ended {result.status.value}: {result.message}")
                    rows[_key(c, vary)].append({
                        "images_per_s": round(result.images_per_s, 3), "wall_s": round(job_s, 2),
                        "measured_s": round(result.measured_s or 0.0, 2), "ci_rel": round(result.ci_rel or 0.0, 4),
                    })
                    print(f"pass {rnd + 1}/{repeats} config {i + 1}/{len(configs)}: {_key(c, vary)}: "
                          f"{result.images_per_s:.1f} images/s, {job_s:.1f} s ({result.measured_s or 0:.1f} s measured)", flush=True)
    TABLES.mkdir(exist_ok=True)
    out = TABLES / f"{name}.json"
    table = {"space": name, "vary": vary, "fixed": fixed, "baseline": space["baseline"], "steps": steps, "warmup": warmup,
             "measured": time.strftime("%Y-%m-%d"), "wall_s": round(time.monotonic() - started, 1), "configs": rows}
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {out} ({len(configs)} configs x {repeats} repeats, {time.monotonic() - started:.0f} s)")
    return out


class Replayed:
    """The table in place of the trainer: a config answers with one of its repeats, and its wall time is billed."""

    def __init__(self, table: dict[str, Any], rng: random.Random) -> None:
        self.table, self.rng, self.vary = table, rng, table["vary"]
        self.cost: dict[str, float] = {}
        self.stage = "trials"

    def __call__(self, knobs: Knobs) -> TrialResult:
        repeats = self.table["configs"].get(_key(knobs.to_dict(), self.vary))
        if not repeats:
            return TrialResult(Status.INFEASIBLE, "not in the table", knobs, knobs, "cpu", "ultralytics")
        row = self.rng.choice(repeats)
        self.cost[self.stage] = self.cost.get(self.stage, 0.0) + row["wall_s"]
        return TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=row["images_per_s"],
                           ci_rel=row["ci_rel"], steps=10, wall_s=row["wall_s"], measured_s=row["measured_s"])


def _objective(space: Space, baseline: Knobs, answer: Replayed, used_up: list[bool], seed: int) -> Callable[[optuna.Trial], float]:
    in_a_row = [0]

    def run(trial: optuna.Trial) -> float:
        knobs = baseline if trial.user_attrs.get(schema.ROLE) == "baseline" else suggest(trial, space)
        asked = TrialResult(Status.ERROR, "", knobs, knobs, "cpu", "ultralytics")
        if duplicate_of(trial.study, knobs, asked) is not None:  # the search's skip: measured before, no cost
            in_a_row[0] += 1
            used = False
            if not before[0] and in_a_row[0] >= QUEUE_AFTER:  # the search's Skips.check
                used = not enqueue_unmeasured(trial.study, space, seed * 100_003 + trial.number) and unmeasured(trial.study, space) == []
            if in_a_row[0] >= DUPLICATE_LIMIT or used:
                used_up[0] = True
                trial.study.stop()
            raise optuna.TrialPruned("measured before")
        in_a_row[0] = 0
        result = answer(knobs)
        schema.write_measurement(trial, result.to_dict())
        trial.set_user_attr("feasible", True)
        return float(result.images_per_s or 0.0)

    return run


def replay_once(table: dict[str, Any], seed: int, trials: int, finalists: int, repeats: int, min_gain: float) -> tuple[str, dict[str, float]]:
    """One search against the table: its pick (the config's key) and its cost by stage."""
    vary = table["vary"]
    space = Space({**{k: Domain(choices=tuple(v)) for k, v in vary.items()}, **{k: Domain(choices=(v,)) for k, v in table["fixed"].items()}})
    baseline = Knobs(**{**table["fixed"], **table["baseline"]})
    answer = Replayed(table, random.Random(seed))
    study = optuna.create_study(direction="maximize", sampler=before_sampler(seed) if before[0] else sampler(trials, seed))
    study.enqueue_trial(dict(table["baseline"]), user_attrs={schema.ROLE: "baseline"})
    done = lambda: sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.get_trials(deepcopy=False))  # noqa: E731
    used_up = [False]
    objective = _objective(space, baseline, answer, used_up, seed)
    while done() < trials and not used_up[0]:
        study.optimize(objective, n_trials=trials - done())
    answer.stage = "finals"
    finals = finals_mod.run(study, records(study), finalists, repeats, answer, min_gain)
    answer.stage = "ablation"
    ablation_mod.run(study, records(study), finals, answer, lambda k: None if _key(k.to_dict(), vary) in table["configs"] else "not in the table", min_gain)
    pick = outcome(study).recommended
    return (_key(pick.config.to_dict(), vary) if pick else _key(baseline.to_dict(), vary)), answer.cost


@contextlib.contextmanager
def before_issue_30() -> Iterator[None]:
    """The search as it was: Optuna's default 10 random trials first, no unmeasured config queued after a repeated
    one, every finals round for every finalist, the ablation measuring its whole path again (its ordering never
    reusing a search trial is not replayed)."""
    look, reused = sequential.look, ablation_mod.reused
    sequential.look = lambda finals, round_: finals
    ablation_mod.reused = lambda ablation, finals: ablation
    before[0] = True
    try:
        yield
    finally:
        sequential.look, ablation_mod.reused = look, reused
        before[0] = False


def replay(path: Path, seeds: int, trials: int, finalists: int, repeats: int, min_gain: float) -> None:
    table = json.loads(path.read_text())
    means = {k: statistics.fmean(r["images_per_s"] for r in rows) for k, rows in table["configs"].items()}
    walls = {k: statistics.fmean(r["wall_s"] for r in rows) for k, rows in table["configs"].items()}
    best = max(means.values())
    good = {k for k, m in means.items() if m >= (1 - WITHIN) * best}
    grid_s = sum(walls.values())
    picks: list[bool] = []
    costs: list[float] = []
    stages: dict[str, list[float]] = {}
    for seed in range(seeds):
        pick, cost = replay_once(table, seed, trials, finalists, repeats, min_gain)
        picks.append(pick in good)
        costs.append(sum(cost.values()) / grid_s)
        for stage, s in cost.items():
            stages.setdefault(stage, []).append(s)
    rng = random.Random(0)
    grid_picks = [max(table["configs"], key=lambda k: rng.choice(table["configs"][k])["images_per_s"]) in good for _ in range(1000)]
    print(f"{table['space']}: {len(means)} configs, best {max(means, key=means.__getitem__)} at {best:.1f} images/s; "
          f"{len(good)} within {100 * WITHIN:.0f}% of it; grid {grid_s:.0f} s (each config once, at its mean wall time)")
    print(f"  pick within {100 * WITHIN:.0f}% of the best: {100 * sum(picks) / seeds:.0f}% of {seeds} seeds "
          f"(the grid measured once per config: {100 * sum(grid_picks) / len(grid_picks):.0f}%)")
    print(f"  cost over the grid's: median {statistics.median(costs):.2f}x (range {min(costs):.2f}-{max(costs):.2f}x); "
          f"by stage (median s): " + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in stages.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", choices=sorted(SPACES), help="measure this space's table")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--replay", action="store_true", help="replay the search against every table in benchmarks/replay/")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--finalists", type=int, default=3)
    parser.add_argument("--finals-repeats", type=int, default=3)
    parser.add_argument("--min-gain", type=float, default=0.05)
    parser.add_argument("--before", action="store_true", help="also replay the search as it was before issue 30")
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.repeats, args.steps, args.warmup)
    if args.replay:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        tables = sorted(TABLES.glob("*.json"))
        if not tables:
            raise SystemExit(f"no table in {TABLES}: run --measure data and --measure compute first")
        for path in tables:
            if args.before:
                with before_issue_30():
                    print("before issue 30 (every finals round, the ablation's whole path):")
                    replay(path, args.seeds, args.trials, args.finalists, args.finals_repeats, args.min_gain)
                print("now:")
            replay(path, args.seeds, args.trials, args.finalists, args.finals_repeats, args.min_gain)


if __name__ == "__main__":
    main()
