"""`speedopt report` and `speedopt best`: what a study found, for people and for scripts."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

import speedopt
from speedopt import defaults
from speedopt.cli._options import MAX_EPOCHS, add_storage, add_study, integer
from speedopt.study import quiet_optuna


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = sub.add_parser(
        "report",
        help="write reports/<study>.md with figures: baseline vs recommended, projection, bottlenecks",
        description="Write a markdown report of a study, with PNG figures in a folder beside it and the trial table "
        "as <study>.csv: machine and dataset, baseline vs recommended, the projected wall time of the full run (an "
        "estimate: measured throughput, dataset build and one timed validation pass), the recommended command, "
        "every trial, the bottleneck of each trial in numbers, and parameter importance.",
    )
    add_storage(report)
    add_study(report)
    report.add_argument("--out", default=defaults.REPORTS_DIR, help=f"output folder (default {defaults.REPORTS_DIR}/)")
    report.add_argument("--epochs", type=integer(1, MAX_EPOCHS), default=defaults.EPOCHS, help=f"epochs of the full run to project (default {defaults.EPOCHS}, the trainer's)")
    report.set_defaults(run=run_report)

    best = sub.add_parser("best", help="print only the recommended config, for scripts")
    add_storage(best)
    add_study(best)
    best.add_argument("--format", default="cli", choices=("cli", "python", "json", "yaml"), help="output form (default cli)")
    best.add_argument("--epochs", type=integer(1, MAX_EPOCHS), default=None, help="add epochs=E to the command")
    best.set_defaults(run=run_best)


def run_report(args: argparse.Namespace) -> int:
    quiet_optuna()
    written = speedopt.report(args.study, storage=args.storage, epochs=args.epochs, out_dir=args.out)
    print(written.markdown)
    return 0


def run_best(args: argparse.Namespace) -> int:
    quiet_optuna()
    rec = speedopt.best(args.study, storage=args.storage)
    if args.format in ("cli", "python"):  # stdout stays the command alone; the claim goes to stderr
        print(f"# trial {rec.trial.number}: {rec.verdict}; accuracy {rec.accuracy}", file=sys.stderr)
    if args.format == "cli":
        print(rec.command_line(args.epochs))
    elif args.format == "python":
        print(rec.python(args.epochs))
    elif args.format == "json":
        print(json.dumps(rec.to_dict(), indent=2))
    else:
        print(yaml.safe_dump(rec.to_dict(), sort_keys=False), end="")
    return 0
