"""`speedopt demo-data`: write the synthetic demo dataset."""

from __future__ import annotations

import argparse

from speedopt import data
from speedopt.cli._options import MAX_SEED, integer

NAME = "demo-data"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="write a small synthetic YOLO dataset (coloured shapes) to try speedopt on",
        description="Write a synthetic detection dataset in YOLO format (images/, labels/, data.yaml with an "
        "absolute path): coloured circles, squares and triangles on noisy backgrounds, identical for a seed. "
        "Prints the path of its data.yaml.",
    )
    parser.add_argument("dir", nargs="?", default="speedopt-demo", help="output folder (default: ./speedopt-demo)")
    parser.add_argument(
        "--photos", action="store_true",
        help=f"camera-like photos: {data.PHOTOS.width}x{data.PHOTOS.height} JPEG at quality {data.PHOTOS.quality}, "
        f"{data.PHOTOS.train} train / {data.PHOTOS.val} val unless given: decoding them at full size every epoch, only to "
        "shrink them to imgsz, is the case a pre-resized copy (speedopt prepare, search --prepare) fixes",
    )
    parser.add_argument("--train", type=integer(1, 10**6), default=None, help="train images (default 256)")
    parser.add_argument("--val", type=integer(1, 10**6), default=None, help="val images (default 64)")
    parser.add_argument("--size", default=None, help="image size WxH (default 640x480)")
    parser.add_argument("--seed", type=integer(0, MAX_SEED), default=0, help="random seed (default 0)")
    parser.add_argument(
        "--format", default="jpg", choices=data.FORMATS,
        help="image format (default jpg); png decodes slowly, like large lossless camera images: a data-bound set",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    base = data.PHOTOS if args.photos else data.DemoSpec()
    width, height = data.parse_size(args.size) if args.size else (base.width, base.height)
    spec = data.DemoSpec(
        train=base.train if args.train is None else args.train, val=base.val if args.val is None else args.val,
        width=width, height=height, seed=args.seed, format=args.format, quality=base.quality,
    )
    print(data.generate(args.dir, spec))
    return 0
