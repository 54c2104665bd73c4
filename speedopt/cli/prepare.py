"""`speedopt prepare`: write a copy of a dataset with every image resized once to the training size."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, get_args

from speedopt import data
from speedopt.cli._options import MAX_JOBS, integer
from speedopt.knobs import MAX_IMGSZ

NAME = "prepare"
_SHOWN_CORRUPT = 3  # corrupt images named in the summary line


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="write a copy of a dataset resized once to the training size (long side = --imgsz): less decoding per epoch",
        description="Write a copy of a YOLO dataset with every train and val image resized once so that its long "
        "side is --imgsz (aspect kept, never upscaled), labels copied unchanged, and a data.yaml to train on. "
        "Why: the trainer decodes each image at full size every epoch only to shrink it, which can keep the "
        "dataloader's CPU busy while the GPU waits; the copy does that work once. Formats: jpg (JPEG, default "
        "quality 100: the practitioners' compromise, small and fast to decode, re-encoded once), png (lossless, "
        "larger, slower to decode) and npy (lossless png plus a decoded .npy array beside each image, which both "
        "trainers load instead of decoding: no decode at all, but many times the disk). The copy is resized as "
        "the Ultralytics trainer resizes, so a lossless copy holds the very pixels it would compute itself. "
        "Parallel, resumable (run the same command again after an interruption: finished images are reused) and "
        "verified (every image decoded) before it is marked complete. `speedopt search` finds a copy made at the "
        "default --out by itself and measures it with the `data` knob (data=resized).",
    )
    parser.add_argument("--data", required=True, metavar="YAML", help="the dataset's data.yaml")
    parser.add_argument("--imgsz", required=True, type=integer(1, MAX_IMGSZ), metavar="N", help="long side in pixels, a multiple of 32 (use your training --imgsz)")
    parser.add_argument(
        "--format", default="jpg", choices=get_args(data.PrepareFormat),
        help="jpg (default; JPEG at --quality), png (lossless), npy (lossless png + decoded .npy arrays: fastest to read, largest)",
    )
    parser.add_argument("--quality", type=integer(1, 100), default=100, metavar="Q", help="JPEG quality 1-100 for --format jpg (default 100)")
    parser.add_argument(
        "--out", default=None, metavar="DIR",
        help="where to write the copy (default: ./prepared/<dataset>-<hash>/<imgsz>-<format>, where a search looks for it)",
    )
    parser.add_argument("--jobs", type=integer(1, MAX_JOBS), default=None, metavar="J", help="worker processes, at most one per CPU core and per image (default: one per CPU core)")
    parser.set_defaults(run=run)


class _Bar:
    """A rich progress bar on a terminal (resizing, then verifying), with the measured images/s."""

    def __init__(self, header: str) -> None:
        from rich.console import Console

        self.header = header  # printed with the first update: once the dataset and --out passed every check
        self.console = Console(stderr=True)
        self.progress: Any = None
        self.tasks: dict[str, Any] = {}
        self.started: dict[str, float] = {}

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _start(self) -> Any:
        """The bar, started on the first update (so no display thread runs before the workers start)."""
        if self.progress is None:
            print(self.header, flush=True)
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, disable=not self.console.is_terminal,
            )
            self.progress.start()
        return self.progress

    def update(self, phase: str, done: int, total: int) -> None:
        progress = self._start()
        now = time.monotonic()
        if phase not in self.tasks:
            self.tasks[phase] = progress.add_task(phase, total=total, rate="")
            self.started[phase] = now
        elapsed = now - self.started[phase]
        rate = f"{done / elapsed:.1f} images/s" if done and elapsed > 0 else ""
        progress.update(self.tasks[phase], completed=done, total=total, rate=rate)

    def resize(self, done: int, total: int) -> None:
        self.update("resizing", done, total)

    def verify(self, done: int, total: int) -> None:
        self.update("verifying", done, total)


def _describe(spec: data.PrepareSpec) -> str:
    return {"jpg": f"JPEG q{spec.quality}", "png": "PNG", "npy": "PNG + .npy"}[spec.format]


def summary(report: data.PrepareReport) -> list[str]:
    """The lines printed when the copy is complete: what was done, how fast, how big, where."""
    copy = report.copy
    speed = (
        f"resize: {report.images_per_s:.1f} images/s with {report.jobs} job(s)" if report.written
        else "every image was current"
    )
    ratio = f"{copy.bytes / copy.source_bytes:.2f}x the source" if copy.source_bytes else "source size unknown"
    lines = [
        f"prepared {copy.images} images at {copy.spec.imgsz} ({_describe(copy.spec)}): {report.written} written, "
        f"{report.reused} reused, in {report.seconds:.1f} s; {speed}",
        f"size: copy {copy.bytes / 1e6:.1f} MB vs source {copy.source_bytes / 1e6:.1f} MB ({ratio})",
    ]
    lines[1:1] = [f"note: {note}" for note in report.notes]
    if copy.corrupt:
        first = ", ".join(copy.corrupt[:_SHOWN_CORRUPT]) + (", ..." if len(copy.corrupt) > _SHOWN_CORRUPT else "")
        lines.append(f"skipped {len(copy.corrupt)} corrupt image(s) (unreadable; the trainers skip them too): first ones {first}")
    lines.append(f"data.yaml: {copy.yaml_path}  (train with --data on it and imgsz={copy.spec.imgsz})")
    return lines


def run(args: argparse.Namespace) -> int:
    spec = data.PrepareSpec(imgsz=args.imgsz, format=args.format, quality=args.quality).checked()
    ds = data.load(args.data)
    out = Path(args.out) if args.out else None
    where = out if out is not None else data.default_out(ds, spec)
    with _Bar(f"preparing {ds.yaml_path} at {spec.imgsz} ({_describe(spec)}) in {where}") as bar:
        report = data.prepare(ds, spec, out=out, jobs=args.jobs, progress=bar.resize, verify_progress=bar.verify)
    for line in summary(report):
        print(line)
    return 0
