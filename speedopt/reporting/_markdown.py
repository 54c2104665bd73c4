"""The study's report: a markdown file a person can act on, with PNG figures and the trial table beside it.

Every figure in it is read from the study (its records and trial table) or measured for it (one timed
validation pass and checkpoint save per projected config); projections are labelled as estimates with their inputs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedopt import engines
from speedopt.errors import UsageError
from speedopt.knobs import Knobs, knobs_text, value_text
from speedopt.measure import ValidationTime
from speedopt.quality import Feasibility
from speedopt.reporting import _ablation as ablation
from speedopt.reporting import _artifacts as artifacts_mod
from speedopt.reporting import _figures as figures
from speedopt.reporting._bottleneck import diagnose
from speedopt.reporting._ceilings import ceilings_section
from speedopt.reporting._filename import report_files
from speedopt.reporting._gather import rows, trial_table, write_csv
from speedopt.reporting._images import copies_section, images_for, prepare_gain
from speedopt.reporting._loggers import logger_integrations
from speedopt.reporting._memory import memory_section
from speedopt.reporting._overheads import overhead_advice
from speedopt.reporting._projection import Projection, label_build_for, prepare_s_for, project, validation_time
from speedopt.reporting._recommend import Recommendation, recommendation
from speedopt.reporting._scaling import scaling_section
from speedopt.reporting._verify import verified_section
from speedopt.speedup import METHOD
from speedopt.status import Status
from speedopt.study import SearchOutcome, StudyProtocol, TrialRecord, finalists, outcome, redact, save_note

if TYPE_CHECKING:
    import optuna
    import pandas as pd


@dataclass(frozen=True)
class Written:
    """What a report wrote: the markdown, its figures, the trial table."""

    markdown: Path
    figures: tuple[Path, ...]
    csv: Path


def _f(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None or value != value else f"{100 * value:.1f}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def _cell(text: str) -> str:
    return text.replace("|", "/")


def _machine_and_dataset(p: StudyProtocol, result: SearchOutcome, done: list[TrialRecord]) -> list[str]:
    m, ds = p.machine, p.dataset
    starts = [r.started for r in done if r.started]
    ends = [r.completed for r in done if r.completed]
    busy = sum((r.completed - r.started).total_seconds() for r in done if r.started and r.completed)
    gpus = ", ".join(f"{g.name} ({g.memory_mb} MB)" for g in m.gpus) or "none"
    return [
        "## 1. Machine and dataset",
        "",
        f"- Machine: {m.key.cpu_model}, {m.key.cpu_cores} cores, {m.ram_total_gb} GB RAM; GPUs: {gpus}; "
        f"driver {m.driver or '-'}, CUDA {m.cuda_driver or '-'}; host {m.hostname}",
        f"- Dataset: `{p.data}`: {ds.train_images} train / {ds.val_images} val images, {ds.classes} classes, "
        f"mean size {ds.mean_width}x{ds.mean_height}, {ds.train_bytes / 2**20:.1f} MB of train images (fingerprint {ds.id})",
        f"- Engine: {p.engine} {p.engine_version} on device `{p.device}`; speedopt {p.speedopt_version}",
        f"- Trials: {result.complete} complete ({result.counts_text()}{result.failed_text()}), at least {p.warmup} warm-up batches (more with "
        f"dataloader workers: until their prefetched batches are used) and {p.steps} to {p.max_steps} measured batches "
        f"each (until the 90% CI of the mean step time is within +/-5%); from {min(starts):%Y-%m-%d %H:%M} to {max(ends):%Y-%m-%d %H:%M} UTC, "
        f"{_duration(busy)} of trials and probes",
        "",
    ]


def _side_by_side(base: TrialRecord | None, best: TrialRecord | None, result: SearchOutcome) -> list[str]:
    lines = ["## 2. Baseline vs recommended", "", "| | baseline | recommended |", "|---|---|---|"]

    def row(label: str, get: Callable[[TrialRecord], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(get(c) if c else "-" for c in (base, best)) + " |")

    reference = result.reference_map50_95

    def accuracy(c: TrialRecord) -> str:
        if c.probe_map50_95 is not None:
            return _f(c.probe_map50_95, 4)
        if c.map_loss == 0.0:
            return f"{reference:.4f} (baseline reference, mean of two seeds)" if reference is not None else "baseline signature, not probed"
        return "not probed"

    finals = result.finals

    def finals_median(c: TrialRecord) -> str:
        median, rounds = finals.median(c.number) if finals else (None, 0)
        return f"{median:.2f} (median of {rounds})" if median is not None else "-"

    row("trial", lambda c: str(c.number))
    row("config", lambda c: knobs_text(c.config))
    row("status", lambda c: c.status.value)
    row("images/s (search, measured once)", lambda c: _f(c.images_per_s, 2))
    row("images/s (finals rounds)", finals_median)
    lines.append(f"| speedup | 1.00x | {_speedup_cell(result)} |")
    row("step time median / p90 (s)", lambda c: f"{_f(c.result.step_s_median, 3)} / {_f(c.result.step_s_p90, 3)}")
    row("waiting for data", lambda c: _pct(c.result.data_wait_fraction))
    row("GPU utilisation", lambda c: _f(c.result.gpu_util_mean, 0, "%"))
    row("CPU utilisation (all cores)", lambda c: _f(c.result.cpu_util_mean, 0, "%"))
    row("peak RAM, with workers (MB)", lambda c: _f(c.result.peak_ram_mb, 0))
    row("peak GPU memory (MB)", lambda c: _f(c.result.peak_gpu_mem_mb, 0))
    row("mAP50-95 (probe)", accuracy)
    row("mAP loss vs baseline", lambda c: _f(c.map_loss, 4) if c.map_loss is not None else "not probed")
    lines.append("")
    if best is None:
        lines += ["No trial was both measured ok and judged feasible: there is nothing to recommend yet.", ""]
    return lines


def _speedup_cell(result: SearchOutcome) -> str:
    if result.speedup is not None:
        return result.speedup.text()
    if result.keep_settings:
        return "no measurable gain (keep your settings)"
    return "not claimed: " + result.verdict_text()


def _finals(result: SearchOutcome) -> list[str]:
    """Every finals measurement: one row per config, one column per round, the paired speedup."""
    finals = result.finals
    lines = ["## Finals: the leaders measured again beside the baseline", ""]
    if finals is None:
        p = result.protocol
        if p is not None and p.repeats == 0:
            why = "--repeats 0"
        elif finalists(result.trials, 1):
            why = "not run yet: rerun the search command to run them"
        else:
            why = "no feasible config other than the baseline"
        return lines + [f"No finals ran ({why}): no speedup is claimed.", ""]
    rounds = " | ".join(f"round {r + 1}" for r in range(finals.repeats))
    lines += [f"Interleaved rounds (baseline, then each finalist, per round); images/s per measurement; speedup = "
              f"median of the per-round ratios to the baseline, interval = {METHOD}.", "",
              f"| trial | config | {rounds} | speedup |", "|---|---|" + "---|" * finals.repeats + "---|"]
    speedups = finals.speedups()
    by_number = {r.number: r for r in result.trials}
    for number in finals.trials:
        record = by_number.get(number)
        cells = " | ".join(_f(v, 2) for v in finals.series(number))
        s = speedups.get(number)
        label = "baseline" if number == finals.baseline else (s.text() if s else "-")
        lines.append(f"| {number} | {knobs_text(record.config) if record else '?'} | {cells} | {label} |")
    return lines + ["", f"**Decision:** {result.verdict_text()}.", ""]


def _honoured(p: StudyProtocol) -> list[str]:
    """Which knobs the trainer's own command honours on this device (the rest run a fixed value)."""
    engine = engines.get(p.engine, yolov5_dir=p.yolov5_dir)
    fixed = engine.fixed_knobs(p.device)
    entry = "python train.py" if p.engine == "yolov5" else "yolo detect train"
    lines = [f"## Knobs the real run honours (`{entry}` on device `{p.device}`)", "",
             "| knob | honoured | what the real run does |", "|---|---|---|"]
    for knob in Knobs.__dataclass_fields__:
        if knob in fixed:
            value, why = fixed[knob]
            lines.append(f"| {knob} | no | always {value_text(value)}: {_cell(why)}; trials ran the same |")
        elif knob == "amp" and p.device == "cpu":
            lines.append("| amp | no | off: AMP needs CUDA; trials ran off |")
        else:
            lines.append(f"| {knob} | yes | as the command says |")
    return lines + [""]


