"""The `speedopt` command line: parse, call the library, print. Nothing else lives here.

Bad input anywhere raises UsageError, which becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from speedopt import __version__
from speedopt.errors import UsageError

TRIAL_EXIT = """exit status: 0 when the trial ran (status ok), 1 when it ended oom, timeout, infeasible or
error (the status and message say why), 2 for bad input."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line (and exit 2) instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="speedopt",
        description="Find the fastest way to train a YOLOv5 detector on this machine, by measuring short "
        "real training trials instead of guessing workers, batch, image size, cache and AMP.",
    )
    parser.add_argument("--version", action="version", version=f"speedopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    demo = sub.add_parser(
        "demo-data",
        help="write a small synthetic YOLO dataset (coloured shapes) to try speedopt on",
        description="Write a synthetic detection dataset in YOLO format (images/, labels/, data.yaml with an "
        "absolute path): coloured circles, squares and triangles on noisy backgrounds, identical for a seed. "
        "Prints the path of its data.yaml.",
    )
    demo.add_argument("dir", nargs="?", default="speedopt-demo", help="output folder (default: ./speedopt-demo)")
    demo.add_argument("--train", type=_int, default=256, help="train images (default 256)")
    demo.add_argument("--val", type=_int, default=64, help="val images (default 64)")
    demo.add_argument("--size", default="640x480", help="image size WxH (default 640x480)")
    demo.add_argument("--seed", type=_int, default=0, help="random seed (default 0)")

    trial = sub.add_parser(
        "trial",
        help="measure ONE short training run of the real trainer with the given knobs",
        description="Train the real trainer for --warmup + --steps batches in an isolated subprocess and report "
        "steady-state images/s (measured steps only), step times, the share of time spent waiting for data, "
        "setup time, peak RAM (with dataloader workers), GPU memory and utilisation, CPU utilisation. "
        "Defaults are the trainer's own defaults. Nothing is downloaded; run folders go to a temporary "
        "folder that is removed.",
        epilog=TRIAL_EXIT,
    )
    trial.add_argument("--data", required=True, help="the dataset's data.yaml (YOLO format)")
    trial.add_argument(
        "--model", default="yolov5s", help="yolov5n|s|m|l|x (built from the architecture yaml) or a local .pt/.yaml"
    )
    trial.add_argument("--imgsz", type=_int, default=640, help="train image size, multiple of 32 (default 640)")
    trial.add_argument("--batch", type=_int, default=16, help="batch size (default 16)")
    trial.add_argument(
        "--workers", type=_int, default=8, help="dataloader workers (default 8; the trainer caps at CPU cores)"
    )
    trial.add_argument("--cache", default="none", choices=("none", "ram", "disk"), help="image cache (default none)")
    trial.add_argument(
        "--amp", default=None, choices=("on", "off"), help="mixed precision (default on with CUDA; off on CPU)"
    )
    trial.add_argument("--freeze", type=_int, default=0, help="freeze the first N layers (default 0)")
    trial.add_argument("--steps", type=_int, default=20, help="measured batches (default 20)")
    trial.add_argument("--warmup", type=_int, default=5, help="warm-up batches, not measured (default 5)")
    trial.add_argument("--device", default=None, help="cpu or a GPU index such as 0 (default: GPU 0 if any, else cpu)")
    trial.add_argument("--timeout", type=float, default=900.0, help="seconds before the trial is killed (default 900)")
    trial.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return parser


def _cmd_demo_data(args: argparse.Namespace) -> int:
    from speedopt import demo_data

    width, height = demo_data.parse_size(args.size)
    spec = demo_data.DemoSpec(train=args.train, val=args.val, width=width, height=height, seed=args.seed)
    print(demo_data.generate(args.dir, spec))
    return 0


def _progress_printer(console):
    """Progress of a running trial: a live status line on a terminal, plain phase lines otherwise."""
    state = {"phase": None}

    def plain(update: dict[str, Any]) -> None:
        phase = update["phase"]
        if phase != state["phase"] or update.get("done") == update.get("of"):
            where = f" {update['done']}/{update['of']}" if "done" in update else ""
            console.print(f"trial: {phase}{where}", highlight=False)
            state["phase"] = phase

    return plain


def _cmd_trial(args: argparse.Namespace) -> int:
    from rich.console import Console

    from speedopt import trial
    from speedopt.knobs import Knobs, parse_bool

    err = Console(stderr=True)
    requested = Knobs(
        model=args.model,
        imgsz=args.imgsz,
        batch=args.batch,
        workers=args.workers,
        cache=args.cache,
        amp=parse_bool(args.amp) if args.amp else True,
        freeze=args.freeze,
    )
    request = trial.prepare(
        args.data,
        requested,
        device=args.device,
        steps=args.steps,
        warmup=args.warmup,
        timeout_s=args.timeout,
    )
    for note in request.notes:
        err.print(f"note: {note}", highlight=False)
    if err.is_terminal:
        with err.status("trial: setup (dataset scan, cache fill, model build)") as status:

            def live(update: dict[str, Any]) -> None:
                where = f" {update['done']}/{update['of']}" if "done" in update else ""
                status.update(f"trial: {update['phase']}{where}")

            result = trial.run(request, progress=live)
    else:
        result = trial.run(request, progress=_progress_printer(err))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from speedopt.render import trial_table

        Console().print(trial_table(result))
    return 0 if result.status.value == "ok" else 1


COMMANDS = {"demo-data": _cmd_demo_data, "trial": _cmd_trial}


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"speedopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"speedopt {args.command}: interrupted", file=sys.stderr)
        return 130
