"""Truth: does the real run reproduce what speedopt predicted? A small study, then `verify` on it.

Runs a 2-config study (the README demo's baseline and one other cache mode, quality off, with finals)
on a generated dataset, then runs the recommended command itself through the trainer's own entry
point for --epochs epochs (speedopt verify) and prints predicted vs measured epoch time and images/s
with the error. Goal: error within 10%.

    python benchmarks/truth.py [--epochs 2] [--repeats 2]
    python benchmarks/truth.py --engine yolov5 --workers 2 --size 1920x1080 --format png --train 120   # data-bound
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import speedopt
from speedopt import data, defaults
from speedopt.cli._options import quiet_optuna
from speedopt.knobs import knobs_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=defaults.STEPS)
    parser.add_argument("--engine", default="ultralytics", choices=("ultralytics", "yolov5"))
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--train", type=int, default=256)
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--format", default="jpg", choices=data.FORMATS)
    args = parser.parse_args()
    quiet_optuna()
    width, height = data.parse_size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"generating {args.train} {args.format} images of {width}x{height} ...", flush=True)
        demo = data.generate(f"{tmp}/demo", data.DemoSpec(train=args.train, val=64, width=width, height=height, format=args.format))
        space = Path(tmp) / "space.yaml"
        space.write_text("cache: [none, ram]\n")
        storage = f"sqlite:///{tmp}/truth.db"
        outcome = speedopt.search(
            str(demo), trials=2, storage=storage, study="truth", quality="off", space_file=str(space), device="cpu",
            engine=args.engine, baseline=f"model=yolov5n imgsz=320 batch=8 workers={args.workers}", steps=args.steps,
            repeats=args.repeats, finalists=1,
        )
        for r in outcome.trials:
            print(f"trial {r.number}: {knobs_text(r.config)}: "
                  f"{r.images_per_s or 0:.2f} images/s (+/-{100 * (r.result.ci_rel or 0):.1f}%, {r.result.steps} steps)")
        print(f"decision: {outcome.verdict_text()}", flush=True)
        checked = speedopt.verify("truth", storage=storage, epochs=args.epochs, progress=lambda t: print(f"verify: {t}", flush=True))
        print("\n".join(checked.lines()))
        error = checked.epoch_error
        if error is None:
            print(f"no epoch measured ({checked.status.value}): no error to report")
        else:
            print(f"epoch time error {100 * error:+.1f}%: {'within' if abs(error) <= 0.10 else 'OUTSIDE'} the 10% goal")



if __name__ == "__main__":
    main()