def _projection(epochs: int, pb: Projection | None, pr: Projection | None, notes: list[str], certain: bool) -> list[str]:
    lines = [f"## 3. Projected full run ({epochs} epochs, full train set) — an estimate", ""]
    lines += ["| estimate | baseline | recommended |", "|---|---|---|"]

    def row(label: str, get: Callable[[Projection], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(get(p) if p else "-" for p in (pb, pr)) + " |")

    row("one-time dataset build (prepare + scan + cache)", lambda p: _duration(p.build_s))
    row("train time per epoch", lambda p: _duration(p.epoch_train_s))
    row("validation per epoch", lambda p: _duration(p.val_s))
    row("checkpoint saves per epoch (last.pt + best.pt, upper bound)", lambda p: "-" if p.save_s is None else f"{p.save_s:.2f} s")
    row(f"total for {epochs} epochs", lambda p: _duration(p.total_s))
    row("share of the run in validation", lambda p: _pct(p.share("validation")) if p.val_s is not None else "-")
    row("share of the run in checkpoint saves", lambda p: _pct(p.share("checkpoint saves")) if p.save_s is not None else "-")
    if pb and pr and certain:
        lines.append(f"| time saved | | {_duration(pb.total_s - pr.total_s)} ({100 * (1 - pr.total_s / pb.total_s):.0f}%) |")
    elif pb and pr:
        lines.append("| time saved | | not claimed: no speedup certified by the finals |")
    lines.append("")
    for label, p in (("baseline", pb), ("recommended", pr)):
        if p:
            lines.append(f"Inputs ({label}): " + "; ".join(p.basis) + ".")
    advice = sorted({n for p in (pb, pr) if p for n in p.notes})
    return lines + [f"- {n}" for n in notes + advice] + [""]


def _command(rec: Recommendation | None, epochs: int) -> list[str]:
    lines = ["## 4. Recommended command", ""]
    if rec is None:
        return lines + ["none yet", ""]
    if rec.keep_settings:
        lines += ["No measurable gain on this machine: keep your settings (the baseline's command below).", ""]
    else:
        lines += [f"Trial {rec.trial.number}: {rec.verdict}.", ""]
    if rec.stand_in:
        lines += [rec.stand_in + ".", ""]
    elif rec.classic:
        where = rec.protocol.yolov5_dir or "a clone of ultralytics/yolov5 (or python -m yolov5.train)"
        lines += [f"In {where}:", "", "```bash", rec.command(epochs), "```", ""]
    else:
        lines += ["```bash", rec.command(epochs), "```", "", "```python", rec.python(epochs), "```", ""]
    problems = rec.problems()
    lines += [f"**Warning:** {problem}." for problem in problems] + ([""] if problems else [])

    gpus = rec.protocol.machine.gpus
    searched = max(rec.protocol.space.domains["gpus"].values()) > 1 if "gpus" in rec.protocol.space.domains else False
    if len(gpus) > 1 and not searched:
        every = ",".join(str(i) for i in range(len(gpus)))
        lines += [f"On all {len(gpus)} GPUs (DDP; not measured by this study):", "", "```bash",
                  rec.command(epochs, device=every), "```", ""]
    return lines


def _warm_start(p: StudyProtocol, done: list[TrialRecord]) -> list[str]:
    warm = p.warm_start
    if warm is None:
        return []
    key = warm.machine
    lines = ["## Warm start", "", f"Configs taken from study `{warm.study}` ({redact(warm.source)}), made on "
             f"{key.cpu_model} x{key.cpu_cores} cores, GPUs {list(key.gpus) or 'none'}; probes "
             f"{'reused (same dataset)' if warm.same_dataset else 'not reused (dataset differs)'}.", "",
             "| source trial | images/s there | adapted here | changes | trial here | images/s here |",
             "|---|---|---|---|---|---|"]
    here = {r.source_trial: r for r in done if r.role == "warm-start"}
    for c in warm.configs:
        r = here.get(c.source_trial)
        got = (_f(r.images_per_s, 2) if r.result.ok else r.status.value) if r else "not run yet"
        lines.append(f"| {c.source_trial} | {c.source_images_per_s:.2f} | {knobs_text(c.knobs)} | "
                     f"{'; '.join(c.changes) or 'none'} | {r.number if r else '-'} | {got} |")
    return lines + [""]


def _trials(table: pd.DataFrame, base: TrialRecord | None) -> list[str]:
    lines = ["## 5. Trials", "", "Top feasible trials (measured ok, accuracy kept; one measurement each, "
             "with the 90% confidence interval of its mean step time):", "",
             "| # | config | images/s | +/- | steps | vs baseline (one run each) | data wait | mAP50-95 | mAP loss |",
             "|---|---|---|---|---|---|---|---|---|"]
    base_ips = base.images_per_s if base and base.result.ok else None
    feasible = table[(table["status"] == Status.OK.value) & (table["feasibility"] == Feasibility.FEASIBLE.value)]
    for row in rows(feasible.sort_values("images_per_s", ascending=False).head(10)):
        speed = float(row["images_per_s"])
        ratio = f"{speed / base_ips:.2f}x" if base_ips else "-"
        ci = row.get("ci_rel")
        steps = row.get("steps")
        lines.append(f"| {row['number']} | {row['config']} | {speed:.2f} | {_pct(ci)} | {'-' if steps is None else int(steps)} | {ratio} | "
                     f"{_pct(row['data_wait_fraction'])} | "
                     f"{_f(row['probe_map50_95'], 4)} | {_f(row['map_loss'], 4)} |")
    others = table[~table.index.isin(feasible.index)]
    lines += ["", "Not recommended (failed, infeasible, rejected by the mAP constraint, or not probed):", ""]
    if others.empty:
        return lines + ["none", ""]
    lines += ["| # | config | status | reason |", "|---|---|---|---|"]
    for row in rows(others):
        failed = row["status"] != Status.OK.value
        label = row["status"] if failed else row["feasibility"]
        reason = row["message"] if failed else row["quality_reason"]
        lines.append(f"| {row['number']} | {row['config']} | {label} | {_cell(str(reason))} |")
    return lines + [""]


def _pruned(study: optuna.Study) -> list[str]:
    """Trials stopped part-way by the pruner (clearly slower than the best), with the running rate they had."""
    from optuna.trial import TrialState

    pruned = [t for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)) if t.user_attrs.get("pruned")]
    if not pruned:
        return []
    lines = ["Pruned part-way (Optuna pruning on the running images/s; not counted as complete trials):", ""]
    lines += [f"- trial {t.number} `{_cell(_params_text(t.params))}`: {t.user_attrs['pruned']}" for t in pruned]
    return lines + [""]


