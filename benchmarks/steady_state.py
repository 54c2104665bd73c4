"""Steady state: does a trial's images/s predict a real run's epochs after its warm-up? (issue 53)

For batch 8 and 32, with SGD and MuSGD: a speed trial (the engine's, as a search runs it: the optimizer the user's
run trains, the trainer's warm-up ended inside the trial's own, a window of whole accumulation cycles), then the real
run (`yolo detect train`, the printed command's entry point) for --epochs epochs, then the trial again, --repeats
times. Each run is compared with the mean of the two trials beside it (the machine's drift over minutes lands on both
sides of a pair), and the cell's error is the median over its runs. The run's
epochs come from its results.csv (seconds between rows, as `speedopt verify` reads them; val=False, so only the last
epoch validates and it is left out). Printed per cell: the trials' images/s with their 90% intervals, the run's
epochs after warm-up (its images/s), what verify's old rule (the median of every epoch, warm-up included) and its new
rule (the epochs after warm-up) read from the same run, and the trial's error against the run's steady state.

SGD: the run names optimizer=SGD, and the trial is asked the same. MuSGD: the trial's schedule is long enough for
optimizer=auto to pick it (ceil(train / max(batch, 64)) x epochs > 10,000 with Ultralytics 8.4); the run gets the
trial's optimizer arguments, as verify passes them to a short run.

    python benchmarks/steady_state.py [--epochs 10] [--repeats 3] [--train 96] [--imgsz 160]

Goal: the trial's images/s within its 90% interval (or 5%) of the run's steady-state epochs, in every cell.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedopt import data, engines, measure
from speedopt.knobs import Knobs

WARMUP_EPOCHS = 3  # the trainer's default warmup_epochs: the run's first 3 epochs ramp accumulation


def trial(demo: str, batch: int, optimizer: str, imgsz: int) -> measure.TrialResult:
    """One speed trial as a search runs it; ``optimizer`` SGD is asked by name, MuSGD by a run long enough for auto."""
    knobs = Knobs(model="yolov5n", imgsz=imgsz, batch=batch, workers=0, amp=False)
    options = measure.TrialOptions(device="cpu", steps=20, warmup=5, max_steps=60)
    epochs = 100 if optimizer == "SGD" else 10_000
    request = measure.make_request(demo, knobs, options, epochs=epochs)
    if optimizer == "SGD":
        request = dataclasses.replace(request, optimizer="SGD")
    result = measure.run_trial(request)
    if not result.ok:
        sys.exit(f"trial failed: {result.message}\n{result.log_tail}")
    if result.optimizer != optimizer:
        sys.exit(f"the trial trained {result.optimizer}, not {optimizer}")
    return result


def run(demo: str, batch: int, optimizer_args: tuple[str, ...], imgsz: int, epochs: int, work: Path) -> list[float]:
    """The real run for ``epochs``; each epoch's seconds from its results.csv (the last one validates: dropped)."""
    yolo = Path(sys.executable).parent / "yolo"
    argv = [str(yolo), "detect", "train", f"data={demo}", "model=yolov5n.yaml", f"imgsz={imgsz}", f"batch={batch}",
            "workers=0", "amp=False", "device=cpu", f"epochs={epochs}", "close_mosaic=0", "val=False", "save=False",
            "plots=False", "seed=0", f"project={work}", "name=run", "exist_ok=True", *optimizer_args]
    cache = work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **engines.get("ultralytics").environment(cache)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the run failed: {' '.join(argv)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    with open(work / "run" / "results.csv") as f:
        rows = [{k.strip(): v.strip() for k, v in row.items()} for row in csv.DictReader(f)]
    times = [0.0, *(float(r["time"]) for r in rows)]
    return [b - a for a, b in itertools.pairwise(times)][: epochs - 1]


def cell(demo: str, train: int, batch: int, optimizer: str, imgsz: int, epochs: int, repeats: int, work: Path) -> dict[str, object]:
    """Trial, then (run, trial) ``repeats`` times, interleaved: the machine's drift lands on both sides alike."""
    trials = [trial(demo, batch, optimizer, imgsz)]
    args = ("optimizer=SGD",) if optimizer == "SGD" else trials[0].optimizer_args
    runs: list[list[float]] = []
    for i in range(repeats):
        runs.append(run(demo, batch, args, imgsz, epochs, work / f"{optimizer}-{batch}-{i}"))
        trials.append(trial(demo, batch, optimizer, imgsz))
    steady = [s for epoch_s in runs for s in epoch_s[WARMUP_EPOCHS:]]
    run_ips = train / statistics.median(steady)
    # Each run against the mean of the trials just before and after it: the machine's drift over minutes (this one
    # is noisy) lands on both sides of each pair; the cell's error is the median over its pairs.
    pairs = [statistics.fmean([trials[i].images_per_s or 0.0, trials[i + 1].images_per_s or 0.0])
             / (train / statistics.median(epoch_s[WARMUP_EPOCHS:])) - 1 for i, epoch_s in enumerate(runs)]
    error = statistics.median(pairs)
    ci = max(t.ci_rel or 0.0 for t in trials)
    return {
        "batch": batch, "optimizer": optimizer, "args": " ".join(args),
        "trials": ", ".join(f"{t.images_per_s:.2f} +/-{100 * (t.ci_rel or 0):.1f}% ({t.steps} steps, every {t.accumulate})"
                            for t in trials),
        "step": statistics.fmean(t.optimizer_step_s or 0.0 for t in trials),
        "epochs": " / ".join(", ".join(f"{s:.2f}" for s in epoch_s) for epoch_s in runs),
        "run": run_ips, "old": train / statistics.median(s for epoch_s in runs for s in epoch_s), "new": run_ips,
        "pairs": ", ".join(f"{100 * p:+.1f}%" for p in pairs), "error": error, "met": abs(error) <= max(ci, 0.05),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10, help="the real run's epochs (>= 5: 3 of warm-up, 1+ steady, 1 validating)")
    parser.add_argument("--train", type=int, default=96, help="train images (the demo photos' count)")
    parser.add_argument("--imgsz", type=int, default=160)
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--repeats", type=int, default=3, help="real runs per cell, each followed by a trial")
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        # The demo photos' scenes and counts, written at the size the resized copy at imgsz 160 holds (their 1920x1080
        # decode is not what this measures: the optimizer and its cadence are).
        demo = str(data.generate(f"{tmp}/photos", data.DemoSpec(train=args.train, val=16, width=284, height=160)))
        rows = []
        for batch in (int(b) for b in args.batches.split(",")):
            for optimizer in ("SGD", "MuSGD"):
                print(f"batch {batch} {optimizer} ...", flush=True)
                rows.append(cell(demo, args.train, batch, optimizer, args.imgsz, args.epochs, args.repeats, Path(tmp)))
    print()
    print("| batch | optimizer | trials: images/s +/- 90% CI (window, batches per step) | optimizer step s | run epochs s "
          "(per run; last: validates, left out) | run steady images/s | verify old (all epochs) | verify new (after warm-up) | "
          "trial error per run (trials beside it) | median | within CI or 5% |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['optimizer']} | {r['trials']} | {r['step']:.3f} | {r['epochs']} | {r['run']:.2f} | "
              f"{r['old']:.2f} | {r['new']:.2f} | {r['pairs']} | {100 * float(r['error']):+.1f}% | "  # type: ignore[arg-type]
              f"{'yes' if r['met'] else 'NO'} |")
    met = sum(bool(r["met"]) for r in rows)
    print(f"\ngoal: every cell's trial within its interval or 5% of the run's steady epochs: {met} of {len(rows)} "
          f"({'met' if met == len(rows) else 'NOT met'}); {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
