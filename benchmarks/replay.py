"""Replay: search strategies compared against measured grids in seconds, not hours (issues 30, 47).

Measure once (``--measure NAME``): every config of a named space and every ceiling its grid needs (one data ceiling
per data key, one compute ceiling per compute key: :func:`speedopt.measure.key_of`), ``--repeats`` times each, in
interleaved passes (every config once, then every ceiling once, then again), each job forked from a warm worker as
a search's are; the ceilings measured as a search measures them (:func:`speedopt.measure.measure_ceilings`). The
table (``benchmarks/replay/NAME.json``) keeps, per config and per ceiling (``kind|key``), each repeat's images/s,
the job's wall time as the caller waits for it (``wall_s``) and the part of it the measured steps took
(``measured_s``; the rest is the job's fixed cost: request, fork, set-up, warm-up, result). ``--ceilings-only``
measures the ceilings alone and adds them to the stored table, its configs kept.

Replay (``--replay``): for each table and each of ``--seeds`` seeds, the shipped search runs with the table in
place of the trainer: :func:`speedopt.search.run` on a plan made by :func:`speedopt.search.plan` (TPE seeded as
a search seeds it, the baseline first, the skips, the pruner, the ceiling rules and the ranking (``--ceiling-rank``),
the memory-fit rule, the quality probes' policy, ``--trials`` trials, the finals and the ablation), given a
:class:`speedopt.search.Runner` that answers each job from the table. A config the search measures answers with
one of its repeats drawn at random, its running images/s reported step by step (the pruner may stop it part-way),
and costs that repeat's wall time (a pruned one: its fixed part and the share of its measured steps it ran). A
ceiling job answers with one of its key's repeats, drawn apart, and costs its wall time (billed to ``ceilings``
before the first trial: the ranking). The table holds no accuracy, no memory peaks and no loader with mosaic off:
such a job is answered as not measured, every quality probe scores alike (every config keeps accuracy; a probe
costs nothing) and a memory fit's short trials find no peak. The plan reads a small stand-in of the table's images
(and a PNG copy per imgsz for the data knob).

Printed per table: the share of seeds whose pick (the finals' recommendation, or the baseline) has a mean
images/s within 5% of the best config's mean; the median of the search's cost over the grid's (the grid:
each config measured once, at its mean wall time); and the median cost by stage. Goals (issue 47): on a table of
at least 100 configs, a pick within 5% in at least 90% of seeds at a median cost of at most 25% of the grid's; on
the compute table, a pick within 5% in at least 80%.

    python benchmarks/replay.py --measure data [--repeats 3]     # 18 configs: about 30 min on 2 CPU cores
    python benchmarks/replay.py --measure mixed                  # 108 configs + 72 ceilings: about 2 h (resumable:
                                                                 # each pass kept in benchmarks/replay/mixed.json.partial)
    python benchmarks/replay.py --measure compute [--repeats 3]  # 24 configs: about 20 min
    python benchmarks/replay.py --measure data --ceilings-only   # the ceilings alone, added to the stored table
    python benchmarks/replay.py --replay [--seeds 50] [--trials 6] [--ceiling-rank auto] [--tables data compute]
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
from speedopt.measure import (
    Ceiling,
    JobOutcome,
    LabelCaches,
    TrialOptions,
    TrialProgress,
    TrialRequest,
    TrialResult,
    key_of,
    make_request,
    measure_ceilings,
    run_trial,
    warm_worker,
)
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
    "mixed": {  # the demo photos at small sizes: data-side (cache, data) and compute-side (model, imgsz) knobs, batch both
        "vary": {
            "cache": ["none", "ram", "disk"], "data": ["original", "resized"], "batch": [4, 8, 16], "imgsz": [96, 128, 160],
            "model": ["yolov5n", "yolov5s"],
        },
        "fixed": {"workers": 0, "amp": False, "freeze": 0},  # workers: Ultralytics runs 0 on a CPU whatever is asked
        "baseline": {"cache": "none", "data": "original", "batch": 8, "imgsz": 160, "model": "yolov5s"},
        "images": {"train": 96, "val": 16, "width": 1920, "height": 1080, "quality": 95},
    },
}
KINDS = ("data", "compute")  # the two ceilings a table keeps, by ``kind|key`` (speedopt.measure.key_of)
WITHIN = 0.05  # a pick within 5% of the best config's mean images/s is a good pick
MAP50_95 = 0.5  # what every quality probe scores: the table holds no accuracy, every config keeps it


def _key(values: dict[str, Any], vary: dict[str, list[Any]]) -> str:
    return " ".join(f"{k}={values[k]}" for k in vary)


def _configs(vary: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(vary, values)) for values in itertools.product(*vary.values())]


def _sizes(vary: dict[str, list[Any]], fixed: dict[str, Any]) -> list[int]:
    """The imgsz values of the grid: a ``data=resized`` config trains on the prepared copy at its imgsz."""
    return list(vary["imgsz"]) if "imgsz" in vary else [fixed["imgsz"]]


def ceiling_names(vary: dict[str, list[Any]], fixed: dict[str, Any]) -> dict[str, Knobs]:
    """Every ceiling the grid needs, by ``kind|key`` (the key as :func:`speedopt.measure.key_of` gives it), with the
    first config that needs it."""
    out: dict[str, Knobs] = {}
    for c in _configs(vary):
        knobs = Knobs(**{**fixed, **c})
        for kind in KINDS:
            out.setdefault(f"{kind}|{key_of(kind, knobs)}", knobs)  # type: ignore[arg-type]
    return out


def _row(result: TrialResult, job_s: float) -> dict[str, float]:
    return {
        "images_per_s": round(result.images_per_s or 0.0, 3), "wall_s": round(job_s, 2),
        "measured_s": round(result.measured_s or 0.0, 2), "ci_rel": round(result.ci_rel or 0.0, 4),
    }


def _ceilings_pass(
    vary: dict[str, list[Any]], fixed: dict[str, Any], where: Any, options: TrialOptions, rows: dict[str, list[dict[str, float]]],
    label: str,
) -> float:
    """Every ceiling the grid needs, measured once, as a search measures them: :func:`speedopt.measure.measure_ceilings`
    per config, the ones measured in this pass known (each ``kind|key`` once). Its seconds."""
    started = time.monotonic()
    known: dict[str, Ceiling] = {}
    count = len(rows)

    def prepare(asked: Knobs) -> TrialRequest:
        return make_request(where(asked), asked, options)

    def run(request: TrialRequest) -> TrialResult:
        t0 = time.monotonic()
        result = run_trial(request)
        job_s = time.monotonic() - t0  # the whole job as the caller waits for it
        name = f"{request.mode}|{key_of(request.mode, result.config)}"  # type: ignore[arg-type]
        if not result.ok or not result.images_per_s:
            raise SystemExit(f"ceiling {name} ended {result.status.value}: {result.message}")
        if name not in rows:  # the trainer ran other knobs than the grid's: the replay could not find it
            raise SystemExit(f"ceiling {name}: not a key of the grid's ceilings ({', '.join(sorted(rows))})")
        rows[name].append(_row(result, job_s))
        print(f"{label} ceiling {len(known) + 1}/{count}: {name}: {result.images_per_s:.1f} images/s, {job_s:.1f} s "
              f"({result.measured_s or 0:.1f} s measured)", flush=True)
        return result

    for c in _configs(vary):
        measure_ceilings(Knobs(**{**fixed, **c}), prepare, run, known, known.__setitem__)
    if set(known) != set(rows):
        raise SystemExit(f"the pass measured {len(known)} ceilings, the grid needs {len(rows)}")
    return time.monotonic() - started


def measure(name: str, repeats: int, steps: int, warmup: int, ceilings_only: bool = False) -> Path:
    """Measure every config of space ``name`` and every ceiling its grid needs, ``repeats`` times each, in interleaved
    passes (each pass: every config once, then every ceiling once), and write its table. ``ceilings_only``: the
    ceilings alone, added to the stored table (its configs, steps and warm-up kept)."""
    out = TABLES / f"{name}.json"
    table: dict[str, Any]
    if ceilings_only:
        table = json.loads(out.read_text())
        steps, warmup = table["steps"], table["warmup"]
    else:
        space = SPACES[name]
        table = {"space": name, "vary": space["vary"], "fixed": space["fixed"], "baseline": space["baseline"], "steps": steps,
                 "warmup": warmup}
    vary, fixed = table["vary"], table["fixed"]
    configs = _configs(vary)
    rows: dict[str, list[dict[str, float]]] = {_key(c, vary): [] for c in configs}
    ceilings: dict[str, list[dict[str, float]]] = {n: [] for n in ceiling_names(vary, fixed)}
    options = TrialOptions(steps=steps, warmup=warmup, device="cpu")
    started, ceilings_s = time.monotonic(), 0.0
    partial, first = out.with_name(out.name + ".partial"), 0  # the passes done so far: a long table resumes
    if not ceilings_only and partial.exists():
        saved = json.loads(partial.read_text())
        if all(saved.get(k) == table[k] for k in ("vary", "fixed", "steps", "warmup")):
            rows, ceilings, first = saved["configs"], saved["ceilings"], int(saved["passes"])
            ceilings_s = float(saved.get("ceilings_wall_s", 0.0))
            started -= float(saved.get("wall_s", 0.0))  # the table's wall time counts every session's passes
            print(f"resuming {partial}: {first} of {repeats} passes done ({saved.get('wall_s', 0):.0f} s)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = str(data.generate(Path(tmp) / "images", data.DemoSpec(**SPACES[name]["images"])))
        ds = data.load(yaml_path)
        copies = {}  # one prepared copy per imgsz, as `speedopt prepare` makes them for a search
        if "resized" in vary.get("data", [fixed.get("data")]):
            for size in _sizes(vary, fixed):
                spec = data.PrepareSpec(imgsz=size, format="png")
                copies[size] = str(data.prepare(ds, spec, Path(tmp) / f"copy-{size}", jobs=2).copy.yaml_path)

        def where(knobs: Knobs) -> str:
            return copies[knobs.imgsz] if knobs.data == "resized" else yaml_path

        env = engines.get("ultralytics").environment(cache_dir())
        with warm_worker("ultralytics", None, env):
            for rnd in range(first, repeats):
                for i, c in enumerate([] if ceilings_only else configs):
                    knobs = Knobs(**{**fixed, **c})
                    t0 = time.monotonic()
                    result = speedopt.trial(where(knobs), knobs, device="cpu", steps=steps, warmup=warmup)
                    job_s = time.monotonic() - t0  # the whole job as the caller waits for it: what a search pays
                    if not result.ok or not result.images_per_s:
                        raise SystemExit(f"{_key(c, vary)} ended {result.status.value}: {result.message}")
                    rows[_key(c, vary)].append(_row(result, job_s))
                    print(f"pass {rnd + 1}/{repeats} config {i + 1}/{len(configs)}: {_key(c, vary)}: "
                          f"{result.images_per_s:.1f} images/s, {job_s:.1f} s ({result.measured_s or 0:.1f} s measured)", flush=True)
                ceilings_s += _ceilings_pass(vary, fixed, where, options, ceilings, f"pass {rnd + 1}/{repeats}")
                if not ceilings_only:  # every pass kept: an interrupted measurement resumes at the next pass
                    TABLES.mkdir(exist_ok=True)
                    partial.write_text(json.dumps({**table, "passes": rnd + 1, "configs": rows, "ceilings": ceilings,
                                                   "ceilings_wall_s": ceilings_s, "wall_s": time.monotonic() - started}) + "\n")
    today, wall_s = time.strftime("%Y-%m-%d"), round(time.monotonic() - started, 1)
    if not ceilings_only:
        table.update({"measured": today, "wall_s": wall_s, "configs": rows})
    table.update({
        "ceilings_measured": today, "ceilings_wall_s": round(ceilings_s, 1), "ceilings": ceilings,
        "how": (f"configs as measured on {table['measured']}; ceilings: {repeats} passes (every ceiling once) on {today}"
                if ceilings_only else f"{repeats} interleaved passes (every config once, then every ceiling once)")
        + ", each job forked from a warm worker, on the CPU",
    })
    TABLES.mkdir(exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n")
    partial.unlink(missing_ok=True)
    print(f"wrote {out} ({'' if ceilings_only else f'{len(configs)} configs and '}{len(ceilings)} ceilings x {repeats} repeats, "
          f"{wall_s:.0f} s; ceilings {ceilings_s:.0f} s)")
    return out


class Table(Runner):
    """The table in place of the trainer: a config answers with one of its repeats, a ceiling job with one of its
    key's, and its wall time is billed to the stage the search is in (:class:`Stages`)."""

    def __init__(self, table: dict[str, Any], rng: random.Random, ceiling_rng: random.Random | None = None) -> None:
        self.table, self.rng, self.vary = table, rng, table["vary"]
        self.ceiling_rng = ceiling_rng or rng  # apart: the configs' draws stay those of a search that measures no ceiling
        self.cost: dict[str, float] = {}
        self.stage = "trials"

    def _bill(self, seconds: float) -> None:
        self.cost[self.stage] = self.cost.get(self.stage, 0.0) + seconds

    def trial(self, request: TrialRequest, progress: Any = None, on_wait: Any = None, owner: str = "", dataset: Any = None) -> TrialResult:
        knobs = request.requested
        if request.mode in KINDS:
            return self._ceiling(request)
        if request.mode != "train":  # the loader with mosaic off, say: the table holds none
            return TrialResult(Status.ERROR, f"the replayed table holds no {request.mode} jobs", request.knobs, knobs, request.device,
                               request.engine)
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

    def _ceiling(self, request: TrialRequest) -> TrialResult:
        """A ceiling job (its kind in ``request.mode``): one of its key's repeats, as the job's result (the search keeps
        it by the key of the knobs it ran, read back from ``config``)."""
        name = f"{request.mode}|{key_of(request.mode, request.knobs)}"  # type: ignore[arg-type]
        repeats = self.table.get("ceilings", {}).get(name)
        if not repeats:
            return TrialResult(Status.ERROR, f"the replayed table holds no ceiling {name}", request.knobs, request.requested,
                               request.device, request.engine)
        row = self.ceiling_rng.choice(repeats)
        self._bill(row["wall_s"])
        return TrialResult(Status.OK, "", request.knobs, request.requested, request.device, request.engine,
                           images_per_s=row["images_per_s"], ci_rel=row["ci_rel"], steps=max(1, request.steps),
                           wall_s=row["wall_s"], measured_s=row["measured_s"])

    def job(self, job: Any, owner: str, progress: Any = None, on_wait: Any = None) -> JobOutcome:
        """A quality probe: every signature scores alike (the table holds no accuracy) and costs nothing."""
        now = time.time()
        figures = {"map50": MAP50_95 * 1.5, "map50_95": MAP50_95, "images": 1}
        return JobOutcome(Status.OK, "", figures, 0.0, "", (), now, now)

    def label_caches(self, yamls: Any, engine_spec: Any, images: int, owner: str, progress: Any = None, on_wait: Any = None) -> LabelCaches:
        return LabelCaches()  # none built: the replayed trials run nothing that scans labels