def _params_text(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in sorted(params.items()))


def _ended_early(result: SearchOutcome) -> list[str]:
    """Trials whose run ended early (interrupted, killed, lost their worker) and the trial that retried each."""
    if not result.failed:
        return []
    lines = ["Ended early (not measured; each is retried once with the same knobs):", "", "| # | role | why | retried as |", "|---|---|---|---|"]
    for f in result.failed:
        again = f"trial {f.retried_as}" if f.retried_as is not None else "not retried"
        lines.append(f"| {f.number} | {f.role or 'sampled'} | {_cell(f.why)} | {again} |")
    return lines + [""]


def _bottlenecks(p: StudyProtocol, done: list[TrialRecord], projections: dict[int, Projection | None], epochs: int) -> list[str]:
    lines = ["## 6. Bottlenecks", "", "| # | bottleneck | evidence | turn first |", "|---|---|---|---|"]
    for r in done:
        d = diagnose(
            r.result, p.machine, projections.get(r.number) or project(r.result, epochs, None), images_for(p, r.result),
            prepare_gain(done, r.config),
        )
        lines.append(f"| {r.number} | {d.kind} | {_cell(d.evidence)} | {d.advice} |")
    base = next((r for r in done if r.is_baseline), None)
    if base is not None:
        d = diagnose(base.result, p.machine, projections.get(base.number), images_for(p, base.result), prepare_gain(done, base.config))
        lines += ["", f"**Baseline:** {d.kind}: {d.evidence}. What to change first: {d.advice}."]
    return lines + [""]


