"""The probe budget's rules on synthetic probe results: when a budget can judge, how it grows, the paired loss.

The Judge here answers probes from a script instead of a trainer (the real probes are in test_judge.py's
slow tests): what is tested is which probes it asks for, at which budget, and what it concludes.
"""

from dataclasses import dataclass, field

import pytest

from speedopt import quality
from speedopt.cli._progress import accuracy_text
from speedopt.knobs import Knobs
from speedopt.quality import Feasibility, ProbeBudget
from speedopt.quality._budget import not_informative, paired_loss
from speedopt.status import Status


def test_the_ladder_doubles_epochs_then_the_fraction_then_epochs_again():
    asked = ProbeBudget(10, 0.25)
    steps, budget = [], asked
    while (budget := budget.grown(asked)) is not None:
        steps.append((budget.epochs, budget.fraction))
    assert steps == [(20, 0.25), (40, 0.25), (40, 0.5), (40, 1.0), (80, 1.0), (160, 1.0), (300, 1.0)]
    assert str(asked) == "10 epochs on 0.25 of the train set" and asked.size == 2.5


def test_a_budget_is_informative_only_when_the_baseline_learned_and_its_seeds_agree():
    assert "learned too little" in not_informative(0.0, 0.0, 0.01)  # probes that learned nothing
    assert "learned too little" in not_informative(quality.LOW_MAP - 1e-4, 0.0, 0.01)
    assert not_informative(quality.LOW_MAP, 0.0, 0.01) == ""
    assert "over a quarter" in not_informative(0.08, 0.03, 0.05)  # the seeds disagree against what they learned
    assert "over twice the allowed loss" in not_informative(0.5, 0.03, 0.01)  # ... or against the loss allowed
    assert not_informative(0.5, 0.02, 0.01) == ""


def test_the_paired_loss_is_the_mean_difference_with_two_standard_errors():
    loss, half = paired_loss((0.30, 0.32), (0.28, 0.31))  # differences 0.02 and 0.01
    assert loss == pytest.approx(0.015) and half == pytest.approx(0.01)  # two seeds: the differences' distance
    loss, half = paired_loss((0.3, 0.3, 0.3), (0.29, 0.28, 0.27))  # differences 0.01, 0.02, 0.03: sd 0.01
    assert loss == pytest.approx(0.02) and half == pytest.approx(2 * 0.01 / 3**0.5)
    with pytest.raises(ValueError):
        paired_loss((0.3,), (0.2,))


@dataclass
class Scripted(quality.Judge):
    """A Judge whose probes answer from ``maps`` (signature imgsz, epochs) -> per-seed mAP50-95, each taking ``cost``
    seconds per epoch x fraction; ``asked`` records every probe it asked for."""

    maps: dict[tuple[int, int], tuple[float, ...]] = field(default_factory=dict)
    cost: float = 1.0
    asked: list[tuple[int, int, float, int]] = field(default_factory=list)

    def score(self, knobs, seed, budget=None):
        budget = budget or self.policy.budget
        self.asked.append((knobs.imgsz, budget.epochs, budget.fraction, seed))
        self.ran += 1
        seconds = self.cost * budget.size
        self.spent[quality.signature_text(quality.signature(knobs))] = self.spent.get(quality.signature_text(quality.signature(knobs)), 0) + seconds
        value = self.maps[(knobs.imgsz, budget.epochs)][seed]
        return quality.ProbeResult(Status.OK, "", quality.signature(knobs), seed, budget.epochs, budget.fraction, "id",
                                   map50=value, map50_95=value, images=10, seconds=seconds)


def _judge(grow_s: float, maps, **policy) -> Scripted:
    target = quality.ProbeTarget("data.yaml", "id", "ultralytics", None, "cpu")
    p = quality.Policy(mode="all", epochs=2, fraction=1.0, grow_s=grow_s, **policy)
    return Scripted(p, target, Knobs(model="yolov5n", imgsz=160, batch=8), storage=None, owner="t", maps=maps)


SMALL = Knobs(model="yolov5n", imgsz=32, batch=8)


