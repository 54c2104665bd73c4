"""Trial overhead: how much of a trial's wall time is measurement, and how much is the isolation
(process start, imports, trainer and dataset set-up) speedopt pays for clean numbers.

Runs REPEATS real trials of one config on a generated demo dataset, side by side in one run, and
prints wall time, set-up time, measured time and the images/s spread (min, median, max).

    python benchmarks/trial_overhead.py [--repeats 3] [--steps 10] [--imgsz 160]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import speedopt
from speedopt import data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--imgsz", type=int, default=160)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        demo = data.generate(f"{tmp}/demo", data.DemoSpec(train=128, val=16, width=320, height=240))
        knobs = speedopt.Knobs(model="yolov5n", imgsz=args.imgsz, batch=8, workers=2)
        rows = []
        for _ in range(args.repeats):
            started = time.monotonic()
            result = speedopt.trial(str(demo), knobs, device="cpu", steps=args.steps, warmup=args.warmup)
            if not result.ok:
                raise SystemExit(f"trial ended {result.status.value}: {result.message}")
            rows.append((time.monotonic() - started, result))
    print(f"{'wall s':>8} {'setup s':>8} {'measured s':>10} {'images/s':>9} {'overhead':>9}")
    for wall, r in rows:
        print(f"{wall:8.1f} {r.setup_s:8.1f} {r.measured_s:10.2f} {r.images_per_s:9.1f} {1 - r.measured_s / wall:9.0%}")
    speeds = sorted(r.images_per_s for _, r in rows)
    print(
        f"images/s min {speeds[0]:.1f}, median {statistics.median(speeds):.1f}, max {speeds[-1]:.1f} "
        f"(spread {100 * (speeds[-1] - speeds[0]) / statistics.median(speeds):.0f}% of the median); "
        f"mean overhead {statistics.mean(1 - r.measured_s / w for w, r in rows):.0%} of each trial's wall time"
    )


if __name__ == "__main__":
    main()