class Stages(QuietView):
    """Tells the table which stage the search is in, so each measurement is billed to it: ``ceilings`` from the start
    to the first trial (the ranking's ceiling jobs), then ``trials``, ``finals`` and ``ablation``."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def start(self, *args: Any, **kwargs: Any) -> None:
        self.table.stage = "ceilings"

    def trial_started(self, *args: Any, **kwargs: Any) -> None:
        self.table.stage = "trials"

    def finals_started(self, *args: Any, **kwargs: Any) -> None:
        self.table.stage = "finals"

    def ablation_started(self, *args: Any, **kwargs: Any) -> None:
        self.table.stage = "ablation"


def stand_in(table: dict[str, Any], folder: Path) -> tuple[str, str]:
    """A small stand-in of the table's images (the plan reads a dataset; the table answers every job) and a space
    file of the table's grid; a PNG copy at each of the grid's imgsz where the table varies ``data``."""
    images = SPACES[table["space"]]["images"]
    spec = data.DemoSpec(train=8, val=4, width=images["width"] // 6, height=images["height"] // 6, quality=images["quality"])
    yaml_path = data.generate(folder / "images", spec)
    if "data" in table["vary"]:
        for size in _sizes(table["vary"], table["fixed"]):
            data.prepare(data.load(yaml_path), data.PrepareSpec(imgsz=size, format="png"), jobs=1)
    space = folder / "space.yaml"
    grid = {**table["vary"], **{k: [v] for k, v in table["fixed"].items()}}
    space.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in grid.items()))
    return str(yaml_path), str(space)


def replay_once(
    table: dict[str, Any], yaml_path: str, space: str, folder: Path, seed: int, trials: int, finalists: int, repeats: int,
    min_gain: float, ceiling_rank: str = "auto",
) -> tuple[str, dict[str, float]]:
    """One shipped search against the table: its pick (the config's key) and its cost by stage."""
    vary = table["vary"]
    baseline = {**table["fixed"], **table["baseline"]}
    config = SearchConfig(  # a journal file: the same study as SQLite's, a fifth of the time per replayed search
        data=yaml_path, trials=trials, storage=f"{folder}/replay.log", study=f"{table['space']}-{seed}",
        space_file=space, baseline=" ".join(f"{k}={v}" for k, v in baseline.items()), steps=table["steps"],
        warmup=table["warmup"], finalists=finalists, repeats=repeats, min_gain=min_gain, seed=seed, device="cpu",
        warm=False, ends=False, ceiling_rank=ceiling_rank,  # type: ignore[arg-type]
    )
    answer = Table(table, random.Random(seed), random.Random(f"ceilings-{seed}"))
    result = run(plan(config), Stages(answer), answer)
    pick = result.recommended
    return (_key(pick.config.to_dict(), vary) if pick else _key(baseline, vary)), answer.cost


def replay(path: Path, seeds: int, trials: int, finalists: int, repeats: int, min_gain: float, ceiling_rank: str = "auto") -> None:
    table = json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):  # the copy is made and found under ./prepared
        yaml_path, space = stand_in(table, Path(tmp))
        runs = [
            replay_once(table, yaml_path, space, Path(tmp), seed, trials, finalists, repeats, min_gain, ceiling_rank)
            for seed in range(seeds)
        ]
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
    line = _ceilings_line(table, means, grid_s)
    if line:
        print(line)


