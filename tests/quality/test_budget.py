"""The verdict's rules on synthetic probe results: when a budget can judge, how a look grows, what it costs, the paired loss.

The Judge here answers probes from a script instead of a trainer (the real probes are in test_judge.py's
slow tests): what is tested is which probes it asks for, at which budget and seeds, and what it concludes.
"""

from dataclasses import dataclass, field

import pytest

from speedopt import quality
from speedopt.cli._progress import accuracy_text
from speedopt.engines import EngineSpec
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.quality import Feasibility, ProbeBudget
from speedopt.quality._budget import not_informative, t_quantile
from speedopt.quality._price import Price, rough, saving_s
from speedopt.quality._rule import CONFIRM_SEED0
from speedopt.status import Status


def test_the_ladder_doubles_epochs_then_the_fraction_then_epochs_again():
    asked = ProbeBudget(10, 0.25)
    steps, budget = [], asked
    while (budget := budget.grown(asked)).within(0.05, 1000):  # 5% of a 1000-epoch run: 50 epochs of the set
        steps.append((budget.epochs, budget.fraction))
    assert steps == [(20, 0.25), (40, 0.25), (40, 0.5), (40, 1.0)]  # 80 epochs on all of it would pass the share
    assert str(asked) == "10 epochs on 0.25 of the train set" and asked.size == 2.5
    assert ProbeBudget(5, 1.0).within(0.05, 100) and not ProbeBudget(6, 1.0).within(0.05, 100)


def test_the_confirmation_is_the_first_probe_up_the_ladder_twice_the_screened_one_within_the_share():
    asked = ProbeBudget(10, 0.25)
    assert asked.twice(asked, 0.05, 100) == ProbeBudget(20, 0.25)  # 5 epochs of the set: the cap
    assert asked.twice(asked, 0.05, 1000) == ProbeBudget(20, 0.25)  # the cheapest second length
    assert ProbeBudget(40, 0.25).twice(asked, 0.05, 1000) == ProbeBudget(40, 0.5)  # epochs at 4x: the fraction
    assert ProbeBudget(20, 0.25).twice(asked, 0.05, 100) is None  # screened at the cap: no second length


def test_only_a_probe_that_learned_nothing_is_blind():
    assert "learned too little" in not_informative(0.0)  # probes that learned nothing
    assert "learned too little" in not_informative(quality.LOW_MAP - 1e-4)
    assert not_informative(quality.LOW_MAP) == ""
    assert not_informative(0.08) == ""  # seeds that disagree are no reason: the paired differences decide


def test_t_quantile_is_students_one_sided_point():
    assert t_quantile(2) == pytest.approx(3.0777, rel=1e-3) and t_quantile(10) == pytest.approx(1.383, rel=1e-3)
    assert t_quantile(8, 0.95) == pytest.approx(1.8946, rel=1e-3)


def test_a_look_is_priced_from_measured_probes_and_runs_only_while_it_pays():
    assert rough(30) == "under a minute" and rough(41 * 60) == "41 min" and rough(125 * 60) == "2 h 05 min"
    assert saving_s(4800, 10.0, 20.0) == pytest.approx(240.0) and saving_s(4800, None, 20.0) is None
    assert saving_s(4800, 20.0, 10.0) == pytest.approx(-240.0)  # slower: it saves nothing
    assert Price(4, 100.0, "", 240.0, 100).worth and not Price(4, 300.0, "", 240.0, 100).worth
    assert Price(4, None, "", 240.0, 100).worth and Price(4, 300.0, "", None, 100).worth  # unknown: no ground to stop
    assert Price(0, 0.0, "", -5.0, 100).worth  # all cached: free
    text = Price(4, 180.0, "45 s per probe", 41 * 60.0, 100).text()
    assert text == "about 3 min of probes (4 probes; estimate: 45 s per probe); it could save 41 min over your 100 epochs (estimate: measured images/s)"


