"""Search efficiency: what a speedopt search with a budget finds, and at what cost, against the exhaustive grid.

On a generated demo dataset and a fixed space (default 24 configs: model yolov5n/yolov5s x imgsz
96/128/160 x batch 4/8 x cache none/ram, on the CPU), in one run:

- the grid: every config of the space measured once with ``speedopt.trial`` (the search's steps,
  warm-up and device; every job forked from a warm worker, as a search's are: --cold runs both sides
  cold), its total wall time, its best images/s and its full ranking;
- the search: ``speedopt.search`` on the same space, in a fresh SQLite storage, with a budget of
  --budget trials (baseline included), then its finals (--finalists, --repeats), timed whole: label
  cache, trials, quality probes, finals and whatever the search does after them.

It prints the search's wall time over the grid's, the search's pick (its recommended config, as it ran)
with its images/s IN THE GRID (the same measurement pass as the grid's best) over the grid's best, the
pick's rank in the grid, and how many grid configs lie within 10% of the grid's best (one measurement
each: those are ties within this machine's noise). Target (issue 16): >= 0.95 of the grid's best in
<= 35% of the grid's time.

model, imgsz and batch are accuracy knobs: a search varies them only under the mAP-loss constraint
(``--quality off`` pins them at the baseline). The search probes as ``speedopt search`` does, with
cheap probes (--probe-epochs 1 on --probe-fraction of the train set) and --max-map-loss 1 (absolute:
every config passes, as in the grid, which judges no accuracy); the probes' time counts in its wall time.

    python benchmarks/search_efficiency.py [--budget 8] [--steps 10] [--warmup 3] [--imgsz 96,128,160] [--ceiling-rank on] [--small] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

import speedopt
from speedopt import data, engines
from speedopt.errors import UsageError
from speedopt.knobs import Knobs, value_text
from speedopt.measure import TrialProgress, warm_worker
from speedopt.offline import cache_dir
from speedopt.search import RANK_MODES, SearchConfig, View, plan
from speedopt.study import quiet_optuna

TIES = 0.10  # grid configs within this share of the grid's best are ties with it (one measurement each)
TARGET_SHARE, TARGET_TIME = 0.95, 0.35  # issue 16: >= 95% of the grid's best in <= 35% of its time
VARIED = ("model", "imgsz", "batch", "cache")
FULL = {"models": "yolov5n,yolov5s", "imgsz": "96,128,160", "batch": "4,8", "cache": "none,ram",
        "budget": 8, "steps": 10, "warmup": 3, "train_images": 128, "size": "320x240"}
SMALL = {"models": "yolov5n", "imgsz": "64", "batch": "2,4", "cache": "none,ram",
         "budget": 2, "steps": 3, "warmup": 1, "train_images": 16, "size": "96x72"}


class Timeline(View):
    """Timestamps of the search's phases, from the hooks every search reports to its view."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.trials: list[tuple[float, float]] = []  # (started, finished) of each trial measured, probes included
        self.pruned: list[tuple[float, float]] = []  # trials stopped part-way (a pruner), never finished
        self.probe_s = 0.0
        self.rank_s, self._rank_from = 0.0, None  # ceiling ranking's jobs (before the first trial), when it ran
        self.fit_s, self.fits = 0.0, 0  # memory fits: two short trials before a new cache=ram signature's first trial
        self._fit_from: float | None = None
        self.finals_at: float | None = None
        self.last_repeat: float | None = None
        self._number: int | None = None  # the trial running now
        self._started = self._measured = 0.0
        self._probe_from: float | None = None

    def _pruned(self, now: float, why: str = "") -> None:
        """The running trial ended without a result (its view hears no trial_finished)."""
        if self._number is not None:
            self.pruned.append((self._started, now))
            self.say(f"search trial {self._number}: stopped after {now - self._started:.1f} s" + (f" ({why})" if why else ""))
            self._number = None

    def trial_started(self, number: int, knobs: Knobs) -> None:
        now = time.monotonic()
        self._pruned(now)
        self._number, self._started, self._measured, self._probe_from = number, now, now, None

    def trial_progress(self, update: TrialProgress) -> None:
        # A probe runs after the trial's measurement: from the trial's last update on (a probe's own first
        # update comes only once its process has started), to the trial's end. A memory fit runs before it:
        # from the search saying so to the trial's first update.
        now = time.monotonic()
        if self._fit_from is not None:
            self.fit_s, self._fit_from = self.fit_s + now - self._fit_from, None
        if not update.phase.startswith("probe "):
            self._measured = now
        elif self._probe_from is None:
            self._probe_from = self._measured

    def note(self, message: str) -> None:
        if message.startswith("ceiling ranking: ") and "measuring them" in message:
            self._rank_from = time.monotonic()
        elif message.startswith("ceiling ranking: ranked") and self._rank_from is not None:
            self.rank_s = time.monotonic() - self._rank_from
            self.say(f"search {message}")
        if message.startswith("memory: fitting"):
            self._fit_from, self.fits = time.monotonic(), self.fits + 1
        if self._number is not None and message.startswith(f"trial {self._number}: "):  # how a search says it pruned one
            self._pruned(time.monotonic(), message.split(": ", 1)[1])

    def trial_finished(self, number: int, result: Any, baseline: bool, verdict: Any) -> None:
        now = time.monotonic()
        self.trials.append((self._started, now))
        self._number = None
        if self._probe_from is not None:
            self.probe_s += now - self._probe_from
        speed = f"{result.images_per_s:.1f} images/s" if result.ok else result.status.value
        probes = f", {verdict.probes_run} probe(s)" if verdict.probes_run else ""
        self.say(f"search trial {number}: {_text(result.config)}: {speed} ({now - self._started:.1f} s{probes})")

    def finals_started(self, finals: tuple[int, ...], repeats: int) -> None:
        self.finals_at = time.monotonic()
        self._pruned(self.finals_at)
        self.say(f"search finals: trials {', '.join(map(str, finals))} in {repeats} rounds")

    def step_finished(self, step: Any, result: Any) -> None:
        if step.stage == "finals":
            self.last_repeat = time.monotonic()