def _importance(study: optuna.Study, done: list[TrialRecord], outside: dict[int, str]) -> list[str]:
    """Optuna's importance of each searched knob, from the ok trials as they ran; a trial that is no point of
    the space (the baseline on another model, say) is left out and named: it would skew every knob's share."""
    import optuna

    lines = ["## 7. Parameter importance and figures", ""]
    placed = {r.number: r for r in done if r.result.ok and r.number not in outside}
    left_out = [f"trial {r.number} ({outside[r.number]})" for r in done if r.result.ok and r.number in outside]
    note = [f"Left out of the importance: {'; '.join(left_out)}.", ""] if left_out else []
    ok = [t for t in study.get_trials(deepcopy=False) if t.number in placed and t.params]
    if len(ok) < 3:
        return lines + [f"only {len(ok)} trials measured ok in the searched space: too few for parameter importance", ""] + note
    scratch = optuna.create_study(direction="maximize")
    for t in ok:
        as_run = placed[t.number].config.to_dict()  # the knobs as they ran (the trainer may have changed some)
        params = {k: as_run.get(k, v) for k, v in t.params.items()}
        scratch.add_trial(optuna.trial.create_trial(params=params, distributions=t.distributions, value=t.value))
    try:
        imp = optuna.importance.get_param_importances(scratch)
    except (RuntimeError, ValueError) as exc:
        return lines + [f"parameter importance unavailable: {exc}", ""] + note
    return lines + ["Importance of each searched knob for images/s (Optuna's default evaluator, ok trials in the searched "
                    "space, knobs as they ran):", "", "| knob | importance |", "|---|---|"] + [
        f"| {k} | {v:.3f} |" for k, v in imp.items()] + [""] + note


