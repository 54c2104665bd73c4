"""Truth: does the real run reproduce what speedopt predicted? A small study, then `verify` on it.

Runs a 2-config study (the README demo's baseline and one other cache mode, quality off, with finals)
on a generated dataset, then runs the recommended command itself through the trainer's own entry
point for --epochs epochs (speedopt verify) and prints predicted vs measured epoch time and images/s
with the error. Goal: error within 10%.

    python benchmarks/truth.py [--epochs 2] [--repeats 2]
    python benchmarks/truth.py --engine yolov5 --workers 2 --size 1920x1080 --format png --train 120   # data-bound

Three ways (issue 29): one workers>0 config and its workers=0 twin, each measured cold (a fresh
Python per trial: `speedopt trial`), warm (forked from the warm worker: a search's trials and finals)
and for real (the printed `python train.py` for 3 epochs with --noval; epoch 2, whole and steady, gives
its images/s), interleaved over --rounds, on the demo photos (96 train images of 1920x1080 JPEG). Prints
each measurement, the three workers-N / workers-0 ratios side by side, and both configs' ceilings beside
their trials (a trial above its ceiling is a measurement fault). The real run needs a clone of
ultralytics/yolov5: the yolov5 package's train.py fails at its first validation with numpy >= 2.4.

    python benchmarks/truth.py --three-way --yolov5-dir ~/yolov5 [--workers 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import speedopt
from speedopt import data, defaults
from speedopt.knobs import knobs_text
from speedopt.study import quiet_optuna


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
    parser.add_argument("--three-way", action="store_true", help="cold, warm and real, for --workers and its workers=0 twin")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--yolov5-dir", default=None)
    args = parser.parse_args()
    quiet_optuna()
    if args.three_way:
        three_way(args.workers or 2, args.rounds, args.yolov5_dir)
        return
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



def _real(data_yaml: str, knobs: speedopt.Knobs, yolov5_dir: str, work: Path) -> float | None:
    """images/s of the printed command run for real: epoch 2 of 3 (--noval: no validation in it)."""
    from speedopt import engines
    from speedopt.command import train_py
    from speedopt.offline import cache_dir
    from speedopt.reporting import Launch

    words = train_py(data_yaml, knobs, device="cpu", epochs=3).split()
    argv = [sys.executable, str(Path(yolov5_dir) / "train.py"), *[w.strip("'") for w in words[2:]], "--noval",
            "--project", str(work / "runs"), "--name", "real", "--exist-ok"]
    env = {**os.environ, **engines.get("yolov5", yolov5_dir=yolov5_dir).environment(cache_dir()), "PYTHONUNBUFFERED": "1"}
    seen = Launch(argv, "", work / "runs" / "real" / "results.csv", 0, ()).run(work, env, 3, 900)
    epochs = seen.epoch_times()
    if seen.returncode != 0 or len(epochs) < 2:
        print(f"  the real run failed (exit {seen.returncode}): {seen.log_tail[-300:]}")
        return None
    return len(data.load(data_yaml).train_images) / epochs[1]


def three_way(workers: int, rounds: int, yolov5_dir: str | None) -> None:
    """Cold, warm and real images/s of workers=N and its workers=0 twin, interleaved; ratios; ceilings beside."""
    import contextlib
    import statistics

    from speedopt import engines
    from speedopt.measure import Ceilings, TrialOptions, make_request, measure_ceilings, run_trial, warm_worker
    from speedopt.offline import cache_dir

    if yolov5_dir is None:
        raise SystemExit("--three-way needs --yolov5-dir (a clone of ultralytics/yolov5) for the real runs")
    opts = TrialOptions(device="cpu", engine="yolov5", yolov5_dir=yolov5_dir)
    configs = {w: speedopt.Knobs(model="yolov5n", imgsz=160, batch=8, workers=w, cache="none", amp=False) for w in (workers, 0)}
    figures: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        demo = str(data.generate(f"{tmp}/photos", data.PHOTOS))
        env = engines.get("yolov5", yolov5_dir=yolov5_dir).environment(cache_dir())
        with warm_worker("yolov5", yolov5_dir, env):
            for rnd in range(rounds):
                for w, knobs in configs.items():
                    for way in ("cold", "warm", "real"):
                        if way == "real":
                            speed, text = _real(demo, knobs, yolov5_dir, Path(tempfile.mkdtemp(dir=tmp))), "epoch 2 of 3"
                        else:
                            with warm_worker("yolov5", yolov5_dir, env, enabled=False) if way == "cold" else contextlib.nullcontext():
                                r = run_trial(make_request(demo, knobs, opts))
                            speed = r.images_per_s if r.ok else None
                            text = f"+/-{100 * (r.ci_rel or 0):.1f}%, {r.steps} steps, {getattr(r, 'torch_threads', None)} torch threads"
                        print(f"round {rnd + 1} workers={w} {way}: {speed or 0:.2f} images/s ({text})", flush=True)
                        if speed:
                            figures.setdefault((w, way), []).append(speed)
            print(f"\n| path | workers={workers} images/s | workers=0 images/s | ratio (median of rounds) |\n|---|---|---|---|")
            for way in ("cold", "warm", "real"):
                a, b = figures.get((workers, way), []), figures.get((0, way), [])
                ratios = [x / y for x, y in zip(a, b, strict=False)]
                print(f"| {way} | {' '.join(f'{x:.2f}' for x in a)} | {' '.join(f'{x:.2f}' for x in b)} | "
                      f"{statistics.median(ratios) if ratios else 0:.2f}x ({', '.join(f'{x:.2f}' for x in ratios)}) |")
            print("\nceilings beside the trials (warm):")
            for _w, knobs in configs.items():
                found: Ceilings = measure_ceilings(knobs, lambda k: make_request(demo, k, opts), run_trial)
                trial = run_trial(make_request(demo, knobs, opts))
                fault = found.fault(trial.images_per_s, trial.ci_rel) if hasattr(found, "fault") else None
                print(f"{knobs_text(knobs)}: trial {trial.images_per_s or 0:.2f} images/s (+/-{100 * (trial.ci_rel or 0):.1f}%); "
                      f"{'; '.join(c.text() for c in (found.data, found.compute) if c is not None)}; "
                      f"{fault or f'{100 * (found.share(trial.images_per_s) or 0):.0f}% of min(ceilings): holds'}", flush=True)


if __name__ == "__main__":
    main()
