"""`speedopt trial`: measure one short training run of the real trainer."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable

from rich.console import Console

import speedopt
from speedopt.cli._options import add_knobs, add_measurement, knobs_of, trial_options
from speedopt.cli._render import trial_table
from speedopt.measure import TrialProgress

NAME = "trial"
EXIT = """exit status: 0 when the trial ran (status ok), 1 when it ended oom, timeout, infeasible or
error (the status and message say why), 2 for bad input."""


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="measure ONE short training run of the real trainer with the given knobs",
        description="Train the real trainer for --warmup + --steps batches in an isolated subprocess and report "
        "steady-state images/s (measured steps only), step times, the share of time spent waiting for data, "
        "setup time, peak RAM (with dataloader workers), GPU memory and utilisation, CPU utilisation. "
        "Defaults are the trainer's own defaults. Nothing is downloaded; run folders go to a temporary "
        "folder that is removed.",
        epilog=EXIT,
    )
    add_knobs(parser, own=True)
    add_measurement(parser, "--timeout")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(run=run)


def _printer(console: Console) -> Callable[[TrialProgress], None]:
    """Plain phase lines for a log or a pipe: one per phase, and the last step of each."""
    state: dict[str, str | None] = {"phase": None}

    def plain(update: TrialProgress) -> None:
        if update.phase != state["phase"] or update.done == update.of:
            console.print(f"trial: {update.text()}", highlight=False)
            state["phase"] = update.phase

    return plain


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    knobs = knobs_of(args)  # --gpus too: its registry flag
    options = dict(
        **dataclasses.asdict(trial_options(args, args.timeout)),
        on_note=lambda note: err.print(f"note: {note}", highlight=False),
        on_wait=lambda message: err.print(f"trial: {message}", highlight=False),
    )
    if err.is_terminal:
        with err.status("trial: setup (dataset scan, cache fill, model build)") as status:
            result = speedopt.trial(args.data, knobs, progress=lambda u: status.update(f"trial: {u.text()}"), **options)
    else:
        result = speedopt.trial(args.data, knobs, progress=_printer(err), **options)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        Console().print(trial_table(result))
    return 0 if result.ok else 1
