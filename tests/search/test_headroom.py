"""What bounded a search and what is left: the stop line's tail and the report's summary, from records.

No GPU exists here: the GPU line's trial carries a share computed for the device name "NVIDIA H200"
(:func:`speedopt.measure._peak.peak_share`), as a trial on that card records it."""

from speedopt.knobs import COMPILE_OFF, Knobs
from speedopt.measure import Ceiling, Ceilings, TrialResult
from speedopt.measure._peak import peak_share
from speedopt.search._headroom import headroom, levers_left, unswitchable
from speedopt.status import Status
from speedopt.study import Space
from speedopt.study.record_types import Domain


def _ok(kind: str, speed: float) -> Ceiling:
    return Ceiling(kind, "k", Status.OK, "", speed, 0.02, 10, 5.0)


def _space(**domains: tuple) -> Space:
    return Space({k: Domain(choices=v) for k, v in domains.items()})


def test_a_gpu_search_at_its_compute_ceiling_names_the_peak_share_and_the_levers_left():
    # issue 46's H200 study: quality off kept the batch (an accuracy knob); the space listed no compile mode
    knobs = Knobs(batch=16, amp="bf16")
    peak = peak_share("NVIDIA H200", "bf16", 291.0, 72.0)
    result = TrialResult(Status.OK, "", knobs, knobs, "0", "ultralytics", images_per_s=291.0, ci_rel=0.02, gflops_per_image=72.0,
                         peak_share=peak.share, peak_tflops=peak.peak_tflops, peak_precision=peak.precision, peak_basis=peak.basis)
    space = _space(model=("yolov5s",), imgsz=(640,), batch=(16,), freeze=(0,), amp=(True, False, "bf16"),
                   channels_last=("default", "off"), compile=(COMPILE_OFF,), workers=(0, 8))
    levers, pinned = levers_left("compute", space, probing=False, fixed=set())
    assert levers == ("model", "imgsz", "batch", "freeze", "compile", "deterministic") and pinned == ("model", "imgsz", "batch", "freeze")
    found = Ceilings(_ok("data", 900.0), _ok("compute", 306.0))
    line = headroom(result, knobs, 291.0, found, ("batch", "compile"), ("batch",))
    assert line == ("95% of the compute ceiling at batch 16; the GPU at 2.1% of its bf16 peak (estimate: 3 x the forward "
                    "FLOPs, the trainer's count): "
                    "batch and compile are the levers left (drop --quality off to let batch vary)")


def test_on_a_cpu_the_peak_is_unknown_and_the_trainer_s_fixed_knobs_are_no_lever():
    knobs = Knobs(model="yolov5n", imgsz=128, batch=16, workers=0, amp=False)
    result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=20.0, ci_rel=0.02,
                         gflops_per_image=0.86, peak_precision="fp32", peak_basis="peak unknown on a CPU")
    fixed = unswitchable("ultralytics", "cpu")
    assert {"amp", "channels_last", "workers"} <= fixed and "compile" not in fixed  # compile: listed in --space on a CPU
    space = _space(model=("yolov5n",), imgsz=(128,), batch=(16,), freeze=(0,), amp=(False,), compile=(COMPILE_OFF,),
                   channels_last=("default",), cache=("none", "ram"))
    levers, pinned = levers_left("compute", space, probing=True, fixed=fixed)
    assert levers == ("model", "imgsz", "batch", "freeze", "compile", "deterministic") and pinned == ()  # quality probes: nothing kept
    line = headroom(result, knobs, 19.0, Ceilings(_ok("data", 60.0), _ok("compute", 20.0)), levers, pinned)
    assert line.startswith("95% of the compute ceiling at batch 16; peak unknown on a CPU: model, imgsz, batch, freeze, compile and deterministic")
    assert {"amp", "compile", "channels_last"} <= unswitchable("yolov5", "0")  # the classic train.py has no switch for them


def test_the_levers_follow_the_binding_ceiling_and_a_searched_knob_is_none():
    space = _space(workers=(0, 1, 2), cache=("none",), data=("original",), imgsz=(320, 640), batch=(16,))
    levers, pinned = levers_left("data", space, probing=False, fixed={"workers"})
    assert levers == ("batch", "cache", "data") and pinned == ("batch", "data")  # imgsz was searched
    knobs = Knobs()
    result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=50.0, ci_rel=0.02)
    data_bound = Ceilings(_ok("data", 52.0), _ok("compute", 80.0))
    assert headroom(result, knobs, 50.0, data_bound, (), ()) == (
        "96% of the data ceiling at batch 16; peak unknown on a CPU: no data-side knob is left that the trainer has here"
    )
    assert headroom(result, knobs, 50.0, None, ("compile",), ()).startswith("its ceilings not measured; peak unknown on a CPU: compile is the lever left")
    above = headroom(result, knobs, 70.0, data_bound, (), ())  # 135% of min(ceilings), beyond both intervals
    assert above.startswith("above its ceilings, which therefore do not hold;")


def test_compile_decided_at_the_end_is_no_lever_left(demo_yaml):
    import dataclasses

    from speedopt.search import SearchConfig, headroom_of, plan
    from speedopt.search._space import decide_at_end

    p = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off")).protocol
    knobs = p.baseline
    result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=20.0, ci_rel=0.02)
    assert "compile" in headroom_of(p, result, 20.0, None)
    space, _, modes, _ = decide_at_end(Space({**p.space.domains, "compile": Domain(choices=("off", "default"))}), knobs)
    decided = dataclasses.replace(p, space=space, compile_modes=modes)
    assert "compile" not in headroom_of(decided, result, 20.0, None)
