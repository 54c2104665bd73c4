"""`speedopt doctor`: the pre-flight, one line per check, before any trial runs."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from speedopt import doctor
from speedopt.cli._options import integer, seconds
from speedopt.engines import DEFAULT, NAMES
from speedopt.knobs import MAX_BATCH, MAX_IMGSZ, Knobs, max_workers, validate

NAME = "doctor"
EXIT = """exit status: 0 when no check failed (warnings included), 1 when one failed (a run would crash, or train
on the CPU without saying so), 2 for bad input."""
_STYLE = {doctor.Level.OK: "green", doctor.Level.WARN: "yellow", doctor.Level.FAIL: "bold red"}


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="check this machine and dataset for what makes training slow or wrong, before any trial",
        description="One line per check, ok / warn / fail, with what was found and what to do: torch's CUDA build "
        "against the NVIDIA driver (training that would quietly fall back to the CPU), the GPUs torch sees and "
        "CUDA_VISIBLE_DEVICES, the device, CPU cores against the workers the trainers would start, the CPUs a loader "
        "worker may run on (the affinity it inherits), /dev/shm against what the loader workers hold (too small: "
        "'DataLoader worker killed by bus error'), and with --data: free RAM and /dev/shm against cache=ram (a short "
        "/dev/shm gives each spawned loader worker its own copy of the cache), the dataset's filesystem (local, network mount, overlay), its measured read speed "
        "(sequential and random, a few seconds, page cache dropped first), image size against imgsz (decode waste); "
        "and online logger integrations. --workers, --batch and --imgsz describe the run you have in mind "
        "(default: the trainers' defaults). `speedopt search` runs the fatal checks first.",
        epilog=EXIT,
    )
    parser.add_argument("--data", default=None, help="the dataset's data.yaml (YOLO format): adds the dataset checks")
    parser.add_argument("--device", default=None, help="cpu, a GPU index such as 0, or 0,1 (default: the trainers' default)")
    parser.add_argument("--engine", default=DEFAULT, choices=NAMES, help="trainer whose loggers and loader to check")
    parser.add_argument("--workers", type=integer(0, max_workers()), default=8, help="dataloader workers of your run (default 8)")
    parser.add_argument("--batch", type=integer(1, MAX_BATCH), default=16, help="batch size of your run (default 16)")
    parser.add_argument("--imgsz", type=integer(1, MAX_IMGSZ), default=640, help="image size of your run (default 640)")
    parser.add_argument("--read-seconds", type=seconds, default=3.0, metavar="S", help="time for the read test (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    knobs, _ = validate(Knobs(workers=args.workers, batch=args.batch, imgsz=args.imgsz))
    options = doctor.DoctorOptions(
        data=args.data, device=args.device, engine=args.engine, knobs=knobs, read_budget_s=args.read_seconds,
    )
    console = Console(highlight=False)

    def show(check: doctor.Check) -> None:
        text = check.line()
        console.print(f"[{_STYLE[check.level]}]{text[:4]}[/]{text[4:]}", soft_wrap=True, markup=True)

    found = doctor.diagnose(options, on_check=None if args.json else show)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
    else:
        failed, warned = len(found.failed()), sum(c.level is doctor.Level.WARN for c in found.checks)
        console.print(f"{len(found.checks)} checks: {failed} failed, {warned} warnings")
    return 1 if found.failed() else 0
