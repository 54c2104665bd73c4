"""The report's "Which change bought what", from a stored ablation (no trainer): the table, the product line,
the waterfall figure, and one line why when there is no table."""

import dataclasses
import types

import optuna
import pytest
from optuna.trial import TrialState, create_trial
from PIL import Image

from speedopt.knobs import Knobs
from speedopt.reporting._ablation import section
from speedopt.status import Status
from speedopt.study import Finals, outcome
from speedopt.study._ablation import Ablation, Change, Probe
from speedopt.study.record_types import Repeat

BASE = Knobs(model="yolov5n", imgsz=640, batch=16, workers=8, cache="none", amp=False)
REC = Knobs(**{**BASE.to_dict(), "imgsz": 320, "cache": "ram", "workers": 2})
#: images/s of the path's configs per round: baseline, after imgsz, after cache (which buys nothing measurable).
ROUNDS = {0: [10.0, 9.5, 10.4], 1: [19.0, 18.5, 20.2], 2: [19.5, 18.2, 20.6]}


def _trial(knobs, ips, role=None):
    ran = Knobs(**{**knobs.to_dict(), "workers": 0})
    user = {"status": "ok", "message": "", "images_per_s": ips, "config": ran.to_dict(), "requested": knobs.to_dict(), "feasible": True}
    return create_trial(state=TrialState.COMPLETE, value=ips, user_attrs={**user, **({"role": role} if role else {})})


def _study(winner=True, ablation=True):
    s = optuna.create_study(direction="maximize")
    s.add_trial(_trial(BASE, 10.0, role="baseline"))
    s.add_trial(_trial(REC, 20.0))
    rec = 20.0 if winner else 10.0
    measured = tuple(Repeat(r, t, Status.OK, rec if t else 10.0) for r in range(3) for t in (0, 1))
    s.set_user_attr("finals", Finals((0, 1), 3, measured, 0.05).to_attr())
    if ablation:
        s.set_user_attr("ablation", _ablation().to_attr())
    return s


def _ablation():
    changes = (Change("imgsz", 640, 320), Change("cache", "none", "ram"))
    probes = (Probe((), "imgsz", Status.OK, 19.1), Probe((), "cache", Status.OK, 10.2))
    measured = tuple(Repeat(r, c, Status.OK, v) for c, vs in ROUNDS.items() for r, v in enumerate(vs))
    return Ablation(0, 1, BASE, REC, changes, (Change("workers", 8, 2),), 3, 0.05, probes, (("imgsz",), ("cache",)),
                    (), measured)


def test_section_has_the_table_the_product_and_the_waterfall(tmp_path):
    study = _study()
    lines = section(study, outcome(study), tmp_path, "figs")
    text = "\n".join(lines)
    assert lines[0] == "## Which change bought what"
    assert "| 0 | baseline (trial 0) | 10.00 (9.50-10.40) | - | 1.00x | - |" in text
    # step 1: 19.00 / 10.00; its paired ratios 1.90, 1.947, 1.942
    assert "| 1 | imgsz 640 -> 320 | 19.00 (18.50-20.20) | 1.900x (1.900-1.947x, 3 rounds) | 1.900x | gain |" in text
    # step 2: 19.50 / 19.00 = 1.026; ratios 1.026, 0.984, 1.020: the interval includes 1.0
    assert ("| 2 | cache none -> ram | 19.50 (18.20-20.60) | 1.026x (0.984-1.026x, 3 rounds) | 1.950x | "
            "no measurable gain: you may keep your value |") in text
    assert "Product of the step speedups: 1.900x × 1.026x = 1.950x, the full change" in text
    assert "19.50 images/s over the baseline's 10.00" in text
    assert "- from the baseline: imgsz 640 -> 320 19.10 images/s; cache none -> ram 10.20 images/s" in text
    assert "Not a step: workers 8 -> 2: asked differently, but the trainer ran the same value in both" in text
    assert lines[-2] == "![which change bought what](figs/ablation.png)"
    with Image.open(tmp_path / "ablation.png") as im:
        assert im.size[0] > 300 and im.size[1] > 200


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("kept", "No ablation: the finals found no measurable gain, so the baseline is kept: no change to explain."),
        ("missing", "No ablation: not run yet: rerun the search command to run it."),
        ("off", "No ablation: turned off (--no-ablation)."),
        ("incomplete", "No ablation: incomplete: rerun the search command to finish it."),
    ],
)
def test_no_table_says_why_in_one_line_and_removes_a_stale_figure(tmp_path, case, says):
    (tmp_path / "ablation.png").write_bytes(b"stale")
    study = _study(winner=case != "kept", ablation=case in ("kept", "incomplete"))
    if case == "incomplete":
        ab = _ablation()
        study.set_user_attr("ablation", dataclasses.replace(ab, measured=ab.measured[:4]).to_attr())
    result = outcome(study)
    if case == "off":
        result = dataclasses.replace(result, protocol=types.SimpleNamespace(ablate=False))
    assert section(study, result, tmp_path, "figs") == ["## Which change bought what", "", says, ""]
    assert not (tmp_path / "ablation.png").exists()


def test_no_finals_no_section(tmp_path):
    study = _study()
    study.set_user_attr("finals", None)
    assert section(study, outcome(study), tmp_path, "figs") == []


def test_a_config_on_the_way_that_beat_the_recommendation_is_named(tmp_path):
    study = _study()
    slower = {0: [10.0, 10.0, 10.0], 1: [20.0, 21.0, 19.0], 2: [15.0, 16.0, 14.0]}  # cache costs speed after imgsz
    measured = tuple(Repeat(r, c, Status.OK, v) for c, vs in slower.items() for r, v in enumerate(vs))
    study.set_user_attr("ablation", dataclasses.replace(_ablation(), measured=measured).to_attr())
    text = "\n".join(section(study, outcome(study), tmp_path, "figs"))
    assert "| 2 | cache none -> ram | 15.00 (14.00-16.00) | 0.750x" in text and "(slower in every round) |" in text
    assert ("The config after step 1 measured faster than the recommendation in every round (1.33x (interval "
            "1.31-1.36x, min-max of 3 paired rounds)): keeping your value for cache none -> ram may be faster still") in text
    assert "= 1.500x, the full change" in text