def _accuracy_note(p: StudyProtocol, result: SearchOutcome) -> list[str]:
    q = p.quality
    if not q.probing:
        return ["Accuracy: quality off: accuracy knobs were fixed at the baseline's values.", ""]
    start = f"from {q.weights}" if q.weights else "from scratch"
    return [f"Accuracy: max mAP50-95 loss {q.max_loss}; probes of {q.epochs} epochs on {q.fraction:g} of the "
            f"train set ({start}); {result.probes_run} probes ran, {result.probe_cache_hits} cache hits, "
            f"{result.unprobed} trials not probed.", ""]


def _projections(
    study: optuna.Study, result: SearchOutcome, pair: tuple[TrialRecord | None, ...], epochs: int, measure_validation: bool
) -> tuple[dict[int, Projection | None], list[str]]:
    """The full-run estimate of the baseline and the recommended trial, each with a timed validation pass."""
    p = result.protocol
    assert p is not None
    out: dict[int, Projection | None] = {}
    notes = []
    if measure_validation and not engines.get(p.engine, yolov5_dir=p.yolov5_dir).supports_validation_timing:
        notes.append(f"the {p.engine} engine cannot time a validation pass: validation is left out of the totals")
        measure_validation = False
    finals = result.finals
    for r in pair:
        if r is None or not r.result.ok or r.number in out:
            continue
        median, rounds = finals.median(r.number) if finals else (None, 0)
        val_s = save_s = None
        if measure_validation:
            timed = validation_time(study, p, r.config)
            if isinstance(timed, ValidationTime):
                val_s, save_s = timed.seconds, timed.save_s
            else:
                notes.append(f"validation for trial {r.number} could not be timed: {timed.status.value}: {timed.message}")
        out[r.number] = project(
            r.result, epochs, val_s, median, rounds, labels=label_build_for(study, p, r.config),
            prepare_s=prepare_s_for(p, r.config), save_s=save_s,
        )
    return out, notes


