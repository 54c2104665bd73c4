"""The data lever in a report: what the train images cost to read, and what a resized copy bought.

Each trial read either the original images (the study's dataset fingerprint: mean file size and
decoded size from a sample of headers) or a prepared copy (its recorded bytes, long side = imgsz).
A copy's prepare time is a one-time cost, shown beside the run it would be paid for.
"""

from __future__ import annotations

import statistics

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.reporting._bottleneck import Images
from speedopt.study import StudyProtocol, TrialRecord


def images_for(p: StudyProtocol, result: TrialResult) -> Images:
    """The train images a trial read: as its trainer listed them (recorded by the trial), else the study's
    figures for its data (the original's fingerprint, or the copy's, at most imgsz on the long side)."""
    knobs, ds = result.config, p.dataset
    prepared = knobs.data == "resized"
    if result.image_bytes_mean is not None and result.image_long_side is not None:
        return Images(result.image_bytes_mean, result.image_long_side, prepared)
    long_side = max(ds.mean_width, ds.mean_height)
    for copy in p.copies if prepared else ():
        if copy.imgsz == knobs.imgsz:
            return Images(copy.bytes / max(1, copy.images), min(long_side, copy.imgsz), prepared=True)
    return Images(ds.train_bytes / max(1, ds.train_images), long_side)


def _twin(knobs: Knobs) -> Knobs:
    """The same knobs on the other data."""
    from dataclasses import replace

    return replace(knobs, data="original" if knobs.data == "resized" else "resized")


def prepare_gain(done: list[TrialRecord], knobs: Knobs | None = None) -> str:
    """What this study measured for data=resized against the original with every other knob equal: for
    ``knobs`` when it measured their twin, else the median ratio over all such pairs; "" without a pair."""
    ok = {r.config: r for r in done if r.result.ok and r.result.images_per_s}
    twin = ok.get(_twin(knobs)) if knobs is not None else None
    if knobs is not None and knobs in ok and twin is not None:
        mine = ok[knobs]
        resized, original = (mine, twin) if knobs.data == "resized" else (twin, mine)
        ratio = float(resized.result.images_per_s or 0) / float(original.result.images_per_s or 1)
        return (
            f"this study measured {ratio:.2f}x for this config on the copy: trial {resized.number} "
            f"{resized.result.images_per_s:.1f} vs trial {original.number} {original.result.images_per_s:.1f} images/s, "
            "one measurement each"
        )
    ratios, example = [], None
    for knobs, record in ok.items():
        twin = ok.get(_twin(knobs))
        if knobs.data == "resized" and twin is not None:
            ratios.append(float(record.result.images_per_s or 0) / float(twin.result.images_per_s or 1))
            example = example or (record, twin)
    if not ratios or example is None:
        return ""
    resized, original = example
    return (
        f"this study measured {statistics.median(ratios):.2f}x with every other knob equal "
        f"({len(ratios)} pair(s); e.g. trial {resized.number} {resized.result.images_per_s:.1f} vs trial "
        f"{original.number} {original.result.images_per_s:.1f} images/s, one measurement each)"
    )


def copies_section(p: StudyProtocol, epochs: int) -> list[str]:
    """The prepared copies the study searched: size, prepare time and rate, and the one-time cost per epoch."""
    if not p.copies:
        return []
    lines = [
        "### Prepared copies (the data knob)",
        "",
        "| imgsz | format | images | copy size | original size | prepare time | prepare rate | per epoch of the run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in p.copies:
        rate = f"{c.images / c.seconds:.1f} images/s ({c.jobs} jobs)" if c.seconds > 0 else "-"
        ratio = f" ({c.source_bytes / c.bytes:.1f}x smaller)" if c.bytes else ""
        lines.append(
            f"| {c.imgsz} | {c.format}{' q' + str(c.quality) if c.format == 'jpg' else ''} | {c.images} | "
            f"{c.bytes / 2**20:.1f} MB{ratio} | {c.source_bytes / 2**20:.1f} MB | {c.seconds:.1f} s | {rate} | "
            f"{c.seconds / epochs:.2f} s |"
        )
    lossless = all(c.lossless for c in p.copies)
    kind = (
        "lossless: the very pixels the trainer computes from the originals, so accuracy cannot change"
        if lossless else "JPEG: can change accuracy slightly, so data=resized is part of the accuracy signature"
    )
    return lines + [
        "",
        f"Prepare time was measured when each copy was made; it is paid once, so over a {epochs}-epoch run it "
        f"costs the last column per epoch. The copies are {kind}.",
        "",
    ]
