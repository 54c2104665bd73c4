"""The ablation: which changes make the path, in which order, how each step is measured, judged, stored and
resumed (no trainer: the measurement is a function of the knobs), then one real ablation of a 2-knob change."""

import dataclasses
import math
import os
import time

import optuna
import pytest
from optuna.trial import TrialState, create_trial

import speedopt
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.reporting import build
from speedopt.search import SearchConfig
from speedopt.search import _ablation as ablation_mod
from speedopt.search._ablation import MAX_ORDERED
from speedopt.status import Status
from speedopt.study import Finals, records
from speedopt.study._ablation import NO_GAIN, Ablation, Change
from speedopt.study.record_types import Repeat

BASE = Knobs(model="yolov5n", imgsz=640, batch=16, workers=8, cache="none", amp=False)


def _trial(asked, ran, ips, role=None):
    user = {"status": "ok", "message": "", "images_per_s": ips, "config": ran.to_dict(), "requested": asked.to_dict(), "feasible": True}
    if role:
        user["role"] = role
    return create_trial(state=TrialState.COMPLETE, value=ips, user_attrs=user)


def _study(rec_asked, rec_ran=None, base_ran=None, repeats=3, fake=False):
    """Trial 0 the baseline, trial 1 the recommendation, and complete finals in which trial 1 wins 2x (with
    ``fake``: the finals measured the Fake trainer's speeds, as the ablation will, wobble included)."""
    s = optuna.create_study(direction="maximize")
    s.add_trial(_trial(BASE, base_ran or BASE, 10.0, role="baseline"))
    s.add_trial(_trial(rec_asked, rec_ran or rec_asked, 20.0))
    speeds = (Fake().speed(BASE), Fake().speed(rec_asked)) if fake else None
    measured = [
        Repeat(r, t, Status.OK, speeds[t] * (1.0, 0.98, 1.02)[r % 3] if speeds else 10.0 * (t + 1) + r)
        for r in range(repeats) for t in (0, 1)
    ]
    s.set_user_attr("finals", Finals((0, 1), repeats, tuple(measured), 0.05).to_attr())
    return s


#: A gain per knob value: the fake trainer's images/s is 10 times the product over the knobs.
GAINS = {("cache", "ram"): 1.5, ("imgsz", 320): 2.0, ("batch", 32): 1.1, ("workers", 2): 1.0, ("model", "yolov5s"): 0.5}


class Fake:
    """A trainer whose speed follows GAINS, with a small per-measurement wobble; logs what it measured."""

    def __init__(self, wobble=(1.0, 0.98, 1.02), fail=()):
        self.log, self.wobble, self.fail = [], wobble, set(fail)

    def speed(self, knobs):
        return 10.0 * math.prod(g for (k, v), g in GAINS.items() if getattr(knobs, k) == v)

    def __call__(self, knobs):
        self.log.append(knobs)
        if knobs in self.fail:
            return TrialResult(Status.OOM, "out of memory", knobs, knobs, "cpu", "ultralytics")
        rate = self.speed(knobs) * self.wobble[len(self.log) % len(self.wobble)]
        return TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=rate, ci_rel=0.02, steps=20)


def _runs(knobs):
    return None


def _run(study, fake, check=_runs, min_gain=0.05, **hooks):
    finals = Finals.from_attr(study.user_attrs["finals"])
    return ablation_mod.run(study, records(study), finals, fake, check, min_gain, **hooks)


def test_the_changes_are_the_knobs_asked_differently_less_those_the_trainer_ran_the_same():
    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram", "workers": 2})
    ran_base, ran_rec = Knobs(**{**BASE.to_dict(), "workers": 0}), Knobs(**{**rec.to_dict(), "workers": 0})
    study = _study(rec, rec_ran=ran_rec, base_ran=ran_base)
    base, best = records(study)
    planned = ablation_mod.planned(base, best, 3)
    assert [c.knob for c in planned.changes] == ["imgsz", "cache"]  # knob order
    assert planned.dropped == (Change("workers", 8, 2),) and planned.dropped[0].text() == "workers 8 -> 2"

    fake = Fake()
    done = _run(study, fake)
    assert all(k.workers == 8 for k in fake.log if k != rec)  # the dropped knob keeps the baseline's value on the way
    assert done.configs()[-1] == rec  # the path ends at the recommendation as asked


