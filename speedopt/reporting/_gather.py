"""The trial table: one pandas row per measured trial, built once from Optuna's ``trials_dataframe``.

The report renders its tables and figures from it, and writes it beside the report as
``<study>.csv`` (the file people open in a spreadsheet). Columns: Optuna's (``number``, ``value``,
``datetime_start``, ``duration``, ``params_*``), every measurement under its own name (the trial's
user attrs: ``status``, ``images_per_s``, ``data_wait_fraction``, ...), ``config_*`` per knob as run,
``config`` in one line, ``feasibility``, and ``accuracy`` (kept, lost, unknown, not judged, not checked).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedopt.knobs import knobs_text
from speedopt.reporting._filename import write_inside
from speedopt.study import TrialRecord, flat_attrs, records

if TYPE_CHECKING:
    import optuna
    import pandas as pd

_DROPPED = ("log_tail", "requested", "worker", "state", "step_s")


def trial_table(study: optuna.Study, done: Iterable[TrialRecord] | None = None) -> pd.DataFrame:
    """The measured trials of a study, one row each, in trial order (``done``: its records, if read already)."""
    import pandas as pd

    by_number = {r.number: r for r in (records(study) if done is None else done)}
    frame = study.trials_dataframe(attrs=("number", "value", "state", "datetime_start", "datetime_complete", "duration", "params"))
    if frame.empty or not by_number:
        return pd.DataFrame(columns=["number", "status", "feasibility", "config", "images_per_s"])
    frame = frame[frame["number"].isin(list(by_number))].copy()
    numbers = list(frame["number"])
    attrs = {t.number: flat_attrs(t.user_attrs) for t in study.get_trials(deepcopy=False) if t.number in by_number}
    frame = pd.concat([frame, pd.DataFrame([attrs[n] for n in numbers], index=frame.index).drop(columns="state", errors="ignore")], axis=1)
    knobs = pd.DataFrame([by_number[n].config.to_dict() for n in numbers], index=frame.index).add_prefix("config_")
    frame = pd.concat([frame.drop(columns=["config"]), knobs], axis=1)
    frame["config"] = [knobs_text(by_number[n].config) for n in numbers]
    frame["feasibility"] = [by_number[n].feasibility.value for n in numbers]
    # The accuracy verdict as every output names it; "not checked" where quality was off and accuracy knobs differ.
    frame["accuracy"] = ["not checked" if attrs[n].get("accuracy_unchecked") else by_number[n].feasibility.word for n in numbers]
    frame = frame.drop(columns=[c for c in _DROPPED if c in frame.columns])
    return frame.sort_values("number").reset_index(drop=True)


def rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The table's rows as plain dicts, NaN read as None (a figure that was not measured)."""
    out = []
    for record in frame.to_dict("records"):
        out.append({str(k): (None if isinstance(v, float) and v != v else v) for k, v in record.items()})
    return out


def _cell(value: Any) -> Any:
    """Lists and dicts (notes, signature) as JSON, so a spreadsheet gets one readable cell."""
    return json.dumps(value) if isinstance(value, (list, dict, tuple)) else value


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """The trial table as CSV (written whole under a temporary name, then renamed over ``path``: never half a
    file, never through a link planted there)."""
    text = frame.map(_cell).to_csv(index=False)
    return write_inside(path, lambda handle: handle.write(text.encode("utf-8", "surrogateescape")))
