"""A trial's note in optuna-dashboard: its one-screen summary, written when the trial completes.

The dashboard shows a trial's user attrs as an alphabetical list (the key figures under their names,
the full measurement in two JSON attrs, for tools); the note is what a person reads first: status, images/s with its unit, the speedup
over the baseline, the data wait, the config as it ran, what the trainer changed and why, and the
accuracy verdict. The finals rewrite the notes of the configs they measured again, with the interval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedopt.knobs import knobs_text
from speedopt.quality import Feasibility
from speedopt.study._record import TrialRecord, baseline_trial, records
from speedopt.study._schema import SHOWN, SPACE, STATUS
from speedopt.study._space import Space

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from speedopt.study._finals import Finals

__all__ = ["save_note", "write_note", "write_finals_notes"]

ROLES = {"baseline": "the baseline: your settings", "prepared": "the baseline on the prepared copy, measured first",
         "unmeasured": "queued after a proposal repeated a measured config", "warm-start": "warm start", "ceiling-rank": "enqueued by its ceilings"}


def _accuracy(record: TrialRecord) -> str:
    """The accuracy verdict in one line."""
    loss = f"mAP50-95 loss {record.map_loss:+.4f} +/- {record.map_spread or 0:.4f} (allowed {record.allowed_map_loss:.4f})" if record.map_loss is not None and record.allowed_map_loss is not None else ""
    probes = f"{record.probes_run} probe(s) ran, {record.probe_cache_hits} cache hit(s)" if record.probes_run or record.probe_cache_hits else ""
    why = "; ".join(p for p in (loss, probes, record.quality_reason) if p)
    verdict = {
        Feasibility.FEASIBLE: "accuracy kept",
        Feasibility.REJECTED: "accuracy lost: never recommended",
        Feasibility.UNPROBED: "not judged (it could not have been the fastest feasible config)",
        Feasibility.NOT_MEASURED: "not judged (not measured)",
        Feasibility.UNKNOWN: "accuracy unknown: never recommended",
    }[record.feasibility]
    return verdict + (f" ({why})" if why else "")


def trial_note(record: TrialRecord, baseline: TrialRecord | None, finals: str = "", outside: str | None = None) -> str:
    """The note of one completed trial (Markdown); ``finals``: its finals line (medians and interval), if any;
    ``outside``: why the trial is no point of the searched space (:meth:`Space.outside`), if it is not."""
    r = record.result
    role = ROLES.get(record.role or "", "")
    lines = [f"## Trial {record.number}" + (f" ({role})" if role else ""), ""]
    if r.ok and r.images_per_s:
        ci = f", +/-{100 * r.ci_rel:.0f}% (90% CI of the mean step)" if r.ci_rel is not None and r.ci_rel < 10 else ""
        lines.append(f"- **{r.images_per_s:.1f} images/s** measured over {r.steps or 0} steps{ci}")
    else:
        lines.append(f"- **{r.status.value}**: {r.message}")
    if finals:
        lines.append(f"- finals: {finals}")
    if r.ok and r.images_per_s and baseline is not None and baseline.images_per_s and not record.is_baseline:
        lines.append(f"- {r.images_per_s / baseline.images_per_s:.2f}x the baseline's {baseline.images_per_s:.1f} images/s (trial {baseline.number}, each measured once)")
    if r.data_wait_fraction is not None:
        lines.append(f"- data wait: {100 * r.data_wait_fraction:.0f}% of each step waiting for the loader")
    lines.append(f"- config as run: `{knobs_text(r.config)}`")
    if r.config != r.requested:
        lines.append(f"- asked: `{knobs_text(r.requested)}`")
    lines += [f"- the trainer: {note}" for note in r.notes]
    if outside:
        lines.append(
            f"- not a point of the searched space: {outside}. The dashboard's importance, slice and rank plots still "
            "count it at its params; speedopt's report leaves it out of the importance."
        )
    lines.append(f"- accuracy: {_accuracy(record)}")
    lines.append("")
    lines.append(
        f"The key figures are user attributes of their own ({', '.join(SHOWN)}); every other measured figure is in the "
        "JSON attributes measurement and accuracy."
    )
    return "\n".join(lines)


def finals_line(finals: Finals, trial: int) -> str:
    """What the finals measured for ``trial`` (its median and min-max over the rounds; a finalist's paired
    speedup and whether it is recommended), or "" for a trial not in them."""
    rounds = finals.ok_rounds(trial)
    if trial not in finals.trials or not rounds:
        return ""
    median, _ = finals.median(trial)
    line = f"{median:.1f} images/s median of {len(rounds)} rounds (min-max {min(rounds):.1f}-{max(rounds):.1f})"
    if trial == finals.baseline:
        return line + ", measured beside the finalists"
    speedup = finals.speedups().get(trial)
    chosen = finals.decision().choice == trial if finals.complete else False
    said = f"; **{speedup.median:.2f}x** the baseline beside it (interval {speedup.low:.2f}-{speedup.high:.2f}x)" if speedup is not None else ""
    return ("**recommended**; " if chosen else "") + line + said


def save_note(trial: optuna.Trial | optuna.Study, body: str) -> None:
    """Save ``body`` as the note optuna-dashboard shows (for a Study: the study's note)."""
    import optuna_dashboard

    optuna_dashboard.save_note(trial, body)


def _write(study: optuna.Study, frozen: FrozenTrial, baseline: TrialRecord | None, finals: Finals | None) -> None:
    """Save the note of one trial (nothing for a trial without a measurement)."""
    import optuna

    record = TrialRecord.from_frozen(frozen)
    if record is None:
        return
    stored = study.user_attrs.get(SPACE)
    outside = Space.from_dict(stored).outside(record.config) if isinstance(stored, dict) else None
    line = finals_line(finals, record.number) if finals is not None else ""
    save_note(optuna.trial.Trial(study, frozen._trial_id), trial_note(record, baseline, finals=line, outside=outside))


def write_note(study: optuna.Study, frozen: FrozenTrial) -> None:
    """An Optuna callback (after each trial is stored): the note of a completed trial with a measurement."""
    if frozen.state.is_finished() and STATUS in frozen.user_attrs:  # read the study only for a measured trial
        _write(study, frozen, baseline_trial(records(study)), None)


def write_finals_notes(study: optuna.Study, finals: Finals) -> None:
    """Rewrite the notes of the trials the finals measured again, with their medians and intervals."""
    done = {r.number: r for r in records(study)}
    baseline = done.get(finals.baseline)
    for frozen in study.get_trials(deepcopy=False):
        if frozen.number in finals.trials:
            _write(study, frozen, baseline, finals)