def test_two_changes_make_two_steps_the_bigger_gain_first_each_measured_in_every_round():
    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram"})
    study, fake = _study(rec, fake=True), Fake()
    labels = []
    done = _run(study, fake, started=lambda step: labels.append(step.label.removeprefix("ablation ")))
    assert len(done.probes) == 2 * 3 // 2 - 1  # n(n+1)/2 - 1 ordering measurements for n = 2
    assert done.path == (("imgsz",), ("cache",))  # imgsz doubles, cache gains 1.5x: imgsz first
    assert labels[:2] == ["ordering: imgsz 640 -> 320 from the baseline", "ordering: cache none -> ram from the baseline"]
    # the ends' rounds come from the finals, step 1's first round from its ordering measurement: 2 new measurements
    assert labels[2:] == ["round 2/3: step 1: imgsz 640 -> 320", "round 3/3: step 1: imgsz 640 -> 320"]
    assert done.complete and len(done.measured) == 3 * 3 and "reused" in done.notes[-1]
    assert all(m.status is Status.OK for m in done.measured)
    steps = done.steps()
    assert [s.text() for s in steps] == ["imgsz 640 -> 320", "cache none -> ram"]
    assert math.prod(s.speedup for s in steps) == pytest.approx(done.total(), rel=1e-12)  # the table sums to the full change
    assert done.total() == pytest.approx(3.0, rel=0.05) and [s.verdict for s in steps] == ["gain", "gain"]
    assert Ablation.from_attr(study.user_attrs["ablation"]) == done  # stored as measured


def test_greedy_order_costs_n_n_plus_1_over_2_minus_1_measurements():
    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram", "batch": 32})
    fake = Fake()
    done = _run(_study(rec, fake=True), fake)
    assert len(done.probes) == 3 * 4 // 2 - 1  # 3 from the baseline, then 2
    assert done.path == (("imgsz",), ("cache",), ("batch",))
    assert len(fake.log) == 5 + 2 * 2  # the two middle steps' rounds 2 and 3: the rest is reused
    cumulative = [s.cumulative for s in done.steps()]
    assert cumulative == sorted(cumulative) and cumulative[-1] == pytest.approx(done.total())


def test_more_than_three_changes_keep_knob_order_and_say_so():
    rec = Knobs(**{**BASE.to_dict(), "model": "yolov5s", "imgsz": 320, "batch": 32, "workers": 2})
    fake = Fake()
    done = _run(_study(rec, fake=True), fake)
    assert len(done.changes) == MAX_ORDERED + 1 and done.probes == ()
    assert [k for (k,) in done.path] == ["model", "imgsz", "batch", "workers"]
    assert "more than 3: the path keeps knob order" in done.notes[0]
    assert len(fake.log) == 3 * 3  # no ordering measurement, the 3 middle configs in 3 rounds (the ends: the finals')
    steps = done.steps()
    assert math.prod(s.speedup for s in steps) == pytest.approx(done.total(), rel=1e-12)
    assert steps[3].verdict.startswith(NO_GAIN)  # workers 8 -> 2 changes nothing here
    assert steps[0].verdict == NO_GAIN + " (slower in every round)"  # yolov5s halves the speed


def test_a_step_that_cannot_run_is_skipped_and_none_runnable_combines_the_rest():
    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram"})
    no_copy = Knobs(**{**BASE.to_dict(), "imgsz": 320})

    def check(knobs):
        return "data=resized needs a prepared copy at imgsz 320" if knobs == no_copy else None

    done = _run(_study(rec), Fake(), check)
    assert done.path == (("cache",), ("imgsz",))  # imgsz alone cannot run: cache first though it gains less
    refused = [p for p in done.probes if p.knob == "imgsz"]
    assert refused[0].status is None and refused[0].outcome == "not run" and "prepared copy" in refused[0].message

    cache_only = Knobs(**{**BASE.to_dict(), "cache": "ram"})
    study = _study(rec)
    done = _run(study, Fake(fail=[cache_only]), check)  # one refused, the other ran out of memory
    assert done.path == (("imgsz", "cache"),) and "they make one combined step" in done.notes[0]
    assert len(done.steps()) == 1 and done.steps()[0].text() == "imgsz 640 -> 320, cache none -> ram"
    assert done.steps()[0].speedup == pytest.approx(done.total())


