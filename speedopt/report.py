"""The study's report: a markdown file a person can act on, with PNG figures beside it.

Every figure in it is read from the study (trial and study attrs) or measured for it (one timed
validation pass per projected config); projections are labelled as estimates with their inputs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt import bottleneck, command, figures, projection, search
from speedopt.knobs import Knobs
from speedopt.measurement import TrialResult
from speedopt.progress import knobs_text
from speedopt.quality import Policy


@dataclass(frozen=True)
class Written:
    markdown: Path
    figures: tuple[Path, ...]


def _f(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    h, rest = divmod(int(round(seconds)), 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def _rows(study) -> list[dict[str, Any]]:
    from optuna.trial import TrialState

    rows = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        a = t.user_attrs
        if "status" not in a:
            continue
        rows.append(
            {
                "number": t.number,
                "status": a["status"],
                "message": a.get("message", ""),
                "config": a["config"],
                "images_per_s": a.get("images_per_s"),
                "feasible": a.get("feasible", True),
                "map50_95": a.get("probe_map50_95"),
                "map_loss": a.get("map_loss"),
                "quality_reason": a.get("quality_reason", ""),
                "role": a.get("role"),
                "source_trial": a.get("source_trial"),
                "result": TrialResult.from_dict(a),
                "start": t.datetime_start,
                "end": t.datetime_complete,
            }
        )
    return rows


def _side_by_side(
    base: dict[str, Any] | None, best: dict[str, Any] | None, speedup: float | None, reference: float | None
) -> list[str]:
    lines = ["| | baseline | recommended |", "|---|---|---|"]
    cells = [base, best]

    def row(label: str, get) -> None:
        lines.append(f"| {label} | " + " | ".join(get(c) if c else "-" for c in cells) + " |")

    row("trial", lambda c: str(c["number"]))
    row("config", lambda c: knobs_text(c["config"]))
    row("status", lambda c: c["status"])
    row("images/s", lambda c: _f(c["images_per_s"], 2))
    lines.append(f"| speedup | 1.00x | {_f(speedup, 2)}x |" if speedup else "| speedup | - | - |")
    row("step time median / p90 (s)", lambda c: f"{_f(c['result'].step_s_median, 3)} / {_f(c['result'].step_s_p90, 3)}")
    row("waiting for data", lambda c: _pct(c["result"].data_wait_fraction))
    row("GPU utilisation", lambda c: _f(c["result"].gpu_util_mean, 0, "%"))
    row("CPU utilisation (all cores)", lambda c: _f(c["result"].cpu_util_mean, 0, "%"))
    row("peak RAM, with workers (MB)", lambda c: _f(c["result"].peak_ram_mb, 0))
    row("peak GPU memory (MB)", lambda c: _f(c["result"].peak_gpu_mem_mb, 0))
    def accuracy(c: dict[str, Any]) -> str:
        if c["map50_95"] is not None:
            return _f(c["map50_95"], 4)
        if c["map_loss"] == 0.0:
            return f"{reference:.4f} (baseline reference, mean of two seeds)" if reference is not None else "baseline signature, not probed"
        return "not probed"

    row("mAP50-95 (probe)", accuracy)
    row("mAP loss vs baseline", lambda c: _f(c["map_loss"], 4) if c["map_loss"] is not None else "not probed")
    return lines


def _projection_table(pb: projection.Projection | None, pr: projection.Projection | None) -> list[str]:
    lines = ["| estimate | baseline | recommended |", "|---|---|---|"]

    def row(label: str, get) -> None:
        lines.append(f"| {label} | " + " | ".join(get(p) if p else "-" for p in (pb, pr)) + " |")

    row("one-time dataset build (scan + cache)", lambda p: _duration(p.build_s))
    row("train time per epoch", lambda p: _duration(p.epoch_train_s))
    row("validation per epoch", lambda p: _duration(p.val_s))
    row(f"total for {(pb or pr).epochs if (pb or pr) else '-'} epochs", lambda p: _duration(p.total_s))
    if pb and pr:
        lines.append(f"| time saved | | {_duration(pb.total_s - pr.total_s)} ({100 * (1 - pr.total_s / pb.total_s):.0f}%) |")
    return lines


def _importance(study, rows: list[dict[str, Any]]) -> dict[str, float] | str:
    import optuna

    ok = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("status") == "ok" and t.params]
    if len(ok) < 3:
        return f"only {len(ok)} trials measured ok: too few for parameter importance"
    scratch = optuna.create_study(direction="maximize")
    for t in ok:
        scratch.add_trial(optuna.trial.create_trial(params=t.params, distributions=t.distributions, value=t.value))
    try:
        return optuna.importance.get_param_importances(scratch)
    except (RuntimeError, ValueError) as exc:
        return f"parameter importance unavailable: {exc}"


def build(study, epochs: int, out_dir: Path, measure_validation: bool = True) -> Written:
    """Write ``out_dir/<study>.md`` and its figures in ``out_dir/<study>/``."""
    attrs = study.user_attrs
    rows = _rows(study)
    result = search.outcome(study)
    if not rows:
        from speedopt.errors import UsageError

        raise UsageError(f"study {study.study_name!r} has no completed trial yet; run `speedopt search` first")
    base = next((r for r in rows if r["role"] == "baseline"), None)
    best = next((r for r in rows if r["number"] == result.best_number), None)
    policy = Policy(**attrs.get("quality", {"mode": "off"}))
    machine, ds = attrs["machine"], attrs["dataset"]

    projections: dict[int, projection.Projection | None] = {}
    val_notes = []
    for r in (base, best):
        if r is None or r["status"] != "ok" or r["number"] in projections:
            continue
        val_s = None
        if measure_validation:
            timed = projection.validation_time(study, Knobs(**r["config"]))
            val_s = timed.get("val_s")
            if val_s is None:
                val_notes.append(f"validation for trial {r['number']} could not be timed: {timed.get('message', '')}")
        projections[r["number"]] = projection.project(r["result"], epochs, val_s)
    pb = projections.get(base["number"]) if base else None
    pr = projections.get(best["number"]) if best else None

    folder = out_dir / study.study_name
    folder.mkdir(parents=True, exist_ok=True)
    figs = [figures.history(rows, folder / "history.png")]
    searched = [k for k, d in attrs["space"].items() if len(d.get("choices", [0, 0])) > 1 or "low" in d]
    figs.append(figures.knobs(rows, searched, folder / "knobs.png"))
    threshold = None
    probed = [p for p in result.probed]
    if probed:
        ref, spread = probed[0]["baseline_map50_95"], probed[0]["spread"]
        threshold = ref - policy.limit.allowed(ref) - spread
    figs.append(figures.speed_vs_map(rows, threshold, folder / "speed_vs_map.png"))

    starts = [r["start"] for r in rows if r["start"]]
    ends = [r["end"] for r in rows if r["end"]]
    busy = sum((r["end"] - r["start"]).total_seconds() for r in rows if r["start"] and r["end"])
    gpus = ", ".join(f"{g['name']} ({g['memory_mb']} MB)" for g in machine.get("gpus", [])) or "none"
    md = [f"# speedopt report: {study.study_name}", ""]
    md += [
        "## 1. Machine and dataset",
        "",
        f"- Machine: {machine['key']['cpu_model']}, {machine['key']['cpu_cores']} cores, {machine['ram_total_gb']} GB RAM; "
        f"GPUs: {gpus}; driver {machine.get('driver') or '-'}, CUDA {machine.get('cuda_driver') or '-'}; host {machine.get('hostname')}",
        f"- Dataset: `{attrs['data']}`: {ds['train_images']} train / {ds['val_images']} val images, {ds['classes']} classes, "
        f"mean size {ds['mean_width']}x{ds['mean_height']}, {ds['train_bytes'] / 2**20:.1f} MB of train images (fingerprint {ds['id']})",
        f"- Engine: {attrs['engine']} {attrs['engine_version']} on device `{attrs['device']}`; speedopt {attrs['speedopt_version']}",
        f"- Trials: {result.complete} complete ({', '.join(f'{n} {s}' for s, n in sorted(result.by_status.items()))}), "
        f"{attrs['warmup']} warm-up + {attrs['steps']} measured batches each; from {min(starts):%Y-%m-%d %H:%M} to "
        f"{max(ends):%Y-%m-%d %H:%M} UTC, {_duration(busy)} of trials and probes",
        "",
        "## 2. Baseline vs recommended",
        "",
        *_side_by_side(base, best, result.speedup, result.probed[0]["baseline_map50_95"] if result.probed else None),
        "",
    ]
    if best is None:
        md += ["No trial was both measured ok and judged feasible: there is nothing to recommend yet.", ""]
    md += [f"## 3. Projected full run ({epochs} epochs, full train set) — an estimate", ""]
    md += _projection_table(pb, pr) + [""]
    for label, p in (("baseline", pb), ("recommended", pr)):
        if p:
            md += [f"Inputs ({label}): " + "; ".join(p.basis) + "."]
    md += [f"- {n}" for n in val_notes] + [""]
    md += ["## 4. Recommended command", ""]
    if best is not None:
        knobs = Knobs(**best["config"])
        device = attrs["device"]
        if attrs["engine"] == "yolov5":
            where = attrs.get("yolov5_dir") or "a clone of ultralytics/yolov5 (or python -m yolov5.train)"
            md += [f"In {where}:", "", "```bash", command.train_py(attrs["data"], knobs, device=device, epochs=epochs), "```", ""]
        else:
            md += ["```bash", command.yolo_train(attrs["data"], knobs, device=device, epochs=epochs), "```", ""]
            md += ["```python", command.python_train(attrs["data"], knobs, device=device, epochs=epochs), "```", ""]
        if len(machine.get("gpus", [])) > 1:
            every = ",".join(str(i) for i in range(len(machine["gpus"])))
            form = command.train_py if attrs["engine"] == "yolov5" else command.yolo_train
            md += [f"On all {len(machine['gpus'])} GPUs (DDP; not measured by this study):", "", "```bash",
                   form(attrs["data"], knobs, device=every, epochs=epochs), "```", ""]
    warm = attrs.get("warm_start")
    if warm:
        md += ["## Warm start", "", f"Configs taken from study `{warm['study']}` ({warm['source']}), made on "
               f"{warm['machine'].get('cpu_model')} x{warm['machine'].get('cpu_cores')} cores, GPUs {warm['machine'].get('gpus') or 'none'}; "
               f"probes {'reused (same dataset)' if warm['same_dataset'] else 'not reused (dataset differs)'}.", "",
               "| source trial | images/s there | adapted here | changes | trial here | images/s here |", "|---|---|---|---|---|---|"]
        here = {r.get("source_trial"): r for r in rows if r["role"] == "warm-start"}
        for c in warm["configs"]:
            r = here.get(c["source_trial"])
            got = (_f(r["images_per_s"], 2) if r["status"] == "ok" else r["status"]) if r else "not run yet"
            md.append(f"| {c['source_trial']} | {c['source_images_per_s']:.2f} | {knobs_text(c['knobs'])} | "
                      f"{'; '.join(c['changes']) or 'none'} | {r['number'] if r else '-'} | {got} |")
        md.append("")
    md += ["## 5. Trials", "", "Top feasible trials (measured ok, accuracy kept):", "",
           "| # | config | images/s | vs baseline | data wait | mAP50-95 | mAP loss |", "|---|---|---|---|---|---|---|"]
    base_ips = base["images_per_s"] if base and base["status"] == "ok" else None
    feasible = sorted((r for r in rows if r["status"] == "ok" and r["feasible"] is True), key=lambda r: -r["images_per_s"])
    for r in feasible[:10]:
        ratio = f"{r['images_per_s'] / base_ips:.2f}x" if base_ips else "-"
        md.append(
            f"| {r['number']} | {knobs_text(r['config'])} | {r['images_per_s']:.2f} | {ratio} | "
            f"{_pct(r['result'].data_wait_fraction)} | {_f(r['map50_95'], 4)} | {_f(r['map_loss'], 4)} |"
        )
    others = [r for r in rows if not (r["status"] == "ok" and r["feasible"] is True)]
    md += ["", "Not recommended (failed, infeasible, rejected by the mAP constraint, or not probed):", ""]
    if others:
        md += ["| # | config | status | reason |", "|---|---|---|---|"]
        for r in others:
            reason = r["message"] if r["status"] != "ok" else r["quality_reason"]
            label = r["status"] if r["status"] != "ok" else ("rejected" if r["feasible"] is False else "unprobed")
            md.append(f"| {r['number']} | {knobs_text(r['config'])} | {label} | {reason.replace('|', '/')} |")
    else:
        md.append("none")
    md += ["", "## 6. Bottlenecks", "", "| # | bottleneck | evidence | turn first |", "|---|---|---|---|"]
    for r in rows:
        d = bottleneck.diagnose(r["result"], machine, projections.get(r["number"]) or projection.project(r["result"], epochs, None))
        md.append(f"| {r['number']} | {d.kind} | {d.evidence.replace('|', '/')} | {d.advice} |")
    if base is not None:
        d = bottleneck.diagnose(base["result"], machine, pb)
        md += ["", f"**Baseline:** {d.kind}: {d.evidence}. What to change first: {d.advice}.", ""]
    md += ["## 7. Parameter importance and figures", ""]
    imp = _importance(study, rows)
    if isinstance(imp, str):
        md += [imp, ""]
    else:
        md += ["Importance of each searched knob for images/s (Optuna's default evaluator, ok trials only):", "",
               "| knob | importance |", "|---|---|"] + [f"| {k} | {v:.3f} |" for k, v in imp.items()] + [""]
    rel = lambda p: f"{study.study_name}/{p.name}"  # noqa: E731
    md += [f"![optimisation history]({rel(figs[0])})", "", f"![throughput against each knob]({rel(figs[1])})", "",
           f"![speed vs mAP50-95]({rel(figs[2])})", ""]
    if policy.mode == "probe":
        md += [f"Accuracy: max mAP50-95 loss {policy.max_loss}; probes of {policy.epochs} epochs on {policy.fraction:g} of the "
               f"train set ({'from ' + policy.weights if policy.weights else 'from scratch'}); {result.probes_run} probes ran, "
               f"{result.probe_cache_hits} cache hits, {result.unprobed} trials not probed.", ""]
    else:
        md += ["Accuracy: quality off: accuracy knobs were fixed at the baseline's values.", ""]
    md.append(f"_Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by speedopt report._")
    path = out_dir / f"{study.study_name}.md"
    text = "\n".join(md) + "\n"
    path.write_text(text)
    _save_note(study, text, path)
    return Written(path, tuple(figs))


def _save_note(study, text: str, path: Path) -> None:
    """The report as the study's note in optuna-dashboard (figures named, since they live on disk)."""
    from optuna_dashboard import save_note

    lines = [
        f"_(figure: {line[line.index('](') + 2:-1]} beside {path.name})_" if line.startswith("![") else line
        for line in text.splitlines()
    ]
    save_note(study, "\n".join(lines))
