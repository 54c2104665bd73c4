"""`speedopt ceilings`: how fast one config could go at all, data side and compute side."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from rich.console import Console

import speedopt
from speedopt.cli._options import add_knobs, add_measurement, knobs_of, trial_options
from speedopt.measure import TrialProgress

NAME = "ceilings"
EXIT = """exit status: 0 when both ceilings (and the trial, with --trial) measured ok, 1 when one ended oom,
timeout, infeasible or error (its line says why), 2 for bad input."""


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="measure a config's two upper bounds: its data loader alone, and its model's steps alone",
        description="Two short jobs of the real trainer, set up exactly as for training. Data ceiling: images/s "
        "that the trainer's own train loader delivers (same workers, cache, imgsz, batch, augmentation), drained with "
        "no model step. Compute ceiling: images/s of the trainer's own forward + backward + optimizer steps (same "
        "model, imgsz, batch, AMP, freeze) on one batch kept on the device, no loader. A training run cannot beat "
        "min(data, compute); the lower one binds: buy data speed (workers, cache, a resized copy) when data binds, "
        "compute speed (AMP, a smaller model or image size, frozen layers) when compute binds. --trial measures the "
        "config's full trial too and says how close it gets. Ceilings run on one GPU.",
        epilog=EXIT,
    )
    add_knobs(parser)
    add_measurement(parser, "--timeout")
    parser.add_argument("--trial", action="store_true", help="also measure the full trial of the config, and its share of min(ceilings)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    said: dict[str, str | None] = {"job": None}

    def progress(update: TrialProgress) -> None:
        if update.job != said["job"]:
            err.print(f"ceilings: {update.job}: {update.text()}", highlight=False)
            said["job"] = update.job

    found, trial = speedopt.ceilings(
        args.data, knobs_of(args), **dataclasses.asdict(trial_options(args, args.timeout)), with_trial=args.trial, progress=progress,
        on_note=lambda note: err.print(f"note: {note}", highlight=False),
        on_wait=lambda message: err.print(f"ceilings: {message}", highlight=False),
    )
    figure = trial.images_per_s if trial is not None and trial.ok else None
    if args.json:
        out: dict[str, Any] = {
            "data": found.data.to_dict() if found.data else None,
            "compute": found.compute.to_dict() if found.compute else None,
            "bound": found.bound, "binding": found.binding,
        }
        if trial is not None:
            out.update(trial=trial.to_dict(), share=found.share(figure), fault=found.fault(figure, trial.ci_rel))
        print(json.dumps(out, indent=2))
    else:
        for line in found.lines(figure, trial.ci_rel if trial is not None else None):
            print(line)
        if trial is not None and not trial.ok:
            print(f"trial not measured ({trial.status.value}: {trial.message})")
    ok = found.bound is not None and (trial is None or trial.ok)
    return 0 if ok else 1
