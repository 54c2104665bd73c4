"""`speedopt verify`: run the recommended command for real and compare its epochs with the prediction."""

from __future__ import annotations

import argparse
import sys

import speedopt
from speedopt.cli._options import MAX_EPOCHS, add_storage, add_study, fraction, integer, seconds
from speedopt.study import quiet_optuna

NAME = "verify"
EXIT = """exit status: 0 when the run ended ok, 1 when it ended oom, timeout or error (the status and
message say why), 2 for bad input (no such study, no recommendation yet, a bad option)."""


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="run the recommended command for real and compare measured with predicted epoch time",
        description="Run the study's recommended training command itself, exactly as printed (`yolo detect train ...`, "
        "or `python train.py ...` for a classic yolov5 study) plus epochs=E (and, for Ultralytics, close_mosaic=0 and the "
        "optimizer the full run would pick, so a short run trains as the full run's epochs and the trials did), in a "
        "temporary run folder that is removed, "
        "offline and under the host measurement lock. Each epoch's time is read from the trainer's own results.csv and "
        "compared with the study's prediction (train images / measured images/s + one timed validation pass). The "
        "result is stored in the study and shown in `speedopt report`.",
        epilog=EXIT,
    )
    add_storage(parser)
    add_study(parser)
    parser.add_argument(
        "--epochs", type=integer(1, MAX_EPOCHS), default=1,
        help="epochs to train (default 1; the median of the epochs after the trainer's warm-up is compared)",
    )
    parser.add_argument(
        "--yolov5-dir", default=None, metavar="PATH",
        help="your clone of ultralytics/yolov5, for a classic study (an imported study's own checkout is never run)",
    )
    parser.add_argument(
        "--fraction", type=fraction(low_open=True), default=None, metavar="F",
        help="train on the leading fraction F of the train set, in (0, 1] (default: all of it)",
    )
    parser.add_argument(
        "--timeout", type=seconds, default=None, metavar="S",
        help="seconds before the run is stopped (default: 3x the predicted time + 300 s)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    quiet_optuna()

    def say(text: str) -> None:
        print(f"verify: {text}", file=sys.stderr, flush=True)

    result = speedopt.verify(
        args.study, storage=args.storage, epochs=args.epochs, fraction=args.fraction, timeout_s=args.timeout,
        progress=say, on_wait=say, yolov5_dir=args.yolov5_dir,
    )
    print("\n".join(result.lines()))
    return 0 if result.ok else 1
