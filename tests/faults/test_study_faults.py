"""Faults in what a study stores and in how runs share it (issue 44, items 9 to 11): a hostile import's NaN
measurements, two runs of one study racing through its finals, and the study's bill.

The studies here are made without a trainer (a protocol and measured trials written as ``speedopt search``
writes them), in real Optuna storages: SQLite, and PostgreSQL where ``SPEEDOPT_TEST_POSTGRES`` names a server.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import Faults, no_traceback, one_line_error

NAN, INF = float("nan"), float("inf")


def _hostile_study(faults: Faults, url: str, trials: tuple[float, ...] = (12.0, NAN, INF, 15.0), figures: float = NAN) -> optuna.Study:
    """A study as `speedopt search` leaves it, made without a trainer, whose stored numbers are NaN and infinities
    where measurements belong: trial 0 the baseline at 12 images/s, one trial per other entry of ``trials`` (each
    with its step figures ``figures``), and finals whose last round holds an infinity."""
    from speedopt.measure import TrialResult
    from speedopt.quality import Feasibility, Verdict, signature
    from speedopt.search import SearchConfig, plan
    from speedopt.status import Status
    from speedopt.study import Finals, Repeat, schema

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    protocol = plan(SearchConfig(data=str(faults.dataset()), device="cpu", quality="off", storage=url)).protocol
    study = optuna.create_study(study_name="hostile", storage=url, direction="maximize")
    schema.write_protocol(study, protocol)
    for i, ips in enumerate(trials):
        knobs = protocol.baseline if i == 0 else dataclasses.replace(protocol.baseline, workers=i)
        result = TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", images_per_s=ips, steps=10,
                             data_wait_fraction=0.2 if i == 0 else figures, step_s_median=figures, setup_s=figures,
                             wall_s=figures, ci_rel=figures, step_s=(0.1, figures, 0.2), images_used=16, train_build_s=figures)
        trial = study.ask()
        if i == 0:
            trial.set_user_attr(schema.ROLE, "baseline")
        for key, value in schema.measurement_attrs(result.to_dict()).items():  # as stored by another tool: unfiltered
            trial.set_user_attr(key, value)
        schema.write_verdict(trial, Verdict(signature(knobs), Feasibility.FEASIBLE, reason="quality off").attrs())
        study.tell(trial, 12.0 + i)
    rounds = (Repeat(0, 0, Status.OK, 10.0), Repeat(0, 3, Status.OK, 15.0), Repeat(1, 0, Status.OK, 10.0), Repeat(1, 3, Status.OK, INF))
    schema.write_finals(study, Finals((0, 3), 2, rounds, 0.0))
    return study


def _strict_json(text: str) -> object:
    """``text`` parsed as JSON proper: NaN and Infinity, which Python writes and JSON does not have, refused."""

    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: {constant} in {text}")

    return json.loads(text, parse_constant=refuse)


# --- item 9: NaN measurements ------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "says"), [
    ("measurement", ["trial 1", "images_per_s", "nan"]),
    ("finals", ["its user attr", "finals", "inf"]),
])
def test_import_refuses_a_study_holding_nan_measurements(faults: Faults, where: str, says: list[str]) -> None:
    # Item 9: an export with NaN measurements imported without a word; its report then ended in a traceback
    # (ValueError: cannot convert float NaN to integer), its `best --format json` printed NaN.
    source = faults.root / "export.db"
    trials = (12.0, NAN, 14.0, 15.0) if where == "measurement" else (12.0, 13.0, 14.0, 15.0)
    study = _hostile_study(faults, f"sqlite:///{source}", trials, figures=0.5)
    if where == "measurement":  # trial 1's images/s is the one number that is not finite
        study.set_user_attr("finals", None)
    target = faults.work / "target.db"
    faults.watch(faults.root)
    one_line_error(faults.run("import", str(source), "--storage", f"sqlite:///{target}"),
                   "refusing to import", "'hostile'", *says, "not a finite number", "nothing was imported")
    assert not target.exists()
    faults.unchanged()


def test_readers_of_a_study_holding_nan_measurements_never_crash_nor_print_nan(faults: Faults) -> None:
    # Item 9: the same numbers in a storage another tool wrote (no import to refuse them): every reader takes a
    # NaN or an infinity for "not measured". The report is written whole, `best --format json` is JSON.
    import speedopt
    from speedopt.study import find_study, records, schema

    url = f"sqlite:///{faults.root / 's.db'}"
    study = _hostile_study(faults, url)
    study.set_user_attr("val_time_" + "0" * 16, {"status": "ok", "val_s": NAN, "val_images": 4, "save_s": NAN})
    done = records(find_study(url, "hostile"))
    assert [r.number for r in done if r.result.ok] == [0, 3]  # NaN and infinite images/s: not measured
    assert all(r.result.step_s == (0.1, 0.2) and r.result.step_s_median is None for r in done[1:])
    assert schema.read_val_time(study, "0" * 16) is None  # a NaN-second pass: not timed (timed again when asked)

    written = speedopt.report("hostile", storage=url, out_dir=str(faults.work / "reports"), measure_validation=False)
    text = Path(written.markdown).read_text()
    assert "## 5. Trials" in text and "| 1 | " in text and "| 2 | " in text  # whole, every trial in it
    assert not any(word in text.lower().split() for word in ("nan", "inf", "nanx", "infx")), text

    best = faults.run("best", "--storage", url, "--format", "json")
    no_traceback(best)
    assert best.returncode == 0, best.stderr
    shown = _strict_json(best.stdout)
    assert isinstance(shown, dict) and shown["trial"] in (0, 3)
    assert shown["images_per_s"] is not None and math.isfinite(shown["images_per_s"])
