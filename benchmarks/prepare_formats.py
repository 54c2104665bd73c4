"""Prepare formats: what a resized copy costs to make, weighs on disk, and saves at decode time.

Generates a demo set (default 64 train + 16 val PNG images at 1920x1080, slow to decode as large camera
images are) in a temporary folder, or takes --data, and prepares it at --imgsz (default 320) as JPEG q100,
PNG and PNG + .npy. For each it prints the prepare throughput (images/s with J jobs) and the copy's size
against the original's; then the decode rate of N train images read the way the trainer reads them
(cv2.imread of the original, of each copy, np.load of the .npy arrays), one process, warm page cache
(each set is read once untimed, then timed). Measured figures only; nothing is asserted.

    python benchmarks/prepare_formats.py [--data data.yaml] [--imgsz 320] [--jobs J] [--decode 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from speedopt import data

FORMATS = (("jpg q100", "jpg", 100), ("png", "png", 100), ("npy", "npy", 100))  # (label, format, quality)


def _decode_rate(files: list[Path], read: Callable[[str], object]) -> float:
    """Images/s reading ``files`` with ``read`` (after one untimed pass, so the page cache is warm)."""
    for f in files:
        read(str(f))
    started = time.perf_counter()
    for f in files:
        if read(str(f)) is None:
            raise SystemExit(f"cannot decode {f}")
    return len(files) / (time.perf_counter() - started)


def _copy_files(ds: data.Dataset, copy: data.PreparedCopy, images: list[Path], fmt: str) -> list[Path]:
    """The copy's files for ``images``: the resized image, or its .npy for the npy format."""
    assert ds.root is not None
    suffix = ".npy" if fmt == "npy" else (".jpg" if fmt == "jpg" else ".png")
    return [(copy.root / p.relative_to(ds.root)).with_suffix(suffix) for p in images]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="a data.yaml to prepare (default: a generated demo set)")
    parser.add_argument("--train", type=int, default=64)
    parser.add_argument("--val", type=int, default=16)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--decode", type=int, default=64, help="train images decoded per format")
    args = parser.parse_args()
    import cv2
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        if args.data:
            yaml_path = Path(args.data)
        else:
            width, height = data.parse_size(args.size)
            print(f"generating {args.train} + {args.val} PNG images of {width}x{height} ...", flush=True)
            yaml_path = data.generate(f"{tmp}/demo", data.DemoSpec(train=args.train, val=args.val, width=width, height=height, format="png"))
        ds = data.load(yaml_path)
        total = len(ds.train_images) + len(ds.val_images)
        print(f"{total} images, prepared at imgsz {args.imgsz} with {args.jobs} job(s) on {os.cpu_count()} CPU(s)\n")
        print(f"{'format':<10} {'prepare images/s':>17} {'copy MB':>9} {'original MB':>12} {'copy/original':>14}")
        copies = {}
        for label, fmt, quality in FORMATS:
            report = data.prepare(ds, data.PrepareSpec(args.imgsz, fmt, quality), out=Path(tmp) / "out" / fmt, jobs=args.jobs)
            copy = report.copy
            copies[fmt] = copy
            print(
                f"{label:<10} {report.images_per_s:>17.1f} {copy.bytes / 1e6:>9.1f} {copy.source_bytes / 1e6:>12.1f} "
                f"{copy.bytes / copy.source_bytes:>13.2f}x",
                flush=True,
            )
        images = list(ds.train_images[: args.decode])

        def imread(path: str) -> object:
            return cv2.imread(path, cv2.IMREAD_COLOR)

        def npload(path: str) -> object:
            return np.load(path)

        rates = [("original", _decode_rate(images, imread))]
        for label, fmt, _ in FORMATS:
            files = _copy_files(ds, copies[fmt], images, fmt)
            rates.append((f"{label}{' (np.load)' if fmt == 'npy' else ''}", _decode_rate(files, npload if fmt == "npy" else imread)))
        print(f"\ndecode {len(images)} train images, one process (images/s; x = vs the original):")
        base = rates[0][1]
        print("  " + " | ".join(f"{label} {rate:.1f} ({rate / base:.1f}x)" for label, rate in rates))


if __name__ == "__main__":
    main()
