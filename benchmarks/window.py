"""Window: the default adaptive window against a window five times longer, on a data-bound set.

Generates large PNG images (1920x1080 by default: slow to decode, as camera images are) and measures
one data-bound config with the default protocol (warm-up past the prefetch queue, at least --steps
and up to 3 x --steps measured steps until the mean step time is known to +/-5%) and with a fixed
window five times the default's minimum, alternating (default, long, default, long), and prints
each images/s with its reported interval and whether the long window's figure lies inside it.

The classic engine is the default here: on CPU `yolo detect train` runs 0 workers whatever it is
asked, and the prefetch queue only exists with workers (python train.py honours them).

    python benchmarks/window.py [--engine yolov5] [--pairs 2] [--images 120] [--size 1920x1080]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import speedopt
from speedopt import data, defaults
from speedopt.knobs import knobs_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", default="yolov5", choices=("yolov5", "ultralytics"))
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--images", type=int, default=120)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=defaults.STEPS)
    args = parser.parse_args()
    width, height = data.parse_size(args.size)
    knobs = speedopt.Knobs(model="yolov5n", imgsz=320, batch=8, workers=args.workers if args.engine == "yolov5" else 0, amp=False)
    long_steps = 5 * args.steps
    with tempfile.TemporaryDirectory() as tmp:
        print(f"generating {args.images} PNG images of {width}x{height} ...", flush=True)
        demo = data.generate(f"{tmp}/big", data.DemoSpec(train=args.images, val=8, width=width, height=height, format="png"))
        rows = []
        for pair in range(args.pairs):
            for label, steps, most in (("default", args.steps, None), (f"{long_steps} steps", long_steps, long_steps)):
                r = speedopt.trial(str(demo), knobs, device="cpu", engine=args.engine, steps=steps, max_steps=most)
                if not r.ok:
                    raise SystemExit(f"{label} ended {r.status.value}: {r.message}")
                rows.append((pair, label, r))
                ci = r.ci_rel or 0.0
                print(f"pair {pair + 1} {label:>10}: {r.images_per_s:.2f} images/s, 90% CI +/-{100 * ci:.1f}% "
                      f"({r.steps} steps after {r.warmup} warm-up batches, data wait {100 * (r.data_wait_fraction or 0):.0f}%)",
                      flush=True)
    per_epoch = -(-args.images // knobs.batch)
    print(f"engine {args.engine}, {knobs_text(knobs)}; {per_epoch} batches per epoch:")
    for pair, label, r in rows:
        _trace(pair, label, r, per_epoch)
    for pair in range(args.pairs):
        (_, _, short), (_, _, long) = [row for row in rows if row[0] == pair]
        diff = (short.images_per_s or 0) / (long.images_per_s or 1) - 1
        inside = abs(diff) <= (short.ci_rel or 0.0)
        print(f"pair {pair + 1}: default window {short.images_per_s:.2f} images/s (+/-{100 * (short.ci_rel or 0):.1f}%, "
              f"{short.steps} steps) vs {long.steps} steps {long.images_per_s:.2f}: default reads {100 * diff:+.1f}%, "
              f"{'inside' if inside else 'OUTSIDE'} its reported interval")


def _trace(pair: int, label: str, r: speedopt.TrialResult, per_epoch: int) -> None:
    """Where the time goes inside a window: its first and last 20 steps, and the steps that cross an epoch end."""
    steps = list(r.step_s)
    if len(steps) < 40:
        return
    first, last = statistics.fmean(steps[:20]), statistics.fmean(steps[-20:])
    crossing = [s for i, s in enumerate(steps) if (r.warmup or 0) + i + 1 > per_epoch and ((r.warmup or 0) + i) % per_epoch == 0]
    inside = [s for i, s in enumerate(steps) if ((r.warmup or 0) + i) % per_epoch != 0]
    extra = (statistics.fmean(crossing) - statistics.fmean(inside)) if crossing else 0.0
    print(f"  pair {pair + 1} {label}: mean step of the first 20 {first:.3f} s, of the last 20 {last:.3f} s ({100 * (last / first - 1):+.1f}%); "
          f"{len(crossing)} epoch-end steps take {extra:+.3f} s more than the others ({statistics.fmean(inside):.3f} s)")


if __name__ == "__main__":
    main()
