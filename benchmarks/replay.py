"""Replay: search strategies compared against measured grids in seconds, not hours (issue 30).

Measure once (``--measure NAME``): every config of a named space, ``--repeats`` times each, in interleaved
passes (every config once, then again), each job forked from a warm worker as a search's are. The table
(``benchmarks/replay/NAME.json``) keeps, per config, each repeat's images/s, the job's wall time as the caller
waits for it (``wall_s``) and the part of it the measured steps took (``measured_s``; the rest is the job's
fixed cost: request, fork, set-up, warm-up, result).

Replay (``--replay``): for each table and each of ``--seeds`` seeds, the shipped search runs with the table in
place of the trainer: :func:`speedopt.search.run` on a plan made by :func:`speedopt.search.plan` (TPE seeded as
a search seeds it, the baseline first, the skips, the pruner, the ceiling rules, the memory-fit rule, the quality
probes' policy, ``--trials`` trials, the finals and the ablation), given a :class:`speedopt.search.Runner` that
answers each job from the table. A config the search measures answers with one of its repeats drawn at random,
its running images/s reported step by step (the pruner may stop it part-way), and costs that repeat's wall time
(a pruned one: its fixed part and the share of its measured steps it ran). The table holds no ceilings, no
accuracy and no memory peaks: a ceiling job is answered as not measured (the ceiling rules then bound nothing),
every quality probe scores alike (every config keeps accuracy; a probe costs nothing) and a memory fit's short
trials find no peak. The plan reads a small stand-in of the table's images (and a PNG copy for the data knob).

Printed per table: the share of seeds whose pick (the finals' recommendation, or the baseline) has a mean
images/s within 5% of the best config's mean; the median of the search's cost over the grid's (the grid:
each config measured once, at its mean wall time); and the median cost by stage. Goals (issue 30): a pick
within 5% in at least 90% of seeds, at a median cost of at most 35% of the grid's.

    python benchmarks/replay.py --measure data [--repeats 3]     # 18 configs: about 30 min on 2 CPU cores
    python benchmarks/replay.py --measure compute [--repeats 3]  # 24 configs: about 20 min
    python benchmarks/replay.py --replay [--seeds 50] [--trials 6]
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
from pathlib import Path
from typing import Any

import optuna

import speedopt
from speedopt import data, engines
from speedopt.knobs import Knobs
from speedopt.measure import JobOutcome, LabelCaches, TrialProgress, TrialRequest, TrialResult, warm_worker
from speedopt.offline import cache_dir
from speedopt.search import QuietView, Runner, SearchConfig, plan, run
from speedopt.status import Status
from speedopt.study import quiet_optuna

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
MAP50_95 = 0.5  # what every quality probe scores: the table holds no accuracy, every config keeps it


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


class Table(Runner):
    """The table in place of the trainer: a config answers with one of its repeats, and its wall time is billed
    to the stage the search is in (:class:`Stages`)."""

    def __init__(self, table: dict[str, Any], rng: random.Random) -> None:
        self.table, self.rng, self.vary = table, rng, table["vary"]
        self.cost: dict[str, float] = {}
        self.stage = "trials"

    def _bill(self, seconds: float) -> None:
        self.cost[self.stage] = self.cost.get(self.stage, 0.0) + seconds

    def trial(self, request: TrialRequest, progress: Any = None, on_wait: Any = None, owner: str = "", dataset: Any = None) -> TrialResult:
        knobs = request.requested
        if request.mode != "train":  # a ceiling job: the table holds none
            return TrialResult(Status.ERROR, "the replayed table holds no ceilings", request.knobs, knobs, request.device, request.engine)
        repeats = self.table["configs"].get(_key(knobs.to_dict(), self.vary))
        if not repeats:  # outside the table's grid (a memory fit's batch, say)
            return TrialResult(Status.INFEASIBLE, "not in the table", request.knobs, knobs, request.device, request.engine)
        row = self.rng.choice(repeats)
        steps = max(1, request.steps)
        fixed_s = row["wall_s"] - row["measured_s"]
        for step in range(1, steps + 1):  # the running images/s, as a trial's child reports it: the pruner's input
            try:
                if progress is not None:
                    progress(TrialProgress("measure", step, steps, row["images_per_s"]))
            except optuna.TrialPruned:
                self._bill(fixed_s + row["measured_s"] * step / steps)
                raise
        self._bill(row["wall_s"])
        return TrialResult(Status.OK, "", request.knobs, knobs, request.device, request.engine, images_per_s=row["images_per_s"],
                           ci_rel=row["ci_rel"], steps=steps, wall_s=row["wall_s"], measured_s=row["measured_s"])

    def job(self, job: Any, owner: str, progress: Any = None, on_wait: Any = None) -> JobOutcome:
        """A quality probe: every signature scores alike (the table holds no accuracy) and costs nothing."""
        now = time.time()
        figures = {"map50": MAP50_95 * 1.5, "map50_95": MAP50_95, "images": 1}
        return JobOutcome(Status.OK, "", figures, 0.0, "", (), now, now)

    def label_caches(self, yamls: Any, engine: Any, yolov5_dir: Any, images: int, owner: str, progress: Any = None, on_wait: Any = None) -> LabelCaches:
        return LabelCaches()  # none built: the replayed trials run nothing that scans labels


class Stages(QuietView):
    """Tells the table which stage the search is in, so each measurement is billed to it."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def finals_started(self, *args: Any, **kwargs: Any) -> None:
        self.table.stage = "finals"

    def ablation_started(self, *args: Any, **kwargs: Any) -> None:
        self.table.stage = "ablation"