def _ceilings_line(table: dict[str, Any], means: dict[str, float], grid_s: float) -> str | None:
    """How the table's ceilings predict its configs (None: it holds none): each config's bound as the search ranks by
    it (workers=0: loading and computing take turns, 1 / (1/data + 1/compute); else min(data, compute)) from the
    ceilings' means, its rank correlation with the configs' means, trial / bound, and the highest bound's config."""
    ceilings = table.get("ceilings")
    if not ceilings:
        return None
    vary, fixed = table["vary"], table["fixed"]
    bounds: dict[str, float] = {}
    for c in _configs(vary):
        knobs = Knobs(**{**fixed, **c})
        data_s, compute_s = (statistics.fmean(r["images_per_s"] for r in ceilings[f"{kind}|{key_of(kind, knobs)}"]) for kind in KINDS)  # type: ignore[arg-type]
        bounds[_key(c, vary)] = 1 / (1 / data_s + 1 / compute_s) if knobs.workers == 0 else min(data_s, compute_s)
    keys = list(bounds)
    shares = [means[k] / bounds[k] for k in keys]
    top = max(keys, key=bounds.__getitem__)
    jobs_s = sum(statistics.fmean(r["wall_s"] for r in rows) for rows in ceilings.values())
    return (f"  ceilings: {len(ceilings)} jobs, {jobs_s:.0f} s ({jobs_s / grid_s:.2f}x the grid); bound vs mean images/s: rank "
            f"correlation {_ranked([means[k] for k in keys], [bounds[k] for k in keys]):.2f}, trial / bound median "
            f"{statistics.median(shares):.2f} (range {min(shares):.2f}-{max(shares):.2f}); the highest bound's config "
            f"{top} at {means[top] / max(means.values()):.2f} of the best")


