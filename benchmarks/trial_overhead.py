"""Trial overhead: how much of a trial's wall time is measurement, and how much is the isolation
(process start, imports, trainer and dataset set-up) speedopt pays for clean numbers; cold and warm.

Runs REPEATS rounds of one config on a generated demo dataset, each round a cold trial (a fresh
Python imports torch and the trainer) and a warm one (forked from a warm worker that imported them
once: what a search does, see speedopt.measure._warm), side by side in one run. Prints each trial's
wall time (parent's view: start of the job to its end), set-up, measured time and fixed cost (wall -
measured), then per mode the fixed cost as a share of the wall time and the images/s spread, and the
paired warm/cold images/s ratio per round (the same config must measure the same within the noise).

    python benchmarks/trial_overhead.py [--repeats 3] [--steps 20] [--imgsz 128]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
from collections.abc import Sequence

import speedopt
from speedopt import data, engines
from speedopt.measure import TrialOptions, TrialResult, make_request, run_trial, warm_worker
from speedopt.offline import cache_dir


def _line(mode: str, r: TrialResult) -> str:
    wall, measured = r.wall_s or 0.0, r.measured_s or 0.0
    return f"{mode:>5} {wall:8.2f} {r.setup_s or 0:8.2f} {measured:10.2f} {wall - measured:8.2f} {r.images_per_s or 0:9.1f} {1 - measured / wall:7.0%}"


def _summary(mode: str, results: Sequence[TrialResult]) -> str:
    speeds = sorted(r.images_per_s or 0.0 for r in results)
    fixed = [1 - (r.measured_s or 0.0) / (r.wall_s or 1.0) for r in results]
    return (
        f"{mode}: fixed cost {statistics.mean((r.wall_s or 0) - (r.measured_s or 0) for r in results):.2f} s per trial, "
        f"{statistics.mean(fixed):.0%} of its wall time; images/s min {speeds[0]:.1f}, median {statistics.median(speeds):.1f}, "
        f"max {speeds[-1]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--imgsz", type=int, default=128)
    args = parser.parse_args()
    env = engines.get("ultralytics").environment(cache_dir())
    with tempfile.TemporaryDirectory() as tmp:
        demo = data.generate(f"{tmp}/demo", data.DemoSpec(train=128, val=16, width=320, height=240))
        knobs = speedopt.Knobs(model="yolov5n", imgsz=args.imgsz, batch=8, workers=0, amp=False)
        request = make_request(str(demo), knobs, TrialOptions(device="cpu", steps=args.steps, warmup=args.warmup, max_steps=args.steps))
        rows: list[tuple[str, TrialResult]] = []
        with warm_worker("ultralytics", None, env) as worker:
            if worker is None:
                raise SystemExit("the warm worker did not start")
            for _ in range(args.repeats):
                for mode in ("cold", "warm"):
                    with warm_worker("ultralytics", None, env, enabled=False) if mode == "cold" else contextlib.nullcontext():
                        result = run_trial(request)
                    if not result.ok:
                        raise SystemExit(f"{mode} trial ended {result.status.value}: {result.message}")
                    rows.append((mode, result))
            started = worker.started_s
    print(f"{'mode':>5} {'wall s':>8} {'setup s':>8} {'measured s':>10} {'fixed s':>8} {'images/s':>9} {'fixed':>7}")
    for mode, r in rows:
        print(_line(mode, r))
    colds = [r for m, r in rows if m == "cold"]
    warms = [r for m, r in rows if m == "warm"]
    print(_summary("cold", colds))
    print(_summary("warm", warms) + f" (the worker took {started:.1f} s to start, once per search)")
    ratios = [(w.images_per_s or 0) / (c.images_per_s or 1) for c, w in zip(colds, warms, strict=True)]
    print(
        f"warm/cold images/s per round: {', '.join(f'{x:.3f}' for x in ratios)} (median {statistics.median(ratios):.3f}); "
        f"fixed cost saved per trial {statistics.mean((c.wall_s or 0) - (w.wall_s or 0) for c, w in zip(colds, warms, strict=True)):.2f} s"
    )



if __name__ == "__main__":
    main()