def stand_in(table: dict[str, Any], folder: Path) -> tuple[str, str]:
    """A small stand-in of the table's images (the plan reads a dataset; the table answers every job) and a space
    file of the table's grid; a PNG copy at the table's imgsz where the table varies ``data``."""
    images = SPACES[table["space"]]["images"]
    spec = data.DemoSpec(train=8, val=4, width=images["width"] // 6, height=images["height"] // 6, quality=images["quality"])
    yaml_path = data.generate(folder / "images", spec)
    if "data" in table["vary"]:
        data.prepare(data.load(yaml_path), data.PrepareSpec(imgsz=table["fixed"]["imgsz"], format="png"), jobs=1)
    space = folder / "space.yaml"
    grid = {**table["vary"], **{k: [v] for k, v in table["fixed"].items()}}
    space.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in grid.items()))
    return str(yaml_path), str(space)


def replay_once(
    table: dict[str, Any], yaml_path: str, space: str, folder: Path, seed: int, trials: int, finalists: int, repeats: int,
    min_gain: float,
) -> tuple[str, dict[str, float]]:
    """One shipped search against the table: its pick (the config's key) and its cost by stage."""
    vary = table["vary"]
    baseline = {**table["fixed"], **table["baseline"]}
    config = SearchConfig(  # a journal file: the same study as SQLite's, a fifth of the time per replayed search
        data=yaml_path, trials=trials, storage=f"{folder}/replay.log", study=f"{table['space']}-{seed}",
        space_file=space, baseline=" ".join(f"{k}={v}" for k, v in baseline.items()), steps=table["steps"],
        warmup=table["warmup"], finalists=finalists, repeats=repeats, min_gain=min_gain, seed=seed, device="cpu",
        warm=False, ends=False,
    )
    answer = Table(table, random.Random(seed))
    result = run(plan(config), Stages(answer), answer)
    pick = result.recommended
    return (_key(pick.config.to_dict(), vary) if pick else _key(baseline, vary)), answer.cost


def replay(path: Path, seeds: int, trials: int, finalists: int, repeats: int, min_gain: float) -> None:
    table = json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):  # the copy is made and found under ./prepared
        yaml_path, space = stand_in(table, Path(tmp))
        runs = [replay_once(table, yaml_path, space, Path(tmp), seed, trials, finalists, repeats, min_gain) for seed in range(seeds)]
    _print(table, runs, seeds)


def _print(table: dict[str, Any], runs: list[tuple[str, dict[str, float]]], seeds: int) -> None:
    means = {k: statistics.fmean(r["images_per_s"] for r in rows) for k, rows in table["configs"].items()}
    walls = {k: statistics.fmean(r["wall_s"] for r in rows) for k, rows in table["configs"].items()}
    best = max(means.values())
    good = {k for k, m in means.items() if m >= (1 - WITHIN) * best}
    grid_s = sum(walls.values())
    picks: list[bool] = []
    costs: list[float] = []
    stages: dict[str, list[float]] = {}
    for pick, cost in runs:
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
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.repeats, args.steps, args.warmup)
    if args.replay:
        quiet_optuna()
        tables = sorted(TABLES.glob("*.json"))
        if not tables:
            raise SystemExit(f"no table in {TABLES}: run --measure data and --measure compute first")
        for path in tables:
            replay(path, args.seeds, args.trials, args.finalists, args.finals_repeats, args.min_gain)


if __name__ == "__main__":
    main()
