"""Faults of the classic engine (``--engine yolov5``): what it refuses, and why, is true of it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from speedopt.engines.yolov5 import Yolov5Engine
from tests.faults.conftest import Faults, needs_classic_yolov5, one_line_error


def test_a_lossless_copy_for_the_classic_engine_is_refused_for_what_it_is(faults: Faults) -> None:
    # Issue 27 item 12: with --prepare png the refusal said "the prepared copy is JPEG". The copy is PNG;
    # what keeps it from being accuracy-neutral is classic train.py's own resize, not the format.
    needs_classic_yolov5()
    data = faults.dataset()
    space = faults.work / "space.yaml"
    space.write_text("data: [original, resized]\nimgsz: [64]\n")
    faults.watch(data.parent)
    done = faults.run(
        "search", "--data", str(data), "--engine", "yolov5", "--prepare", "png", "--quality", "off",
        "--space", str(space), "--device", "cpu", timeout=60,
    )
    line = one_line_error(done, "classic train.py", "1 px over imgsz", "INTER_AREA", "--quality probe")
    assert "JPEG" not in line, line
    assert not (faults.work / "prepared").exists()  # refused before any copy was made
    faults.unchanged()



# The engine's own label-cache build in a fresh process, with the dataset class that train.py's dataloaders
# module holds replaced by the pip package's class under the signature of upstream master (ultralytics/yolov5
# 5081342f0): ``rank`` and ``seed``, no ``workers``. Prints the splits it built.
UPSTREAM_SIGNATURE = """
import sys
from pathlib import Path
import yolov5.utils.dataloaders as dataloaders
from speedopt.engines.yolov5 import Yolov5Engine

class Upstream(dataloaders.LoadImagesAndLabels):
    def __init__(self, path, img_size=640, batch_size=16, augment=False, hyp=None, rect=False, image_weights=False,
                 cache_images=False, single_cls=False, stride=32, pad=0.0, min_items=0, prefix="", rank=-1, seed=0):
        super().__init__(path, img_size, batch_size, augment, hyp, rect, image_weights, cache_images, single_cls,
                         stride, pad, min_items, prefix)

dataloaders.LoadImagesAndLabels = Upstream
Yolov5Engine().prepare(Path(sys.argv[3]))  # the local font, as every job of the engine places it (check_dataset wants it)
build = Yolov5Engine().build_label_cache(sys.argv[1], Path(sys.argv[2]))
print([(s.split, s.images, s.reused, Path(s.cache).is_file()) for s in build.splits])
"""


@pytest.mark.slow
def test_the_label_cache_is_built_with_upstream_masters_dataset_signature(faults: Faults) -> None:
    # Issue 27 item 13: with upstream master as --yolov5-dir the labels job failed with "TypeError:
    # LoadImagesAndLabels.__init__() got an unexpected keyword argument 'workers'", and every trial scanned.
    # The pip package's own signature (with workers) is the label-cache test's in tests/engines/test_label_cache.py.
    needs_classic_yolov5()
    data = faults.dataset()
    cache = faults.tmp / "speedopt-cache"  # the engine's environment and offline set-up, as a labels job gets them
    env = {**os.environ, **Yolov5Engine().environment(cache), "TMPDIR": str(faults.tmp)}
    done = subprocess.run([sys.executable, "-c", UPSTREAM_SIGNATURE, str(data), str(faults.work), str(cache)], capture_output=True,
                          text=True, timeout=300, cwd=faults.work, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[('train', 16, False, True), ('val', 4, False, True)]", done.stdout
