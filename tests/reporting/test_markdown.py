"""A real search, then its report: sections, numbers equal to the stored attrs, valid figures."""

import json
import re

import optuna
import pytest
from optuna.trial import TrialState
from PIL import Image

from speedopt import command
from speedopt.knobs import Knobs
from speedopt.study import schema
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def searched(small_study):
    """The shared 3-trial search (quality off), reported automatically at its end."""
    return small_study


def _trials(url, name):
    return optuna.load_study(study_name=name, storage=url).get_trials(states=(TrialState.COMPLETE,))


@pytest.mark.slow
def test_search_writes_the_report(searched):
    work, _, name = searched
    assert (work / "reports" / f"{name}.md").is_file()
    assert (work / "reports" / name / "history.png").is_file()


@pytest.mark.slow
def test_report_sections_numbers_and_figures(searched, tmp_path):
    work, url, name = searched
    out = run_cli("report", "--storage", url, "--study", name, "--out", str(tmp_path), "--epochs", "50", cwd=work)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / f"{name}.md").read_text()
    assert "Projected full run (50 epochs" in text
    for n, title in enumerate(
        ["Machine and dataset", "Baseline vs recommended", "Projected full run", "Recommended command", "Trials",
         "Bottlenecks", "Parameter importance and figures"], start=1):
        assert f"## {n}. {title}" in text
    assert "an estimate" in text and "Inputs (baseline)" in text

    trials = {t.number: t for t in _trials(url, name)}
    section = text.split("## 5. Trials")[1].split("## 6.")[0]
    rows = re.findall(r"^\| (\d+) \| (yolov5\S+ [^|]+) \| ([\d.]+) \| ", section, re.M)
    assert rows, text
    for number, _, ips in rows:
        assert float(ips) == round(trials[int(number)].user_attrs["images_per_s"], 2)
    base = trials[0].user_attrs
    assert f"| images/s (search, measured once) | {base['images_per_s']:.2f} |" in text
    # the yardstick: the baseline's model FLOPs per trained image (an estimate), no peak on a CPU; the summary
    measured = schema.flat_attrs(base)  # the yardstick is stored in the trial's measurement attr
    (flops,) = [line for line in text.splitlines() if line.startswith("| model GFLOPs per trained image")]
    assert f"| {measured['gflops_per_image']:.3g} |" in flops and measured["gflops_per_image"] > 0
    assert "| share of the GPU's dense peak (estimate) | peak unknown on a CPU |" in text
    (summary,) = [line for line in text.splitlines() if line.startswith("**What bounded the search**")]
    assert "; peak unknown on a CPU: " in summary and "levers left" in summary, summary

    # The finals: the baseline and one finalist in 2 rounds, every measurement in the table, the decision.
    study = optuna.load_study(study_name=name, storage=url)
    finals = study.user_attrs["finals"]
    assert len(finals["trials"]) == 2 and len(finals["measured"]) == 4
    for m in finals["measured"]:
        assert f"{m['images_per_s']:.2f}" in text.split("## Finals")[1].split("## 3.")[0]
    assert "min-max of the paired per-round ratios" in text and "**Decision:**" in text
    assert "| workers | no | always 0:" in text  # Ultralytics on CPU: the real run ignores workers
    assert f"{100 * base['data_wait_fraction']:.1f}%" in text

    bash = re.search(r"```bash\n(.+?)\n```", text, re.S).group(1)
    python = re.search(r"```python\n(.+?)\n```", text, re.S).group(1)
    best = json.loads(run_cli("best", "--storage", url, "--study", name, "--format", "json", cwd=work).stdout)
    assert command.parse_yolo_train(bash).knobs == Knobs(**best["config"])
    assert command.parse_python_train(python).knobs == Knobs(**best["config"])
    # One payback (issue 56): the search's summary, its report (the study's own epochs) and best --format json agree
    (said,) = [line.removeprefix("bill: ") for line in (work / "search.out").read_text().splitlines() if line.startswith("bill: ")]
    reported = (work / "reports" / f"{name}.md").read_text().split("## What the search cost")[1].split("\n\n")[1]
    assert reported == said[0].upper() + said[1:] + "."
    paid = best["payback"]
    assert said.startswith("this search took ") and paid["epochs"] == study.user_attrs["epochs"] and paid["basis"] in said
    assert (paid["after_epochs"] is None) == ("no saving was claimed" in said)
    assert paid["after_epochs"] is None or f"after {paid['after_epochs']} epochs" in said or f"take {paid['after_epochs']} epochs" in said
    rounds = sorted(m["images_per_s"] for m in finals["measured"] if m["trial"] == best["trial"])
    assert best["images_per_s"] == pytest.approx(sum(rounds) / 2)  # the median of its 2 rounds
    assert best["speedup"]["rounds"] == 2 and best["speedup"]["low"] <= best["speedup"]["median"]

    pngs = sorted((tmp_path / name).glob("*.png"))
    assert [p.name for p in pngs] == ["finals.png", "history.png", "knobs.png"]  # nothing probed: no speed_vs_map

    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(png) as im:
            assert im.size[0] > 300 and im.size[1] > 200
        assert f"]({name}/{png.name})" in text  # relative links: the folder can move as a whole


@pytest.mark.slow
def test_best_formats(searched):
    work, url, name = searched
    cli = run_cli("best", "--storage", url, "--study", name, cwd=work).stdout.strip()
    py = run_cli("best", "--storage", url, "--study", name, "--format", "python", cwd=work).stdout
    yml = run_cli("best", "--storage", url, "--study", name, "--format", "yaml", cwd=work).stdout
    assert command.parse_yolo_train(cli).knobs == command.parse_python_train(py).knobs
    assert "config:" in yml and "images_per_s:" in yml


@pytest.mark.slow
def test_report_on_missing_or_empty_study_exit_2(searched, tmp_path):
    work, url, _ = searched
    missing = run_cli("report", "--storage", url, "--study", "nope", cwd=work)
    assert missing.returncode == 2 and "no study 'nope'" in missing.stderr and "Traceback" not in missing.stderr
    empty_url = f"sqlite:///{tmp_path}/empty.db"
    plain = optuna.create_study(study_name="empty", storage=empty_url)
    refused = run_cli("report", "--storage", empty_url, cwd=tmp_path)
    assert refused.returncode == 2 and "has no speedopt schema version" in refused.stderr and "re-run the search" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    plain.set_user_attr(schema.SCHEMA, schema.SCHEMA_VERSION)
    empty = run_cli("report", "--storage", empty_url, cwd=tmp_path)
    assert empty.returncode == 2 and "no completed trial" in empty.stderr
    assert len(empty.stderr.strip().splitlines()) == 1
