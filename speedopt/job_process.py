"""The inside of one engine job other than a speed trial: ``python -m speedopt.job_process WORKDIR``.

Two kinds: ``probe`` trains one accuracy signature for the probe budget and returns val mAP;
``validate`` times one validation pass on the val split. Either way the result says how it ended;
see :mod:`speedopt.isolation` for the process contract.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from speedopt import engines, isolation
from speedopt.engines import ProbeRun
from speedopt.knobs import Knobs
from speedopt.measurement import status_of


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    text, blocked = isolation.child_start(workdir)
    request = json.loads(text)
    engine = engines.get(request["engine"], yolov5_dir=request.get("yolov5_dir"))
    isolation.child_progress(workdir, phase="setup")
    started = time.perf_counter()
    try:
        engine.prepare(Path(request["cache_dir"]))
        run = ProbeRun(
            data_yaml=request["data_yaml"],
            knobs=Knobs(**request["knobs"]),
            device=request["device"],
            epochs=request["epochs"],
            fraction=request["fraction"],
            seed=request["seed"],
            workdir=workdir,
            weights=request.get("weights"),
        )
        if request["kind"] == "validate":
            seconds, images = engine.time_validation(run)
            result = {"status": "ok", "message": f"validated {images} images", "val_s": seconds, "val_images": images}
        else:
            scores = engine.probe(run, lambda done, of: isolation.child_progress(workdir, phase="epoch", done=done, of=of))
            result = {
                "status": "ok",
                "message": f"trained {run.epochs} epochs on {scores.images} images",
                "map50": scores.map50,
                "map50_95": scores.map50_95,
                "images": scores.images,
            }
    except BaseException as exc:  # every failure becomes a status, never a crash
        status, message = status_of(exc)
        result = {"status": status.value, "message": message}
    result["seconds"] = time.perf_counter() - started
    result["network_blocked"] = blocked
    isolation.child_finish(workdir, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