def build(study: optuna.Study, epochs: int, out_dir: Path, measure_validation: bool = True, artifacts: Path | None = None) -> Written:
    """Write ``out_dir/<study>.md``, its figures in ``out_dir/<study>/`` and ``out_dir/<study>.csv`` (``<study>``:
    the study's name made a safe file name, see :mod:`speedopt.reporting._filename`); the report is the study's
    dashboard note, its figures uploaded as the study's artifacts into ``artifacts`` (the storage's store)."""
    result = outcome(study)
    done = list(result.trials)
    if not done:
        raise UsageError(f"study {study.study_name!r} has no completed trial yet; run `speedopt search` first")
    files = report_files(out_dir, study.study_name)  # safe names inside out_dir, writable: before anything slow
    p = result.protocol or StudyProtocol.from_attrs(study.user_attrs, study.study_name)  # the latter says why not
    table = trial_table(study, done)
    base, best = result.baseline, result.recommended
    projections, val_notes = _projections(study, result, (base, best), epochs, measure_validation)
    outside = {r.number: why for r in done if (why := p.space.outside(r.config)) is not None}  # no point of the space
    figs = _figures(table, p, result, files.figures, frozenset(outside))
    md = [f"# speedopt report: {study.study_name}", ""]
    md += _machine_and_dataset(p, result, done) + _side_by_side(base, best, result)
    pb, pr = (projections.get(r.number) if r else None for r in (base, best))
    certain = result.speedup is not None and result.speedup.certain
    md += _finals(result) + ablation.section(study, result, files.figures, files.link) + _projection(epochs, pb, pr, val_notes, certain)
    md += overhead_advice(pr or pb, p.engine == "yolov5", logger_integrations(p.engine)) + copies_section(p, epochs)
    md += verified_section(study)
    md += _command(recommendation(result), epochs)
    md += _honoured(p) + _warm_start(p, done)
    md += ceilings_section(study, result) + _pruned(study)
    md += _trials(table, base) + scaling_section(done) + memory_section(done) + _ended_early(result)
    md += _bottlenecks(p, done, projections, epochs) + _importance(study, done, outside)
    for title, fig in figs:
        md += [f"![{title}]({files.link}/{fig.name})", ""]
    md += _accuracy_note(p, result)
    md.append(f"_Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by speedopt report; "
              f"the trial table is {files.csv.name}._")
    path = files.markdown
    text = "\n".join(md) + "\n"
    path.write_text(text)
    csv = write_csv(table, files.csv)
    links = artifacts_mod.upload(study, artifacts, [fig for _, fig in figs]) if artifacts is not None else {}
    _save_note(study, text, path, links)
    return Written(path, tuple(fig for _, fig in figs), csv)


def _figures(
    table: pd.DataFrame, p: StudyProtocol, result: SearchOutcome, folder: Path, outside: frozenset[int] = frozenset()
) -> list[tuple[str, Path]]:
    """The figures that have something to show, with their titles; a stale one from an earlier report is removed."""
    searched = list(p.space.sampled())
    threshold = None
    if result.probed and result.reference_map50_95 is not None:
        ref, spread = result.reference_map50_95, result.probed[0].spread or 0.0
        threshold = ref - p.quality.limit.allowed(ref) - spread
    labels = {r.number: _label(r, result.baseline) for r in result.trials}
    drawn = {
        "optimisation history": figures.history(table, folder / "history.png"),
        "throughput against each knob": figures.knobs(table, searched, folder / "knobs.png", outside),
        "speed vs mAP50-95": figures.speed_vs_map(table, threshold, folder / "speed_vs_map.png"),
        "finals": figures.finals(result.finals, labels, folder / "finals.png") if result.finals else None,
    }
    for name in ("knobs.png", "speed_vs_map.png", "finals.png"):
        if (folder / name) not in drawn.values():
            (folder / name).unlink(missing_ok=True)
    return [(title, fig) for title, fig in drawn.items() if fig is not None]



def _label(record: TrialRecord, base: TrialRecord | None) -> str:
    """``trial 2\\ncache=disk``: a trial by the knobs it changes from the baseline."""
    if base is None or record.number == base.number:
        return f"trial {record.number}\n(baseline)"
    ours, theirs = record.config.to_dict(), base.config.to_dict()
    changed = [f"{k}={value_text(v)}" for k, v in ours.items() if v != theirs[k]]
    return f"trial {record.number}\n" + ("\n".join(changed) or "same config")


def _save_note(study: optuna.Study, text: str, path: Path, links: dict[str, str]) -> None:
    """The report as the study's note in optuna-dashboard: each figure from the study's artifacts (``links``, by
    file name), or named when it was not uploaded (it lives on disk beside the report)."""
    def shown(line: str) -> str:
        if not line.startswith("!["):
            return line
        target = line[line.index("](") + 2:-1]
        link = links.get(Path(target).name)
        return f"{line[:line.index('](')]}]({link})" if link else f"_(figure: {target} beside {path.name})_"

    save_note(study, "\n".join(shown(line) for line in text.splitlines()))
