"""`speedopt demo-data`: write the synthetic demo dataset."""

from __future__ import annotations

import argparse

from speedopt import data
from speedopt.cli._options import integer

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
    parser.add_argument("--train", type=integer, default=256, help="train images (default 256)")
    parser.add_argument("--val", type=integer, default=64, help="val images (default 64)")
    parser.add_argument("--size", default="640x480", help="image size WxH (default 640x480)")
    parser.add_argument("--seed", type=integer, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--format", default="jpg", choices=data.FORMATS,
        help="image format (default jpg); png decodes slowly, like large lossless camera images: a data-bound set",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    width, height = data.parse_size(args.size)
    spec = data.DemoSpec(train=args.train, val=args.val, width=width, height=height, seed=args.seed, format=args.format)

    print(data.generate(args.dir, spec))
    return 0
