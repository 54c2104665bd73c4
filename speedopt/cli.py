"""The `speedopt` command line: parse, call the library, print. Nothing else lives here.

Bad input anywhere raises UsageError, which becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from speedopt import __version__
from speedopt.errors import UsageError

TRIAL_EXIT = """exit status: 0 when the trial ran (status ok), 1 when it ended oom, timeout, infeasible or
error (the status and message say why), 2 for bad input."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line (and exit 2) instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _engine_options(parser: argparse.ArgumentParser) -> None:
    from speedopt.engines import NAMES

    parser.add_argument(
        "--engine", default="ultralytics", choices=NAMES,
        help="trainer: ultralytics (default; the ultralytics package) or yolov5 (classic ultralytics/yolov5 train.py)",
    )
    parser.add_argument(
        "--yolov5-dir", default=None, metavar="PATH",
        help="with --engine yolov5: your clone of ultralytics/yolov5 (default: the yolov5 package, speedopt[yolov5])",
    )


def _study_options(parser: argparse.ArgumentParser) -> None:
    """--storage and --study, for commands that read one existing study."""
    parser.add_argument("--storage", default=None, help="Optuna storage URL (default sqlite:///studies/speedopt.db)")
    parser.add_argument("--study", default=None, help="study name (default: the only study in the storage)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="speedopt",
        description="Find the fastest way to train a YOLOv5 detector on this machine, by measuring short "
        "real training trials instead of guessing workers, batch, image size, cache and AMP.",
    )
    parser.add_argument("--version", action="version", version=f"speedopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    demo = sub.add_parser(
        "demo-data",
        help="write a small synthetic YOLO dataset (coloured shapes) to try speedopt on",
        description="Write a synthetic detection dataset in YOLO format (images/, labels/, data.yaml with an "
        "absolute path): coloured circles, squares and triangles on noisy backgrounds, identical for a seed. "
        "Prints the path of its data.yaml.",
    )
    demo.add_argument("dir", nargs="?", default="speedopt-demo", help="output folder (default: ./speedopt-demo)")
    demo.add_argument("--train", type=_int, default=256, help="train images (default 256)")
    demo.add_argument("--val", type=_int, default=64, help="val images (default 64)")
    demo.add_argument("--size", default="640x480", help="image size WxH (default 640x480)")
    demo.add_argument("--seed", type=_int, default=0, help="random seed (default 0)")

    trial = sub.add_parser(
        "trial",
        help="measure ONE short training run of the real trainer with the given knobs",
        description="Train the real trainer for --warmup + --steps batches in an isolated subprocess and report "
        "steady-state images/s (measured steps only), step times, the share of time spent waiting for data, "
        "setup time, peak RAM (with dataloader workers), GPU memory and utilisation, CPU utilisation. "
        "Defaults are the trainer's own defaults. Nothing is downloaded; run folders go to a temporary "
        "folder that is removed.",
        epilog=TRIAL_EXIT,
    )
    trial.add_argument("--data", required=True, help="the dataset's data.yaml (YOLO format)")
    trial.add_argument(
        "--model", default="yolov5s", help="yolov5n|s|m|l|x (built from the architecture yaml) or a local .pt/.yaml"
    )
    trial.add_argument("--imgsz", type=_int, default=640, help="train image size, multiple of 32 (default 640)")
    trial.add_argument("--batch", type=_int, default=16, help="batch size (default 16)")
    trial.add_argument(
        "--workers", type=_int, default=8, help="dataloader workers (default 8; the trainer caps at CPU cores)"
    )
    trial.add_argument("--cache", default="none", choices=("none", "ram", "disk"), help="image cache (default none)")
    trial.add_argument(
        "--amp", default=None, choices=("on", "off"), help="mixed precision (default on with CUDA; off on CPU)"
    )
    trial.add_argument("--freeze", type=_int, default=0, help="freeze the first N layers (default 0)")
    trial.add_argument("--steps", type=_int, default=20, help="measured batches (default 20)")
    trial.add_argument("--warmup", type=_int, default=5, help="warm-up batches, not measured (default 5)")
    trial.add_argument("--device", default=None, help="cpu or a GPU index such as 0 (default: GPU 0 if any, else cpu)")
    trial.add_argument("--timeout", type=float, default=900.0, help="seconds before the trial is killed (default 900)")
    trial.add_argument(
        "--ram-limit", type=float, default=None, metavar="GIB",
        help="RAM (GiB) that cache=ram may assume is available (default: what is free now)",
    )
    _engine_options(trial)
    trial.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    search = sub.add_parser(
        "search",
        help="run an Optuna study of trials over the speed knobs and recommend the fastest config",
        description="Run an Optuna study (TPE sampler) of short, real training trials over workers, batch, imgsz, "
        "cache, amp, model and freeze, maximising steady-state images/s. Trial 0 is your baseline (--baseline, "
        "else the trainer's defaults). Trials that end oom, timeout, infeasible or error are recorded with their "
        "status and reason and count as violating the study's constraint, so the sampler avoids them and they are "
        "never recommended. Re-running the same command resumes the study and runs only the missing trials; "
        "a search killed mid-trial continues (the interrupted trial is failed and retried). Trials on one host "
        "never overlap: a host-wide lock serialises them across searches.",
        epilog="space file (YAML): each knob maps to a list of values or {low, high, step}, e.g.\n"
        "  batch: [8, 16, 32]\n  imgsz: {low: 320, high: 640, step: 64}\n  cache: [none, ram]\n"
        "exit status: 0 when the study has a feasible best trial, 1 when none measured ok, 2 for bad input.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search.add_argument("--data", required=True, help="the dataset's data.yaml (YOLO format)")
    search.add_argument("--trials", type=_int, default=20, help="complete trials the study should hold, baseline included (default 20)")
    search.add_argument("--timeout", type=float, default=None, help="stop starting new trials after this many seconds")
    search.add_argument("--storage", default=None, help="Optuna storage URL (default sqlite:///studies/speedopt.db) or a journal file *.log")
    search.add_argument("--study", default=None, help="study name (default: <dataset>-<gpu-or-cpu>-<hash of dataset and machine>)")
    search.add_argument("--space", default=None, metavar="FILE", help="YAML file narrowing or widening knob domains")
    search.add_argument("--fix", action="append", default=[], metavar="KNOB=VALUE", help="pin a knob (repeatable)")
    search.add_argument("--baseline", default=None, metavar="ARGS", help='your current settings, e.g. "model=yolov5s imgsz=640 batch=16 workers=8"')
    search.add_argument("--steps", type=_int, default=20, help="measured batches per trial (default 20)")
    search.add_argument("--warmup", type=_int, default=5, help="warm-up batches per trial (default 5)")
    search.add_argument("--seed", type=_int, default=0, help="sampler seed (default 0)")
    search.add_argument("--device", default=None, help="cpu or a GPU index (default: GPU 0 if any, else cpu)")
    search.add_argument("--trial-timeout", type=float, default=900.0, help="seconds before one trial is killed (default 900)")
    search.add_argument("--ram-limit", type=float, default=None, metavar="GIB", help="RAM (GiB) cache=ram may use (default: what is free)")
    _engine_options(search)
    quality = search.add_argument_group(
        "accuracy (the mAP-loss constraint)",
        "model, imgsz, freeze, batch and amp can change the trained model. A quality probe trains such a "
        "signature for a fixed budget (--probe-epochs on --probe-fraction of the train set, fixed seed, from "
        "scratch or --weights) and validates mAP50-95 on the val split. The baseline is probed with two seeds: "
        "their mean is the reference and their difference the spread (the probe's own noise). mAP loss = "
        "reference - candidate; a candidate is rejected only when its loss exceeds the allowed loss by more "
        "than the spread. Probes run lazily (only for a trial fast enough to become the best feasible one) and "
        "are cached in the storage for every worker and later study on the same dataset.",
    )
    quality.add_argument("--max-map-loss", default="0.01", metavar="X", help="allowed mAP50-95 loss: absolute (0.01) or relative (2%%) (default 0.01)")
    quality.add_argument("--quality", default="probe", choices=("probe", "off"), help="off: keep accuracy knobs at the baseline, no probes (default probe)")
    quality.add_argument("--probe-epochs", type=_int, default=10, help="epochs per probe (default 10)")
    quality.add_argument("--probe-fraction", type=float, default=0.25, help="fraction of the train set per probe (default 0.25)")
    quality.add_argument("--weights", default=None, metavar="PATH", help="local checkpoint the probes start from (default: from scratch)")
    quality.add_argument("--probe-timeout", type=float, default=3600.0, help="seconds before one probe is killed (default 3600)")

    search.add_argument(
        "--warm-start", default=None, metavar="SOURCE",
        help="start from another study: a storage URL or an exported .db/.log file, optionally ::STUDY; its best "
        "configs are adapted to this machine and run right after the baseline, its probes reused if the dataset matches",
    )
    search.add_argument("--epochs", type=_int, default=100, help="epochs of the full run, for the report's projection (default 100)")
    search.add_argument("--no-report", action="store_true", help="skip writing reports/<study>.md at the end")

    report = sub.add_parser(
        "report",
        help="write reports/<study>.md with figures: baseline vs recommended, projection, bottlenecks",
        description="Write a markdown report of a study, with PNG figures in a folder beside it: machine and "
        "dataset, baseline vs recommended, the projected wall time of the full run (an estimate: measured "
        "throughput, dataset build and one timed validation pass), the recommended command, every trial, the "
        "bottleneck of each trial in numbers, and parameter importance.",
    )
    _study_options(report)
    report.add_argument("--out", default="reports", help="output folder (default reports/)")
    report.add_argument("--epochs", type=_int, default=100, help="epochs of the full run to project (default 100, the trainer's)")

    best = sub.add_parser("best", help="print only the recommended config, for scripts")
    _study_options(best)
    best.add_argument("--format", default="cli", choices=("cli", "python", "json", "yaml"), help="output form (default cli)")
    best.add_argument("--epochs", type=_int, default=None, help="add epochs=E to the command")

    worker = sub.add_parser(
        "worker",
        help="join an existing study and run its trials (several workers can share one study)",
        description="Join a study made by `speedopt search`: data, space, constraint, engine and steps come from the "
        "study's attrs. Refuses a study made on a different kind of machine (GPU model or count, CPU model or core "
        "count), since mixing machines in one study corrupts its numbers. Stops when the study holds its target "
        "number of complete trials.",
    )
    worker.add_argument("--storage", required=True, help="the study's storage URL (e.g. postgresql://user@host/db)")
    worker.add_argument("--study", required=True, help="the study to join")

    dash = sub.add_parser(
        "dashboard",
        help="serve the Optuna dashboard on the study storage",
        description="Serve optuna-dashboard for the storage (binds to 127.0.0.1 unless told otherwise). Each study "
        "shows images/s as its objective, each trial's measurements as user attrs and the report as its note.",
    )
    dash.add_argument("--storage", default=None, help="Optuna storage URL (default sqlite:///studies/speedopt.db)")
    dash.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    dash.add_argument("--port", type=_int, default=8080, help="port (default 8080)")

    exp = sub.add_parser("export", help="write a study to one portable file (SQLite .db or journal .log)")
    exp.add_argument("--study", required=True, help="the study to export")
    exp.add_argument("--storage", default=None, help="its storage URL (default sqlite:///studies/speedopt.db)")
    exp.add_argument("-o", "--output", required=True, metavar="FILE", help="new file: *.db (SQLite) or *.log (journal)")

    imp = sub.add_parser("import", help="bring an exported study (and its probe cache) into a storage")
    imp.add_argument("file", help="an exported .db/.log file, optionally FILE::STUDY")
    imp.add_argument("--storage", default=None, help="target storage URL (default sqlite:///studies/speedopt.db)")

    studies = sub.add_parser("studies", help="list the studies in a storage", description="List studies with trial counts and best measured throughput.")
    studies.add_argument("--storage", default=None, help="Optuna storage URL (default sqlite:///studies/speedopt.db)")
    return parser


def _cmd_demo_data(args: argparse.Namespace) -> int:
    from speedopt import demo_data

    width, height = demo_data.parse_size(args.size)
    spec = demo_data.DemoSpec(train=args.train, val=args.val, width=width, height=height, seed=args.seed)
    print(demo_data.generate(args.dir, spec))
    return 0


def _progress_printer(console):
    """Progress of a running trial: a live status line on a terminal, plain phase lines otherwise."""
    state = {"phase": None}

    def plain(update: dict[str, Any]) -> None:
        phase = update["phase"]
        if phase != state["phase"] or update.get("done") == update.get("of"):
            where = f" {update['done']}/{update['of']}" if "done" in update else ""
            console.print(f"trial: {phase}{where}", highlight=False)
            state["phase"] = phase

    return plain


def _cmd_trial(args: argparse.Namespace) -> int:
    from rich.console import Console

    from speedopt import trial
    from speedopt.knobs import Knobs, parse_bool

    err = Console(stderr=True)
    requested = Knobs(
        model=args.model,
        imgsz=args.imgsz,
        batch=args.batch,
        workers=args.workers,
        cache=args.cache,
        amp=parse_bool(args.amp) if args.amp else True,
        freeze=args.freeze,
    )
    request = trial.prepare(
        args.data,
        requested,
        device=args.device,
        engine=args.engine,
        yolov5_dir=args.yolov5_dir,
        steps=args.steps,
        warmup=args.warmup,
        timeout_s=args.timeout,
        ram_limit_bytes=int(args.ram_limit * 2**30) if args.ram_limit else None,
    )
    for note in request.notes:
        err.print(f"note: {note}", highlight=False)
    if err.is_terminal:
        with err.status("trial: setup (dataset scan, cache fill, model build)") as status:

            def live(update: dict[str, Any]) -> None:
                where = f" {update['done']}/{update['of']}" if "done" in update else ""
                status.update(f"trial: {update['phase']}{where}")

            result = trial.run(request, progress=live)
    else:
        result = trial.run(request, progress=_progress_printer(err))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from speedopt.render import trial_table

        Console().print(trial_table(result))
    return 0 if result.status.value == "ok" else 1


def _quiet_optuna() -> None:
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def _cmd_search(args: argparse.Namespace) -> int:
    from rich.console import Console

    from speedopt import command, progress, search

    if args.ram_limit is not None and args.ram_limit <= 0:
        raise UsageError(f"--ram-limit must be positive GiB, got {args.ram_limit}")
    plan = search.plan(
        args.data,
        trials=args.trials,
        timeout_s=args.timeout,
        storage=args.storage,
        study=args.study,
        space_file=args.space,
        fix=args.fix,
        baseline=args.baseline,
        steps=args.steps,
        warmup=args.warmup,
        seed=args.seed,
        device=args.device,
        engine=args.engine,
        yolov5_dir=args.yolov5_dir,
        trial_timeout_s=args.trial_timeout,
        ram_limit_gb=args.ram_limit,
        quality=args.quality,
        max_map_loss=args.max_map_loss,
        probe_epochs=args.probe_epochs,
        probe_fraction=args.probe_fraction,
        weights=args.weights,
        probe_timeout_s=args.probe_timeout,
        warm_start=args.warm_start,
    )
    _quiet_optuna()
    err = Console(stderr=True)
    view = progress.LiveView(err) if err.is_terminal else progress.PlainView(err)
    result = search.run(plan, view)
    out = Console(soft_wrap=True)  # commands and figures stay whole lines, whatever the terminal width
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.by_status.items()))
    out.print(f"study {result.study_name}: {result.complete} complete trials ({counts})", highlight=False)
    _print_quality(out, plan, result)
    if result.best is None:
        out.print("no feasible trial measured ok: see the statuses above", highlight=False)
        return 1
    from speedopt.knobs import Knobs

    best = Knobs.from_dict(result.best.config)
    base = result.baseline
    out.print(f"best: trial {result.best_number}: {progress.knobs_text(best)}: {result.best.images_per_s:.1f} images/s", highlight=False)
    if result.speedup is not None:
        out.print(f"speedup over the baseline (trial 0, {base.images_per_s:.1f} images/s): {result.speedup:.2f}x, both measured in this study", highlight=False)
    elif base is not None:
        out.print(f"baseline ended {base.status.value}: {base.message}", highlight=False)
    data, device = plan.attrs["data"], plan.attrs["device"]
    out.print(command.train_text(plan.attrs, best), highlight=False)
    again = command.speedopt_trial(
        data, best, device, plan.attrs["steps"], plan.attrs["warmup"], engine=plan.attrs["engine"], yolov5_dir=plan.attrs.get("yolov5_dir")
    )
    out.print("measure it again:\n  " + again, highlight=False)
    if not args.no_report:
        from pathlib import Path

        from speedopt import report

        err.print("report: timing one validation pass for the baseline and the recommended config", highlight=False)
        written = report.build(search.find_study(plan.storage_url, plan.study_name), args.epochs, Path("reports"))
        out.print(f"report: {written.markdown}", highlight=False)
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from rich.console import Console

    from speedopt import progress, search

    _quiet_optuna()
    plan = search.plan_for_worker(args.storage, args.study)
    err = Console(stderr=True)
    view = progress.LiveView(err) if err.is_terminal else progress.PlainView(err)
    result = search.run(plan, view, create=False)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.by_status.items()))
    print(f"study {result.study_name}: {result.complete} of {plan.trials} complete trials ({counts})")
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from speedopt import dashboard
    from speedopt.storage import DEFAULT_URL

    _quiet_optuna()
    print(f"speedopt dashboard: {args.storage or DEFAULT_URL} at http://{args.host}:{args.port}/dashboard (Ctrl+C stops)", flush=True)
    dashboard.serve(args.storage, args.host, args.port)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from speedopt import transfer

    _quiet_optuna()
    trials, entries = transfer.export(args.study, args.storage, args.output)
    print(f"exported study {args.study!r}: {trials} trials and {entries} probe result(s) to {args.output}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from speedopt import transfer

    _quiet_optuna()
    name, trials, added = transfer.import_study(args.file, args.storage)
    print(f"imported study {name!r}: {trials} trials, {added} new probe result(s)")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from speedopt import report, search

    _quiet_optuna()
    study = search.find_study(args.storage, args.study)
    written = report.build(study, args.epochs, Path(args.out))
    print(written.markdown)
    return 0


def _cmd_best(args: argparse.Namespace) -> int:
    import yaml

    from speedopt import command, search
    from speedopt.knobs import Knobs

    _quiet_optuna()
    study = search.find_study(args.storage, args.study)
    result = search.outcome(study)
    if result.best is None:
        raise UsageError(f"study {study.study_name!r} has no feasible trial measured ok yet")
    knobs = Knobs.from_dict(result.best.config)
    data, device = study.user_attrs["data"], study.user_attrs["device"]
    if args.format == "cli":
        form = command.train_py if study.user_attrs.get("engine") == "yolov5" else command.yolo_train
        print(form(data, knobs, device=device, epochs=args.epochs))
    elif args.format == "python":
        if study.user_attrs.get("engine") == "yolov5":
            raise UsageError("the classic yolov5 engine has no Python form; use --format cli (python train.py ...)")
        print(command.python_train(data, knobs, device=device, epochs=args.epochs))
    else:
        record = {
            "study": study.study_name,
            "data": data,
            "device": device,
            "trial": result.best_number,
            "config": knobs.to_dict(),
            "images_per_s": result.best.images_per_s,
            "speedup": result.speedup,
        }
        print(json.dumps(record, indent=2) if args.format == "json" else yaml.safe_dump(record, sort_keys=False), end="\n" if args.format == "json" else "")
    return 0


def _print_quality(out, plan, result) -> None:
    from speedopt import progress, quality

    policy = quality.Policy(**plan.attrs["quality"])
    if policy.mode == "off":
        out.print("accuracy: quality off (accuracy knobs fixed at the baseline), no probes", highlight=False)
        return
    out.print(
        f"accuracy: max mAP50-95 loss {policy.max_loss}, probes of {policy.epochs} epochs on {policy.fraction:g} of "
        f"the train set: {result.probes_run} probe(s) ran, {result.probe_cache_hits} cache hit(s), "
        f"{result.unprobed} trial(s) not probed (too slow to matter), {result.rejected} rejected",
        highlight=False,
    )
    for entry in result.probed:
        ref, spread = entry["baseline_map50_95"], entry["spread"]
        out.print(f"  baseline mAP50-95 {ref:.4f} (two seeds, spread {spread:.4f})", highlight=False)
        break
    for entry in result.probed:
        mark = "feasible" if entry["feasible"] is True else "rejected"
        out.print(
            f"  {progress.knobs_text({**entry['signature'], 'workers': '-', 'cache': '-'})}: mAP50-95 "
            f"{entry['map50_95']:.4f}, loss {entry['map_loss']:+.4f}: {mark}",
            highlight=False,
        )
    if result.probed and result.probed[0]["baseline_map50_95"] < quality.LOW_MAP:
        out.print(
            f"  warning: the baseline probe reached only mAP50-95 {result.probed[0]['baseline_map50_95']:.4f}; probes this "
            "short cannot tell signatures apart. Raise --probe-epochs/--probe-fraction or give --weights.",
            highlight=False,
        )


def _cmd_studies(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from speedopt import search

    _quiet_optuna()
    rows = search.list_studies(args.storage)
    if not rows:
        print(f"no studies in {args.storage or 'sqlite:///studies/speedopt.db'}")
        return 0
    table = Table("study", "trials", "complete", "ok", "best images/s", "speedup", "data")
    for r in rows:
        best = f"{r['best_images_per_s']:.1f}" if r["best_images_per_s"] is not None else "-"
        speed = f"{r['speedup']:.2f}x" if r["speedup"] is not None else "-"
        table.add_row(r["study"], str(r["trials"]), str(r["complete"]), str(r["ok"]), best, speed, str(r["data"]))
    Console().print(table)
    return 0


COMMANDS = {
    "demo-data": _cmd_demo_data,
    "trial": _cmd_trial,
    "search": _cmd_search,
    "report": _cmd_report,
    "best": _cmd_best,
    "worker": _cmd_worker,
    "dashboard": _cmd_dashboard,
    "export": _cmd_export,
    "import": _cmd_import,
    "studies": _cmd_studies,
}


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"speedopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"speedopt {args.command}: interrupted", file=sys.stderr)
        return 130