def _text(knobs: Knobs) -> str:
    return " ".join(f"{k}={value_text(getattr(knobs, k))}" for k in VARIED)


def _key(knobs: Knobs) -> tuple[Any, ...]:
    """A config as it ran, every knob (the grid and the search run the same fixed ones)."""
    return tuple(sorted(knobs.to_dict().items()))


def _options(args: argparse.Namespace) -> argparse.Namespace:
    """The arguments with --small's (or the full run's) values where none was given."""
    preset = SMALL if args.small else FULL
    return argparse.Namespace(**{k: (preset[k] if v is None and k in preset else v) for k, v in vars(args).items()})


def run(args: argparse.Namespace, work: Path) -> None:
    say = lambda line: print(line, flush=True)  # noqa: E731
    if (work / "search").exists() or (work / "grid").exists():
        raise UsageError(f"{work} already holds a run (grid/, search/): give an empty --keep folder")
    width, height = data.parse_size(args.size)
    spec = data.DemoSpec(train=args.train_images, val=max(4, args.train_images // 8), width=width, height=height)
    grid_yaml = data.generate(work / "grid" / "demo", spec)
    search_yaml = data.generate(work / "search" / "demo", spec)  # the same images: each side builds its own label cache
    models, sizes = args.models.split(","), [int(v) for v in args.imgsz.split(",")]
    batches, caches = [int(v) for v in args.batch.split(",")], args.cache.split(",")
    space_file = work / "space.yaml"
    space_file.write_text(yaml.safe_dump({"model": models, "imgsz": sizes, "batch": batches, "cache": caches, "freeze": [0]}))
    baseline = f"model={models[-1]} imgsz={max(sizes)} batch={batches[-1]} cache={caches[0]} workers=0"

    def config(yaml_path: Path) -> SearchConfig:
        return SearchConfig(
            data=str(yaml_path), trials=args.budget, storage=f"sqlite:///{work / 'search' / 'search.db'}",
            study="search-efficiency", space_file=str(space_file), baseline=baseline, steps=args.steps,
            warmup=args.warmup, finalists=args.finalists, repeats=args.repeats, seed=args.seed, device="cpu",
            quality="probe", max_map_loss="1", probe_epochs=args.probe_epochs, probe_fraction=args.probe_fraction,
            epochs=args.epochs, ablate=args.ablation, warm=not args.cold, ceiling_rank=args.ceiling_rank, **({"stop_at_ceiling": 0.0} if args.no_stop_at_ceiling else {}),
        )

    planned = plan(config(grid_yaml))  # the space exactly as the search will see it (no storage touched)
    domains = planned.protocol.space.domains
    grid_knobs = [Knobs(**dict(zip(domains, values))) for values in itertools.product(*(d.values() for d in domains.values()))]
    sampled = {k: d.text() for k, d in planned.protocol.space.sampled().items()}
    say(f"space: {len(grid_knobs)} configs ({', '.join(f'{k} {t}' for k, t in sampled.items())}); baseline {baseline}; "
        f"{args.steps} steps minimum, {args.warmup} warm-up, cpu; {args.train_images} train images {args.size}")

    grid: list[tuple[Knobs, float]] = []
    started = time.monotonic()
    # Every job forked from one warm worker, as the search's (its default; --cold: both start a fresh Python per
    # job), so the two sides pay the same fixed cost per trial and the ratio measures what the search chooses.
    env = engines.get("ultralytics").environment(cache_dir())
    with contextlib.nullcontext() if args.cold else warm_worker("ultralytics", None, env) as worker:
        for i, knobs in enumerate(grid_knobs):
            t0 = time.monotonic()
            result = speedopt.trial(str(grid_yaml), knobs, device="cpu", steps=args.steps, warmup=args.warmup)
            if not result.ok or not result.images_per_s:
                raise UsageError(f"grid config {_text(knobs)} ended {result.status.value}: {result.message}")
            grid.append((result.config, result.images_per_s))
            say(f"grid {i + 1}/{len(grid_knobs)}: {_text(result.config)}: {result.images_per_s:.1f} images/s ({time.monotonic() - t0:.1f} s)")
    grid_s = time.monotonic() - started
    launch = "cold (a fresh Python per job)" if worker is None else f"{worker.jobs} of {len(grid)} jobs forked from a warm worker"

    timeline = Timeline(say)
    started = time.monotonic()
    outcome = speedopt.search(config(search_yaml), view=timeline)
    ended = time.monotonic()
    search_s = ended - started
    pick = outcome.recommended
    if pick is None:
        raise UsageError(f"the search recommended nothing ({outcome.counts_text() or 'no trial'})")

    ranking = sorted(grid, key=lambda row: -row[1])
    best_knobs, best = ranking[0]
    speeds = {_key(k): v for k, v in grid}
    if _key(pick.config) not in speeds:
        raise UsageError(f"the search's pick {_text(pick.config)} ran a config the grid did not: {pick.config}")
    pick_speed = speeds[_key(pick.config)]
    rank = 1 + sum(v > pick_speed for _, v in grid)
    ties = sum(v >= (1 - TIES) * best for _, v in grid)
    base_speed = speeds.get(_key(planned.protocol.baseline))
    share, ratio = pick_speed / best, search_s / grid_s

    trials_s, pruned_s = (sum(b - a for a, b in spans) for spans in (timeline.trials, timeline.pruned))
    spans = sorted(timeline.trials + timeline.pruned)
    first = spans[0][0] if spans else ended
    last_trial = max((b for _, b in spans), default=ended)
    finals_s = (timeline.last_repeat or timeline.finals_at or last_trial) - (timeline.finals_at or last_trial)
    picked_at = timeline.last_repeat or last_trial  # the recommendation is decided by the last measurement
    after_s = ended - picked_at
    between_s = (timeline.finals_at or last_trial) - first - trials_s - pruned_s

    print()
    print(f"grid:   {len(grid)} configs in {grid_s:.1f} s ({grid_s / len(grid):.1f} s each; {launch})")
    print(f"search: {outcome.complete} trials ({outcome.counts_text()}), budget {args.budget}, "
          f"finals {args.finalists} x {args.repeats} rounds, in {search_s:.1f} s"
          + (f"; stopped early: {outcome.stopped}" if outcome.stopped else ""))
    print(f"search phases: set-up, label cache and ceiling ranking {first - started:.1f} s (ranking {timeline.rank_s:.1f} s); "
          f"{len(timeline.trials)} trials measured "
          f"{trials_s:.1f} s (of which quality probes about {timeline.probe_s:.1f} s, {timeline.fits} cache=ram memory fits of two short trials "
          f"about {timeline.fit_s:.1f} s); {len(timeline.pruned)} trials "
          f"stopped part-way {pruned_s:.1f} s; between trials (sampler, ceiling checks) {between_s:.1f} s; "
          f"finals {finals_s:.1f} s; after the last trial or finals round (ceilings, ablation) {after_s:.1f} s")
    print(f"search wall / grid wall: {ratio:.2f} ({search_s:.1f} s / {grid_s:.1f} s); "
          f"up to the last trial or finals round {(picked_at - started) / grid_s:.2f}; "
          f"without probes {(search_s - timeline.probe_s) / grid_s:.2f}")
    print(f"grid best: {best:.1f} images/s, {_text(best_knobs)}")
    print(f"search pick: {_text(pick.config)} (trial {pick.number}); the search's verdict: {outcome.verdict_text()}")
    print(f"pick in the grid: {pick_speed:.1f} images/s = {share:.2f} of the grid best; rank {rank} of {len(grid)}")
    if base_speed is not None:
        print(f"baseline in the grid: {base_speed:.1f} images/s ({_text(planned.protocol.baseline)}); "
              f"grid best / baseline {best / base_speed:.2f}x, pick / baseline {pick_speed / base_speed:.2f}x")
    print(f"grid spread: {ties} of {len(grid)} configs within {TIES:.0%} of the grid best "
          "(each measured once: within the noise, these are ties)")
    print("grid ranking: " + "; ".join(f"{i + 1}. {_text(k)} {v:.1f}" for i, (k, v) in enumerate(ranking)))
    met = [share >= TARGET_SHARE, ratio <= TARGET_TIME]
    print(f"targets: >= {TARGET_SHARE:.2f} of the grid best: {'met' if met[0] else 'missed'} ({share:.2f}); "
          f"<= {TARGET_TIME:.0%} of the grid time: {'met' if met[1] else 'missed'} ({ratio:.0%})")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, help="search trials, baseline included (default 8; --small 2)")
    parser.add_argument("--steps", type=int, help="measured batches per trial, at least (default 10; --small 3)")
    parser.add_argument("--warmup", type=int, help="warm-up batches (default 3; --small 1)")
    parser.add_argument("--models", help="model values, comma-separated (default yolov5n,yolov5s)")
    parser.add_argument("--imgsz", help="imgsz values, comma-separated (default 96,128,160)")
    parser.add_argument("--batch", help="batch values, comma-separated (default 4,8)")
    parser.add_argument("--cache", help="cache values, comma-separated (default none,ram)")
    parser.add_argument("--train-images", type=int, help="generated train images (default 128; val: an eighth)")
    parser.add_argument("--size", help="generated image size WxH (default 320x240)")
    parser.add_argument("--finalists", type=int, default=1, help="the search's finalists (default 1)")
    parser.add_argument("--repeats", type=int, default=2, help="the search's finals rounds (default 2; 0: no finals)")
    parser.add_argument("--probe-epochs", type=int, default=1)
    parser.add_argument("--probe-fraction", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=100, help="the run the search's probes are priced against: "
                        "a probe trains at most 5%% of it (8 epochs on the full set need --epochs 160 or more)")
    parser.add_argument("--seed", type=int, default=0, help="the search's sampler seed")
    parser.add_argument("--ablation", action="store_true", help="let the search run its ablation after the finals")
    parser.add_argument("--no-stop-at-ceiling", action="store_true", help="the search never stops at a ceiling")
    parser.add_argument("--ceiling-rank", choices=RANK_MODES, default="auto", help="the search's --ceiling-rank (default auto)")
    parser.add_argument("--cold", action="store_true", help="every job of both sides in a fresh Python (default: a warm worker)")
    parser.add_argument("--small", action="store_true", help="a tiny run (4 configs, 2 trials): proves the script works")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (the data, the space file, the study)")
    args = _options(parser.parse_args())
    quiet_optuna()
    try:
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            run(args, Path(args.keep).resolve())
        else:
            with tempfile.TemporaryDirectory(prefix="search-efficiency-") as tmp:
                run(args, Path(tmp))
    except (UsageError, OSError) as exc:
        sys.exit(f"search_efficiency: {exc}")
    except Exception as exc:  # one line, as every benchmark failure: the figures are void
        sys.exit(f"search_efficiency: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