def _ranked(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (no ties expected among measured means)."""
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        for rank, i in enumerate(order):
            out[i] = float(rank)
        return out

    return statistics.correlation(ranks(xs), ranks(ys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", choices=sorted(SPACES), help="measure this space's table: its configs and its ceilings")
    parser.add_argument("--ceilings-only", action="store_true", help="with --measure: measure the ceilings alone, added to the stored table")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--replay", action="store_true", help="replay the search against every table in benchmarks/replay/")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--finalists", type=int, default=3)
    parser.add_argument("--finals-repeats", type=int, default=3)
    parser.add_argument("--min-gain", type=float, default=0.05)
    parser.add_argument("--ceiling-rank", choices=("auto", "on", "off"), default="auto", help="the search's --ceiling-rank")
    parser.add_argument("--tables", nargs="+", metavar="NAME", help="replay these tables only (default: every table)")
    args = parser.parse_args()
    if args.ceilings_only and not args.measure:
        parser.error("--ceilings-only needs --measure NAME")
    if args.measure:
        measure(args.measure, args.repeats, args.steps, args.warmup, ceilings_only=args.ceilings_only)
    if args.replay:
        quiet_optuna()
        tables = sorted(TABLES.glob("*.json")) if not args.tables else [TABLES / f"{name}.json" for name in args.tables]
        if not tables:
            raise SystemExit(f"no table in {TABLES}: run --measure data and --measure compute first")
        for path in tables:
            replay(path, args.seeds, args.trials, args.finalists, args.finals_repeats, args.min_gain, args.ceiling_rank)


if __name__ == "__main__":
    main()
