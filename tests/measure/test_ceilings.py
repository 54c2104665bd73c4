"""Ceilings: the data and compute upper bounds of a config (speedopt.measure._ceilings).

The fast tests check the keys, the bound and the study's reuse of measured ceilings; the slow one
runs the real trainer: both ceilings and the trial measured, the bound their minimum.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, Ceilings, TrialRequest, TrialResult, key_of, measure_ceilings
from speedopt.measure._ceilings import ceiling_knobs
from speedopt.status import Status
from tests.conftest import run_cli

KNOBS = Knobs(model="yolov5s", imgsz=320, batch=16, workers=4, cache="ram", amp=True, freeze=10, data="resized")


def _ok(kind: str, speed: float) -> Ceiling:
    return Ceiling(kind, "k", Status.OK, "", speed, 0.02, 10, 5.0)


def test_keys_hold_only_the_knobs_each_ceiling_depends_on():
    assert key_of("data", KNOBS) == "workers=4 cache=ram imgsz=320 batch=16 data=resized"
    assert key_of("compute", KNOBS) == "model=yolov5s imgsz=320 batch=16 amp=True freeze=10"
    other_model = dataclasses.replace(KNOBS, model="yolov5x", freeze=0, amp=False)
    assert key_of("data", other_model) == key_of("data", KNOBS)
    other_loader = dataclasses.replace(KNOBS, workers=0, cache="none", data="original")
    assert key_of("compute", other_loader) == key_of("compute", KNOBS)


def test_ceiling_jobs_run_the_cheap_neutral_values_of_what_they_do_not_depend_on():
    data_job = ceiling_knobs("data", dataclasses.replace(KNOBS, gpus=2))
    assert (data_job.model, data_job.freeze, data_job.gpus) == ("yolov5n", 0, 1)
    assert key_of("data", data_job) == key_of("data", KNOBS)
    compute_job = ceiling_knobs("compute", KNOBS)
    assert (compute_job.workers, compute_job.cache, compute_job.data) == (0, "none", "original")
    assert key_of("compute", compute_job) == key_of("compute", KNOBS)
    assert ceiling_knobs("data", dataclasses.replace(KNOBS, model="my.yaml")).model == "my.yaml"  # a custom model stays


def test_bound_binding_and_share():
    found = Ceilings(_ok("data", 300.0), _ok("compute", 60.0))
    assert found.bound == 60.0 and found.binding == "compute"
    assert found.share(54.0) == pytest.approx(0.9)
    assert any("compute ceiling binds" in line for line in found.lines(54.0))
    assert Ceilings(_ok("data", 20.0), _ok("compute", 60.0)).binding == "data"
    failed = Ceilings(_ok("data", 300.0), Ceiling("compute", "k", Status.OOM, "out of memory"))
    assert failed.bound is None and failed.binding is None and failed.share(50.0) is None
    assert "not measured (oom: out of memory)" in failed.compute.text()


def test_measure_ceilings_reuses_ok_ones_and_remeasures_failed_ones():
    """The lookup logic only: ``run`` here returns a result without a trainer (the slow tests run the real one)."""
    knobs = Knobs(model="yolov5n", imgsz=128, batch=8, workers=0, amp=False)
    asked: list[TrialRequest] = []

    def prepare(wanted: Knobs) -> TrialRequest:
        return TrialRequest(data_yaml="d.yaml", knobs=wanted, requested=wanted, device="cpu")

    def run(request: TrialRequest) -> TrialResult:
        asked.append(request)
        return TrialResult(Status.OK, "", request.knobs, request.knobs, "cpu", "ultralytics", images_per_s=99.0, steps=5)

    known = {
        f"data|{key_of('data', knobs)}": _ok("data", 300.0),
        f"compute|{key_of('compute', knobs)}": Ceiling("compute", key_of("compute", knobs), Status.TIMEOUT, "slow"),
    }
    saved = {}
    found = measure_ceilings(knobs, prepare, run, known, lambda name, c: saved.setdefault(name, c))
    assert [r.mode for r in asked] == ["compute"]  # the ok data ceiling was reused; the failed compute one measured again
    assert found.data.images_per_s == 300.0 and found.compute.images_per_s == 99.0
    assert list(saved) == [f"compute|{key_of('compute', knobs)}"]


def test_a_refused_ceiling_job_is_a_status_not_a_crash():
    knobs = Knobs(model="yolov5n", imgsz=128, batch=8, workers=0, amp=False, cache="ram")

    def prepare(wanted: Knobs) -> TrialResult:
        return TrialResult(Status.INFEASIBLE, "cache=ram does not fit", wanted, wanted, "cpu", "ultralytics")

    found = measure_ceilings(knobs, prepare, lambda r: pytest.fail("must not run"))
    assert found.data.status == "infeasible" and found.bound is None


@pytest.mark.slow
def test_ceilings_of_the_demo_config_and_its_trial(demo_yaml, shared_warm):
    """The real jobs, forked from the session's warm worker (the cold path is the trial CLI's test). Whether the
    trial stays under min(ceilings) is a speed relation: benchmarks/, not here (a noisy machine decides it)."""
    done = run_cli(
        "ceilings", "--data", str(demo_yaml), "--model", "yolov5n", "--imgsz", "96", "--batch", "4", "--workers", "0",
        "--steps", "3", "--warmup", "1", "--device", "cpu", "--trial", "--json", process=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    data_ceiling, compute_ceiling = out["data"]["images_per_s"], out["compute"]["images_per_s"]
    assert data_ceiling > 0 and compute_ceiling > 0
    assert out["bound"] == min(data_ceiling, compute_ceiling)
    assert out["binding"] in ("data", "compute")
    assert out["trial"]["status"] == "ok" and out["trial"]["images_per_s"] > 0


def test_a_trial_above_its_ceiling_beyond_both_intervals_is_a_measurement_fault():
    found = Ceilings(_ok("data", 300.0), _ok("compute", 33.1))  # each ceiling +/-2%
    fault = found.fault(38.3, 0.03)  # the README demo's case: 116% of its compute ceiling
    assert fault is not None and "38.3 images/s (+/-3.0%)" in fault and "compute ceiling 33.1 images/s (+/-2.0%)" in fault
    assert fault in found.lines(38.3, 0.03) and not any("% of min(ceilings)" in line for line in found.lines(38.3, 0.03))
    assert found.fault(34.0, 0.03) is None  # above the ceiling, but within both intervals: it may be at its limit
    assert found.fault(30.0, 0.03) is None and found.fault(None) is None
    assert Ceilings(_ok("data", 300.0), None).fault(400.0) is None  # no bound, no fault