def test_verdict_needs_an_interval_above_one_and_the_min_gain():
    a = Ablation(0, 1, BASE, BASE, (Change("cache", "none", "ram"), Change("batch", 16, 32), Change("imgsz", 640, 320)), (), 3,
                 0.05, path=(("cache",), ("batch",), ("imgsz",)))
    rounds = {0: [10.0, 10.0, 10.0], 1: [11.0, 9.9, 10.5], 2: [11.2, 10.0, 10.7], 3: [22.0, 22.0, 22.0]}
    measured = tuple(Repeat(r, c, Status.OK, v) for c, vs in rounds.items() for r, v in enumerate(vs))
    a = dataclasses.replace(a, measured=measured)
    first, second, third = a.steps()
    assert first.interval.low < 1.0 < first.interval.high and first.verdict == NO_GAIN  # the interval includes 1.0
    assert second.interval.low > 1.0 and second.speedup < 1.05 and second.verdict == NO_GAIN  # under the 5% bar
    assert third.verdict == "gain" and third.interval.rounds == 3
    assert first.speedup * second.speedup * third.speedup == pytest.approx(a.total(), rel=1e-12) and a.total() == pytest.approx(2.2)


def test_an_interrupted_ablation_resumes_without_measuring_again():
    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram", "batch": 32})
    study, fake = _study(rec, fake=True), Fake()

    def interrupted(knobs):
        if len(fake.log) == 6:  # five ordering measurements and one of round 2
            raise KeyboardInterrupt
        return fake(knobs)

    with pytest.raises(KeyboardInterrupt):
        _run(study, interrupted)
    kept = Ablation.from_attr(study.user_attrs["ablation"])
    assert len(kept.probes) == 5 and kept.path and len(kept.measured) == 3 * 2 + 2 + 1  # ends, reused round 1, one new
    begun = []
    done = _run(study, fake, begin=lambda changes, repeats: begun.append(changes))
    assert len(fake.log) == 5 + 2 * 2 and done.complete  # nothing measured twice
    assert begun == [("imgsz 640 -> 320", "batch 16 -> 32", "cache none -> ram")]
    again = _run(study, fake, begin=lambda changes, repeats: pytest.fail("nothing left to measure"))
    assert again == done and len(fake.log) == 9


def test_one_change_is_the_finals_and_a_kept_baseline_has_no_ablation():
    rec = Knobs(**{**BASE.to_dict(), "cache": "ram"})
    study = _study(rec)
    done = _run(study, lambda knobs: pytest.fail("measured"))
    assert done.from_finals and done.path == (("cache",),) and done.complete
    assert done.series(0) == [10.0, 11.0, 12.0] and done.series(1) == [20.0, 21.0, 22.0]
    assert done.steps()[0].speedup == pytest.approx(21.0 / 11.0)

    kept = _study(Knobs(**{**BASE.to_dict(), "cache": "ram", "imgsz": 320}))
    finals = Finals.from_attr(kept.user_attrs["finals"])
    flat = tuple(Repeat(m.round, m.of, Status.OK, 10.0) for m in finals.measured)  # no gain: keep the baseline
    kept.set_user_attr("finals", Finals(finals.trials, finals.repeats, flat, 0.05).to_attr())
    assert _run(kept, lambda knobs: pytest.fail("measured")) is None and "ablation" not in kept.user_attrs


