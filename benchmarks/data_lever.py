"""The data lever, measured: the same knobs on the original images and on a prepared copy, side by side.

Generates a demo set of large images (default 1920x1080 PNG, 96 train), prepares a copy at --imgsz
(default png: lossless, the pixels the trainer would compute), then measures the original and the copy
in --rounds interleaved rounds (original, copy, original, copy, ...) with identical knobs and prints
each round's images/s, the paired ratio per round and its median with the min-max interval (the
finals' rule: a gain is claimed only when the whole interval lies above 1.0), and the prepare time.

    python benchmarks/data_lever.py [--rounds 3] [--imgsz 320] [--format png] [--size 1920x1080] [--image-format png]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import speedopt
from speedopt import data
from speedopt.knobs import Knobs, knobs_text
from speedopt.speedup import paired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--format", default="png", choices=("jpg", "png", "npy"), help="the copy's format")
    parser.add_argument("--size", default="1920x1080", help="the generated images' size")
    parser.add_argument("--image-format", default="png", choices=data.FORMATS, help="the generated images' format")
    parser.add_argument("--train", type=int, default=96)
    args = parser.parse_args()
    width, height = data.parse_size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = data.generate(
            Path(tmp) / "photos", data.DemoSpec(train=args.train, val=16, width=width, height=height, format=args.image_format)
        )
        ds = data.load(yaml_path)
        made = data.prepare(ds, data.PrepareSpec(imgsz=args.imgsz, format=args.format), out=Path(tmp) / "copy")
        copy = made.copy
        print(f"{len(ds.train_images)} train images {args.size} {args.image_format}; copy at {args.imgsz} ({args.format}): "
              f"prepared in {made.seconds:.1f} s ({made.images_per_s:.1f} images/s, {made.jobs} jobs); "
              f"{copy.source_bytes / 2**20:.1f} MB -> {copy.bytes / 2**20:.1f} MB")
        knobs = Knobs(model="yolov5n", imgsz=args.imgsz, batch=args.batch, workers=0, amp=False)
        print(f"knobs: {knobs_text(knobs)}, {args.steps} steps minimum, cpu")
        original: list[float | None] = []
        resized: list[float | None] = []
        for round_ in range(args.rounds):
            for series, path in ((original, yaml_path), (resized, copy.yaml_path)):
                result = speedopt.trial(str(path), knobs, device="cpu", steps=args.steps)
                series.append(result.images_per_s if result.ok else None)
            print(f"round {round_ + 1}: original {original[-1] or 0:.2f}, resized {resized[-1] or 0:.2f} images/s")
        gain = paired(resized, original)
        print("resized vs original: " + (gain.text() if gain else "no round measured both"))


if __name__ == "__main__":
    main()
