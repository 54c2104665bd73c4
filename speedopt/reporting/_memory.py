"""Predicted against measured peak memory in a report (see :mod:`speedopt.search._memory_model`)."""

from __future__ import annotations

from speedopt.knobs import knobs_text
from speedopt.status import Status
from speedopt.study import TrialRecord


def memory_section(done: list[TrialRecord]) -> list[str]:
    """``## Peak memory: predicted before running, and measured`` (nothing when no trial was predicted)."""
    predicted = [r for r in done if r.result.predicted_peak_mb is not None]
    if not predicted:
        return []
    lines = [
        "## Peak memory: predicted before running, and measured", "",
        "Each prediction is a line in the batch size through two short trials of the same memory signature (GPU: "
        "model, imgsz, amp, freeze; CPU RAM with workers, for cache=ram: plus the decoded images cached). A config "
        "predicted over 90% of the memory is infeasible without running.", "",
        "| trial | config | memory | predicted MB | measured MB | error | basis |",
        "|---|---|---|---|---|---|---|",
    ]
    errors = []
    for record in predicted:
        result = record.result
        measured = result.peak_gpu_mem_mb if result.predicted_kind == "gpu" else result.peak_ram_mb
        error = result.prediction_error
        if error is not None:
            errors.append(abs(error))
        shown = f"{measured:.0f}" if measured and result.status is Status.OK else f"not run ({result.status.value})"
        err = f"{100 * error:+.1f}%" if error is not None and result.status is Status.OK else "-"
        lines.append(f"| {record.number} | {knobs_text(result.config)} | {result.predicted_kind} | "
                     f"{result.predicted_peak_mb:.0f} | {shown} | {err} | {result.predicted_basis} |")
    if errors:
        lines += ["", f"Largest prediction error over {len(errors)} measured trial(s): {100 * max(errors):.1f}%."]
    return [*lines, ""]
