"""Noise: how far apart one config measures from itself, and the smallest speedup speedopt can certify here.

Measures config A (the README demo's baseline) and config B (A with another cache mode) N times each,
interleaved (A, B, A, B, ...) with the default protocol (adaptive window), on a generated demo
dataset, and prints:

- each config's images/s in every run, its spread (max-min over the median) and coefficient of variation;
- the paired ratios B/A per round and their scatter (standard deviation of the log ratio);
- the smallest speedup the default finals (3 rounds, claimed only when the min-max interval of the
  paired ratios lies above 1.0) certify 9 times in 10 on this machine: an estimate from that scatter,
  exp(z * sd) with P(one ratio > 1) = 0.9^(1/3) per round (log ratios taken as normal).

    python benchmarks/noise.py [--runs 5] [--steps 20] [--imgsz 320]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from statistics import NormalDist

import speedopt
from speedopt import data, defaults
from speedopt.knobs import knobs_text


def _line(name: str, speeds: list[float]) -> str:
    median = statistics.median(speeds)
    cv = statistics.stdev(speeds) / statistics.fmean(speeds)
    runs = " ".join(f"{s:.2f}" for s in speeds)
    return f"{name}: {runs} images/s; median {median:.2f}, spread {100 * (max(speeds) - min(speeds)) / median:.0f}%, CV {100 * cv:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measurements of each config (default 5)")
    parser.add_argument("--steps", type=int, default=defaults.STEPS)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=defaults.REPEATS, help="finals rounds the estimate is for")
    args = parser.parse_args()
    base = speedopt.Knobs(model="yolov5n", imgsz=args.imgsz, batch=8, workers=0, cache="none", amp=False)
    other = speedopt.Knobs(model="yolov5n", imgsz=args.imgsz, batch=8, workers=0, cache="ram", amp=False)
    speeds: dict[str, list[float]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        demo = data.generate(f"{tmp}/demo", data.DemoSpec())
        for run in range(args.runs):
            for name, knobs in (("A", base), ("B", other)):
                r = speedopt.trial(str(demo), knobs, device="cpu", steps=args.steps)
                if not r.ok:
                    raise SystemExit(f"{name} run {run + 1} ended {r.status.value}: {r.message}")
                speeds[name].append(r.images_per_s or 0.0)
                ci = f"+/-{100 * r.ci_rel:.1f}%" if r.ci_rel is not None else "-"
                print(f"run {run + 1} {name} ({knobs_text(knobs)}): {r.images_per_s:.2f} images/s over "
                      f"{r.steps} steps (90% CI of the mean step {ci})", flush=True)
    print(_line("A " + knobs_text(base), speeds["A"]))
    print(_line("B " + knobs_text(other), speeds["B"]))
    ratios = [b / a for a, b in zip(speeds["A"], speeds["B"])]
    logs = [math.log(x) for x in ratios]
    sd = statistics.stdev(logs)
    print("paired ratios B/A: " + " ".join(f"{x:.3f}" for x in ratios) + f"; sd of log ratio {sd:.3f}")
    per_round = 0.9 ** (1 / args.rounds)
    smallest = math.exp(NormalDist().inv_cdf(per_round) * sd)
    print(f"smallest speedup certified 9 times in 10 by {args.rounds} finals rounds here (estimate from the "
          f"paired-ratio scatter above): {smallest:.2f}x")


if __name__ == "__main__":
    main()