# --- a real ablation ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_ablation_of_a_two_knob_change_two_steps_measured_and_reported(demo_yaml, tmp_path, shared_warm):
    """A real search whose one other config is two knobs from the baseline (imgsz 128 -> 96, batch 4 -> 2: every
    other knob fixed), hand-made finals that recommend it (nothing here depends on which config measures
    faster), then the same search resumed: the ablation runs for real, and the report shows it."""
    url = f"sqlite:///{tmp_path}/s.db"
    fixes = ("model=yolov5n", "imgsz=96", "batch=2", "workers=0", "cache=none", "freeze=0", "data=original")
    config = SearchConfig(
        data=str(demo_yaml), trials=2, storage=url, study="abl", baseline="model=yolov5n imgsz=128 batch=4 workers=0",
        fix=fixes, steps=3, max_steps=3, warmup=1, device="cpu", quality="off", repeats=0, seed=1,
        prune_margin=0.0, stop_at_ceiling=0.0,  # both trials measured to their end, whatever they measure
        ends=False,  # the report below is built without them
    )
    first = speedopt.search(config)
    assert [r.result.status for r in first.trials] == [Status.OK, Status.OK]
    study = optuna.load_study(study_name="abl", storage=url)
    assert "ablation" not in study.user_attrs  # no finals (--repeats 0): nothing to explain
    made = [Repeat(r, t, Status.OK, 10.0 * (t + 1)) for r in range(2) for t in (0, 1)]
    study.set_user_attr("finals", Finals((0, 1), 2, tuple(made), 0.05).to_attr())

    started = time.monotonic()
    speedopt.search(dataclasses.replace(config, repeats=2))  # resumed: the finals are complete
    took = time.monotonic() - started
    study = optuna.load_study(study_name="abl", storage=url)
    done = Ablation.from_attr(study.user_attrs["ablation"])
    assert done is not None and done.complete and not done.from_finals
    assert {c.text() for c in done.changes} == {"imgsz 128 -> 96", "batch 4 -> 2"} and done.dropped == ()
    assert len(done.probes) == 2 and all(p.status is Status.OK for p in done.probes)
    steps = done.steps()
    assert len(steps) == 2 and len(done.measured) == 2 * 3  # the ends' from the finals, step 1's first from its ordering
    assert all(m.status is Status.OK and m.images_per_s > 0 for m in done.measured)  # every config ok in every round
    assert done.configs()[0] == records(study)[0].result.requested and done.configs()[-1] == records(study)[1].result.requested
    assert abs(math.prod(s.speedup for s in steps) - done.total()) < 1e-9  # the table sums to the full change

    written = build(study, 10, tmp_path / "reports", measure_validation=False)
    text = written.markdown.read_text()
    section = text.split("## Which change bought what")[1].split("\n## ")[0]
    assert section.count("\n| 1 | ") == 1 and section.count("\n| 2 | ") == 1
    assert f"= {done.total():.3f}x, the full change" in section
    figure = written.markdown.parent / "abl" / "ablation.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "](abl/ablation.png)" in section
    if os.environ.get("SPEEDOPT_SHOW_ABLATION"):
        print(section, f"\nablation took {took:.0f} s")


def test_the_ordering_reuses_a_search_trial_that_measured_the_same_config():
    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram"})
    study, fake = _study(rec, fake=True), Fake()
    single = Knobs(**{**BASE.to_dict(), "imgsz": 320})
    study.add_trial(_trial(single, single, 19.5))  # the search measured baseline + imgsz 320 as trial 2
    done = _run(study, fake)
    assert single not in fake.log[:1] and len(fake.log) == 1 + 2  # one ordering measurement, step 1's rounds 2 and 3
    probe = done.probe([], "imgsz")
    assert probe is not None and probe.images_per_s == 19.5 and probe.message == "trial 2's measurement"
    assert done.path == (("imgsz",), ("cache",)) and done.complete


def test_a_change_that_bought_nothing_is_marked_optional_on_the_printed_commands_line():
    """Issue 56: workers 8 -> 2 gains 1.0x in the fake trainer (the wobble keeps its interval around 1): its step is
    'no measurable gain', and the recommendation's printed command says so on its own line; imgsz 640 -> 320 (2x)
    is not marked."""
    from speedopt import command
    from speedopt.reporting._recommend import _optional
    from speedopt.study import outcome

    rec = Knobs(**{**BASE.to_dict(), "imgsz": 320, "workers": 2})
    study = _study(rec, fake=True)
    done = _run(study, Fake())
    assert [s.verdict.startswith(NO_GAIN) for s in done.steps()] == [False, True] and done.complete
    (marked,) = _optional(outcome(study), 1)
    assert marked.startswith("workers 8 -> 2 (") and "x, " in marked
    assert _optional(outcome(study), 0) == ()  # another trial than the ablation's recommendation: nothing to mark
    line = command.with_optional(command.yolo_train("data.yaml", rec), (marked,))
    assert line.endswith(f"  # optional, no measurable gain in the ablation: {marked}")
    assert command.parse_yolo_train(line).knobs == rec  # the comment is no part of the command read back