@dataclass
class Scripted(quality.Judge):
    """A Judge whose probes answer from ``maps`` (signature imgsz, epochs) -> per-seed mAP50-95 (the confirmation's fresh
    seeds from (imgsz, epochs, "fresh"), or 0.5 when not scripted), each taking ``cost`` seconds per epoch x fraction;
    ``asked`` records every probe it ran (answers are cached, as the storage would)."""

    maps: dict[tuple[int, int], tuple[float, ...]] = field(default_factory=dict)
    cost: float = 1.0
    asked: list[tuple[int, int, float, int]] = field(default_factory=list)
    answered: dict[tuple[int, int, float, int], quality.ProbeResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.note = self.notes.append

    def _cached(self, knobs, seed, budget):
        return self.answered.get((knobs.imgsz, budget.epochs, budget.fraction, seed))

    def _probe(self, knobs, seed, budget):
        key = (knobs.imgsz, budget.epochs, budget.fraction, seed)
        self.asked.append(key)
        self.ran += 1
        seconds = self.cost * budget.size
        name = quality.signature_text(quality.signature(knobs))
        self.spent[name] = self.spent.get(name, 0) + seconds
        if seed >= CONFIRM_SEED0:
            value = self.maps.get((knobs.imgsz, budget.epochs, "fresh"), (0.5,) * self.policy.confirm_seeds)[seed - CONFIRM_SEED0]
        else:
            value = self.maps[(knobs.imgsz, budget.epochs)][seed]
        result = quality.ProbeResult(Status.OK, "", quality.signature(knobs), seed, budget.epochs, budget.fraction, "id",
                                     map50=value, map50_95=value, images=10, seconds=seconds)
        self.answered[key] = result
        return result


def _judge(grow_s: float, maps, mode="all", run_epochs=100, train_images=100, **policy) -> Scripted:
    target = quality.ProbeTarget("data.yaml", "id", EngineSpec("ultralytics"), "cpu", train_images=train_images, run_epochs=run_epochs)
    p = quality.Policy(mode=mode, epochs=2, fraction=1.0, grow_s=grow_s, **policy)
    return Scripted(p, target, Knobs(model="yolov5n", imgsz=160, batch=8), storage=None, owner="t", maps=maps)


SMALL = Knobs(model="yolov5n", imgsz=32, batch=8)


def test_an_uninformative_budget_grows_and_the_candidate_is_paired_at_the_grown_one():
    maps = {(160, 2): (0.01, 0.0), (160, 4): (0.20, 0.21), (32, 4): (0.10, 0.12)}
    judge = _judge(100.0, maps)
    verdict = judge.verdict(SMALL, 100.0, None)
    # The baseline at 2 epochs learned nothing; at 4 it did. The candidate ran at 4, on the baseline's seeds.
    assert judge.asked == [(160, 2, 1.0, 0), (160, 2, 1.0, 1), (160, 4, 1.0, 0), (160, 4, 1.0, 1), (32, 4, 1.0, 0), (32, 4, 1.0, 1)]
    assert verdict.feasibility is Feasibility.REJECTED and verdict.budget == ProbeBudget(4, 1.0)
    assert verdict.map_loss == pytest.approx(0.095) and verdict.spread == pytest.approx(3.0777 * 0.005, rel=1e-3)  # diffs 0.10, 0.09
    assert "probe budget grown from 2 epochs on 1 of the train set to 4 epochs" in verdict.reason
    attrs = verdict.attrs()
    assert attrs["probe_epochs"] == 4 and attrs["baseline_spread"] == pytest.approx(0.01)
    assert verdict.probes_run == 6 and sum(attrs["probe_seconds"].values()) == pytest.approx(2 * 2 + 4 * 2 + 4 * 2)
    assert set(attrs["probe_seconds"]) == {"yolov5n 160px b8 amp=on freeze=0", "yolov5n 32px b8 amp=on freeze=0"}
    assert attrs["probe_estimate_s"] == pytest.approx(8.0)  # before they ran: 2 probes x 4 s, as the baseline's measured


def test_a_budget_that_stays_uninformative_within_the_cap_makes_the_candidate_unknown_unprobed():
    maps = {(160, e): (0.0, 0.0) for e in (2, 4, 8)}
    judge = _judge(20.0, maps, run_epochs=1000)  # 2+2 s, then 4+4 s; 8 epochs would take the baseline's probes to 28 s
    verdict = judge.verdict(SMALL, 100.0, None)
    assert [a[1] for a in judge.asked] == [2, 2, 4, 4]  # the candidate never ran: its probe could not say anything
    assert verdict.feasibility is Feasibility.UNKNOWN and verdict.constraint() == 1.0
    assert "accuracy unknown: the baseline probes reached only mAP50-95 0.0000" in verdict.reason
    assert "even at 4 epochs on 1 of the train set" in verdict.reason and "--probe-grow 20" in verdict.reason
    assert "give --weights" in verdict.reason
    tuned = _judge(20.0, maps, run_epochs=1000, weights="/w/best.pt").verdict(SMALL, 100.0, None)  # weights given: not suggested again
    assert "--weights" not in tuned.reason and tuned.reason.endswith("; raise --probe-grow, --probe-share, --probe-epochs or --probe-fraction")
    never = _judge(0.0, maps)  # --probe-grow 0: the budget as asked
    assert never.verdict(SMALL, 100.0, None).feasibility is Feasibility.UNKNOWN and len(never.asked) == 2


def test_the_share_cap_ends_the_ladder_before_the_time_cap_does():
    maps = {(160, e): (0.0, 0.0) for e in (2, 4, 8)}
    judge = _judge(1e9, maps, run_epochs=100, share=0.05)  # 5 epochs of the set per probe: 4 fits, 8 does not
    verdict = judge.verdict(SMALL, 100.0, None)
    assert max(a[1] * a[2] for a in judge.asked) <= 5  # no probe trained more than the share
    assert [a[1] for a in judge.asked] == [2, 2, 4, 4]
    assert "a larger budget would train more than 5% of your 100-epoch run (5 epochs of the train set)" in verdict.reason


def test_a_decisive_loss_under_a_noisy_baseline_is_lost():
    # Issue 43: the baseline's seeds differ by 0.05, over twice the allowed 0.02; the candidate, paired seed by seed,
    # loses 0.30 and 0.28: the differences agree, so the interval lies far beyond the allowed loss.
    maps = {(160, 2): (0.60, 0.55), (32, 2): (0.30, 0.27)}
    judge = _judge(0.0, maps, max_loss="0.02")
    verdict = judge.verdict(SMALL, 100.0, None)
    assert verdict.feasibility is Feasibility.REJECTED and verdict.map_loss == pytest.approx(0.29)
    assert verdict.map_loss - verdict.spread > 0.02 and verdict.reference_spread == pytest.approx(0.05)
    assert len(judge.asked) == 4 and "beyond the allowed 0.0200" in verdict.reason


BASE8 = (0.30, 0.31, 0.29, 0.32, 0.30, 0.28, 0.31, 0.30)  # eight fresh seeds' baseline mAP50-95


def _fresh(diffs: tuple[float, ...], base: tuple[float, ...] = BASE8) -> tuple[float, ...]:
    return tuple(b - d for b, d in zip(base, diffs, strict=True))


SMALL_DIFFS = (0.001, 0.003, 0.0, 0.002, -0.001, 0.002, 0.001, 0.0)  # mean 0.001, sd 0.0013


def _confirmed(maps: dict, epochs: tuple[int, int] = (2, 4), diffs=(SMALL_DIFFS, SMALL_DIFFS)) -> dict:
    """``maps`` with the confirmation's fresh seeds scripted at both its lengths."""
    for e, d in zip(epochs, diffs, strict=True):
        maps[(160, e, "fresh")], maps[(32, e, "fresh")] = BASE8, _fresh(d)
    return maps


def test_a_small_consistent_difference_is_kept_once_fresh_seeds_confirm_it():
    judge = _judge(0.0, _confirmed({(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)}))
    kept = judge.verdict(SMALL, 100.0, None)
    assert kept.feasibility is Feasibility.FEASIBLE and kept.map_loss == pytest.approx(0.001)  # the confirmation's loss
    assert kept.budget == ProbeBudget(4, 1.0) and kept.risk == pytest.approx(0.05)  # the first confirmation: half of 10%
    assert kept.constraint() <= 0 and "within the allowed 0.0100" in kept.reason
    assert "confirmed on 8 fresh seeds at risk 5%" in kept.reason and "screened kept at 2 epochs" in kept.reason
    fresh = [a for a in judge.asked if a[3] >= CONFIRM_SEED0]
    assert {a[3] for a in fresh} == set(range(CONFIRM_SEED0, CONFIRM_SEED0 + 8)) and {a[1] for a in fresh} == {2, 4}
    assert not {a[3] for a in judge.asked if a[3] < CONFIRM_SEED0} & {a[3] for a in fresh}  # screening never used them
    assert kept.attrs()["confirm_risk"] == pytest.approx(0.05) and kept.attrs()["run_map_loss"] == pytest.approx(0.001)
    text = accuracy_text(kept)
    assert text.startswith("loss +0.00") and text.endswith(" kept"), text  # the cell every trial line shows
    second = judge.verdict(Knobs(model="yolov5n", imgsz=32, batch=8, freeze=1), 100.0, None)  # another candidate
    assert second.risk == pytest.approx(0.025)  # each confirmation spends half of what the earlier ones left


def test_no_kept_is_read_while_the_baseline_gets_worse_with_the_probes_length():
    # Issue 52's truth benchmark: a fine-tune's baseline probes scored 0.84 at the short length and 0.40 at the long
    # one (the learning rate's first peak disrupts the checkpoint); a frozen backbone, disrupted less, led by 0.2
    # there and lost 0.03-0.08 at the run's length. While the baseline gets worse with length, a kept cannot be read.
    maps = _confirmed({(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)})
    maps[(160, 4, "fresh")] = tuple(b - 0.2 for b in BASE8)  # the baseline at 4 epochs: 0.2 worse on every seed
    maps[(32, 4, "fresh")] = tuple(b - 0.2 - d for b, d in zip(BASE8, SMALL_DIFFS, strict=True))  # still paired
    verdict = _judge(0.0, maps).verdict(SMALL, 100.0, None)
    assert verdict.feasibility is Feasibility.UNKNOWN and verdict.constraint() == 1.0
    assert "loss 0.0010 +/- " in verdict.reason and "within the allowed 0.0100" in verdict.reason  # what it measured
    assert "the baseline's own probes got worse from 2 epochs on 1 of the train set to 4 epochs" in verdict.reason
    assert verdict.reason.endswith("raise --probe-share (longer probes)")


def test_fresh_seeds_that_show_the_loss_undo_a_screened_kept():
    maps = _confirmed({(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)}, diffs=(SMALL_DIFFS, tuple(d + 0.03 for d in SMALL_DIFFS)))
    lost = _judge(0.0, maps).verdict(SMALL, 100.0, None)
    assert lost.feasibility is Feasibility.REJECTED and lost.map_loss == pytest.approx(0.031) and lost.constraint() > 0
    assert "beyond the allowed 0.0100" in lost.reason


def test_a_loss_that_grows_with_the_probes_length_is_carried_on_to_the_run():
    # 0.001 at 2 epochs, 0.004 at 4: within the allowed 0.01 at both lengths, but growing 0.003 a doubling;
    # a 100-epoch run is 4.6 doublings past 4 epochs: about 0.018, beyond the allowed loss. No probe can say kept.
    grows = (SMALL_DIFFS, tuple(d + 0.003 for d in SMALL_DIFFS))
    judge = _judge(0.0, _confirmed({(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)}, diffs=grows))
    verdict = judge.verdict(SMALL, 100.0, None)
    assert verdict.feasibility is Feasibility.UNKNOWN and verdict.constraint() == 1.0
    assert verdict.map_loss == pytest.approx(0.004) and verdict.run_loss == pytest.approx(0.004 + 0.003 * 4.644, rel=1e-3)
    assert "carried on to your 100-epoch run: +0.0179" in verdict.reason and verdict.reason.startswith("accuracy unknown:")
    short = _judge(0.0, _confirmed({(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)}, diffs=grows), run_epochs=5, share=1.0)
    assert short.verdict(SMALL, 100.0, None).feasibility is Feasibility.FEASIBLE  # a 5-epoch run: 4 epochs is most of it
    shrinks = (tuple(d + 0.003 for d in SMALL_DIFFS), SMALL_DIFFS)  # no credit for a loss that shrinks: the long look's
    kept = _judge(0.0, _confirmed({(160, 2): (0.300, 0.310), (32, 2): (0.298, 0.309)}, diffs=shrinks)).verdict(SMALL, 100.0, None)
    assert kept.feasibility is Feasibility.FEASIBLE and kept.run_loss == pytest.approx(kept.map_loss)


def test_a_straddle_doubles_the_seeds_first_then_grows_the_budget():
    # Two seeds straddle (differences 0.0 and 0.012 against 0.01); four seeds decide at the same budget.
    maps = {(160, 2): (0.30, 0.31, 0.30, 0.31, 0.3, 0.3, 0.3, 0.3), (32, 2): (0.30, 0.298, 0.299, 0.309, 0.3, 0.3, 0.3, 0.3)}
    judge = _judge(0.0, _confirmed(maps))
    verdict = judge.verdict(SMALL, 100.0, None)
    assert sorted({a[3] for a in judge.asked if a[3] < CONFIRM_SEED0}) == [0, 1, 2, 3]
    assert verdict.feasibility is Feasibility.FEASIBLE and "screened kept at 2 epochs on 1 of the train set on 4 seeds" in verdict.reason
    # At the most seeds still straddling: the next budget up the ladder, from two seeds again.
    wide = {(160, 2): (0.30, 0.31) * 4, (32, 2): (0.30, 0.29) * 4, (160, 4): (0.40, 0.41), (32, 4): (0.399, 0.409)}
    grown = _judge(0.0, wide)
    verdict = grown.verdict(SMALL, 100.0, None)
    screened = [a for a in grown.asked if a[1] == 4 and a[3] < CONFIRM_SEED0]
    assert screened == [(160, 4, 1.0, 0), (160, 4, 1.0, 1), (32, 4, 1.0, 0), (32, 4, 1.0, 1)]
    assert max(a[3] for a in grown.asked if a[1] == 2) == 7  # 2, 4, then 8 seeds at the first budget
    # Screened kept at 4 epochs, the longest probe within 5% of the run: no second length to confirm it at.
    assert verdict.feasibility is Feasibility.UNKNOWN and verdict.budget == ProbeBudget(4, 1.0)
    assert "no probe of at least twice that length fits within 5% of your 100-epoch run" in verdict.reason
    assert all(a[3] < CONFIRM_SEED0 for a in grown.asked)


def test_a_straddle_stops_where_the_next_look_costs_more_than_the_speedup_saves():
    maps = {(160, 2): (0.30, 0.31) * 4, (32, 2): (0.30, 0.29) * 4}
    # 100 epochs x 100 images: 10,000 images, 50 s at the baseline's 200 images/s and 40 s at 250: 10 s saved.
    # The first look (4 probes of 2 s) costs 8 s: it runs; the next (4 more, 8 s) ... and then 8 more (16 s) would not.
    judge = _judge(0.0, maps, mode="probe")
    verdict = judge.verdict(SMALL, 250.0, None, baseline_ips=200.0)
    assert verdict.feasibility is Feasibility.UNKNOWN and verdict.constraint() == 1.0
    assert max(a[3] for a in judge.asked) == 3  # two looks: 2, then 4 seeds; 8 would cost 16 s against 10 s saved
    assert "would cost more than the decision is worth: it could save under a minute over your 100 epochs" in verdict.reason
    assert verdict.saving_s == pytest.approx(10.0) and verdict.attrs()["saving_s"] == pytest.approx(10.0)
    assert judge.notes and judge.notes[0].startswith("judging yolov5n 32px b8 amp=on freeze=0 at 2 epochs on 1 of the train set, 2 seeds: ")
    slower = _judge(0.0, maps, mode="probe").verdict(SMALL, 150.0, None, baseline_ips=200.0)  # not faster: never probed
    assert slower.feasibility is Feasibility.UNKNOWN and slower.map_loss is None
    assert "accuracy unknown: not probed: the next look" in slower.reason and "saves nothing" in slower.reason
    maps.update({(160, 4): (0.30, 0.31) * 4, (32, 4): (0.30, 0.29) * 4})  # straddling at every budget
    every = _judge(0.0, maps, mode="all")  # --quality all: judged anyway, every look up to the share cap
    assert every.verdict(SMALL, 150.0, None, baseline_ips=200.0).map_loss is not None
    assert max(a[1] * a[2] for a in every.asked) == 4  # 8 epochs would pass 5% of the 100-epoch run


def test_an_asked_budget_over_the_share_is_refused(demo_yaml):
    from speedopt.data import load

    ds = load(str(demo_yaml))
    assert quality.make_policy("probe", "0.01", 5, 1.0, None, ds, run_epochs=100).share == 0.05
    with pytest.raises(UsageError, match=r"a probe of 6 epochs on 1 of the train set trains more than 5% of your 100-epoch run"):
        quality.make_policy("probe", "0.01", 6, 1.0, None, ds, run_epochs=100)
    with pytest.raises(UsageError, match="--probe-share"):
        quality.make_policy("probe", "0.01", 1, 1.0, None, ds, share=0.0)