def test_an_uninformative_budget_grows_and_the_candidate_is_paired_at_the_grown_one():
    maps = {(160, 2): (0.01, 0.0), (160, 4): (0.20, 0.21), (32, 4): (0.10, 0.12)}
    judge = _judge(100.0, maps)
    verdict = judge.verdict(SMALL, 100.0, None)
    # The baseline at 2 epochs learned nothing; at 4 it did. The candidate ran at 4, on the baseline's seeds.
    assert judge.asked == [(160, 2, 1.0, 0), (160, 2, 1.0, 1), (160, 4, 1.0, 0), (160, 4, 1.0, 1), (32, 4, 1.0, 0), (32, 4, 1.0, 1)]
    assert verdict.feasibility is Feasibility.REJECTED and verdict.budget == ProbeBudget(4, 1.0)
    assert verdict.map_loss == pytest.approx(0.095) and verdict.spread == pytest.approx(0.01)  # diffs 0.10, 0.09
    assert "probe budget grown from 2 epochs on 1 of the train set to 4 epochs" in verdict.reason
    attrs = verdict.attrs()
    assert attrs["probe_epochs"] == 4 and attrs["baseline_spread"] == pytest.approx(0.01)
    assert verdict.probes_run == 6 and sum(attrs["probe_seconds"].values()) == pytest.approx(2 * 2 + 4 * 2 + 4 * 2)
    assert set(attrs["probe_seconds"]) == {"yolov5n 160px b8 amp=on freeze=0", "yolov5n 32px b8 amp=on freeze=0"}


def test_a_budget_that_stays_uninformative_within_the_cap_makes_the_candidate_unknown_unprobed():
    maps = {(160, e): (0.0, 0.0) for e in (2, 4, 8)}
    judge = _judge(20.0, maps)  # 2+2 s, then 4+4 s; 8 epochs would take the baseline's probes to 28 s
    verdict = judge.verdict(SMALL, 100.0, None)
    assert [a[1] for a in judge.asked] == [2, 2, 4, 4]  # the candidate never ran: its probe could not say anything
    assert verdict.feasibility is Feasibility.UNKNOWN and verdict.constraint() == 1.0
    assert "accuracy unknown: the baseline probes reached only mAP50-95 0.0000" in verdict.reason
    assert "even at 4 epochs on 1 of the train set" in verdict.reason and "--probe-grow 20" in verdict.reason
    assert "give --weights" in verdict.reason
    tuned = _judge(20.0, maps, weights="/w/best.pt").verdict(SMALL, 100.0, None)  # weights given: not suggested again
    assert "--weights" not in tuned.reason and tuned.reason.endswith("; raise --probe-grow, --probe-epochs or --probe-fraction")
    never = _judge(0.0, maps)  # --probe-grow 0: the budget as asked
    assert never.verdict(SMALL, 100.0, None).feasibility is Feasibility.UNKNOWN and len(never.asked) == 2


def test_a_small_paired_loss_inside_the_allowed_is_kept_and_one_that_straddles_it_unknown():
    kept = _judge(0.0, {(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)}).verdict(SMALL, 100.0, None)
    assert kept.feasibility is Feasibility.FEASIBLE and kept.map_loss == pytest.approx(0.0015)
    assert kept.constraint() <= 0 and "within the allowed 0.0100" in kept.reason
    text = accuracy_text(kept)
    assert text.startswith("loss +0.00") and text.endswith(" +/-0.001 kept"), text  # the cell every trial line shows
    straddles = _judge(0.0, {(160, 2): (0.300, 0.310), (32, 2): (0.295, 0.290)}).verdict(SMALL, 100.0, None)
    assert straddles.feasibility is Feasibility.UNKNOWN and straddles.reason.startswith("accuracy unknown: mAP50-95")
    assert straddles.reason.endswith("or give more --probe-seeds than 2")
    three = _judge(0.0, {(160, 2): (0.3, 0.3, 0.3), (32, 2): (0.3, 0.3, 0.3)}, seeds=3)
    assert three.verdict(SMALL, 100.0, None).feasibility is Feasibility.FEASIBLE and len(three.asked) == 6
