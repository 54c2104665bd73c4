"""The report's summary: what bounded the search and the levers left, from a stored study (no trainer).

No GPU exists here: the trial carries the share a trial on "NVIDIA H200" records (measure._peak.peak_share)."""

import dataclasses
import types

import optuna
from optuna.trial import TrialState, create_trial

from speedopt.knobs import COMPILE_OFF, Knobs
from speedopt.measure import Ceiling, TrialResult, key_of
from speedopt.measure._peak import peak_share
from speedopt.reporting._ceilings import bound_section
from speedopt.status import Status
from speedopt.study import Space, outcome, schema
from speedopt.study.record_types import Domain


def test_the_summary_names_the_bound_the_peak_and_the_levers_left():
    knobs = Knobs(batch=16, amp="bf16", workers=8)
    peak = peak_share("NVIDIA H200", "bf16", 291.0, 72.0)
    result = TrialResult(Status.OK, "", knobs, knobs, "0", "ultralytics", images_per_s=291.0, ci_rel=0.02, gflops_per_image=72.0,
                         flops_basis="estimate: 3 x the forward FLOPs, the trainer's count (x)", peak_share=peak.share,
                         peak_tflops=peak.peak_tflops, peak_precision=peak.precision, peak_basis=peak.basis)
    study = optuna.create_study(direction="maximize")
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=291.0,
                                 user_attrs={**result.to_dict(), "feasible": True, "role": "baseline"}))
    for kind, speed in (("data", 900.0), ("compute", 306.0)):
        schema.write_ceiling(study, f"{kind}|{key_of(kind, knobs)}", Ceiling(kind, "k", Status.OK, "", speed, 0.02, 10, 5.0))
    # quality off kept the accuracy knobs at the baseline, and the space listed no compile mode
    space = Space({"batch": Domain(choices=(16,)), "model": Domain(choices=("yolov5s",)), "imgsz": Domain(choices=(640,)),
                   "freeze": Domain(choices=(0,)), "amp": Domain(choices=(True, "bf16")), "compile": Domain(choices=(COMPILE_OFF,)),
                   "channels_last": Domain(choices=("default", "off")), "workers": Domain(choices=(4, 8))})
    protocol = types.SimpleNamespace(engine="ultralytics", device="0", space=space, quality=types.SimpleNamespace(probing=False),
                                     compile_modes=())
    lines = bound_section(study, dataclasses.replace(outcome(study), protocol=protocol))
    assert lines[0] == (
        "**What bounded the search** (the recommended config, trial 0, at 291.0 images/s, its trial): 95% of the compute "
        "ceiling at batch 16; the GPU at 2.1% of its bf16 peak (estimate: 3 x the forward FLOPs, the trainer's count): "
        "model, imgsz, batch, freeze, compile and deterministic are the levers left "
        "(drop --quality off to let model, imgsz, batch and freeze vary)."
    )
    assert lines[2].startswith("_Model FLOPs per trained image: 72 GFLOPs, estimate: 3 x the forward FLOPs")
    assert "the share of the peak is per GPU: its trial's images/s x those FLOPs / the H200 SXM's dense bf16 peak" in lines[2]
