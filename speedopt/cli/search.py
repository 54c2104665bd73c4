"""`speedopt search` and `speedopt worker`: run (or join) an Optuna study of real training trials."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import get_args

from rich.console import Console

import speedopt
from speedopt import defaults
from speedopt.cli._options import (
    MAX_EPOCHS,
    MAX_PROBE_SEEDS,
    MAX_ROUNDS,
    MAX_SECONDS,
    MAX_SEED,
    MAX_TRIALS,
    add_measurement,
    add_storage,
    add_study,
    fraction,
    integer,
    listed,
    real,
    seconds,
)
from speedopt.cli._progress import view_for
from speedopt.cli._quality import print_quality
from speedopt.cli._render import shown_name
from speedopt.data import PrepareFormat
from speedopt.errors import UsageError
from speedopt.knobs import KNOBS, knobs_text
from speedopt.quality import QualityMode, parse_max_loss, unchecked_knobs, unchecked_text
from speedopt.reporting import Recommendation
from speedopt.search import RANK_MODES, SearchConfig
from speedopt.study import SearchOutcome, quiet_optuna

NAME = "search"
EPILOG = (
    "space file (YAML): each knob maps to a list of values or {low, high, step}, e.g.\n"
    "  batch: [8, 16, 32]\n  imgsz: {low: 320, high: 640, step: 64}\n  cache: [none, ram]\n"
    "exit status: 0 when the study has a feasible best trial, 1 when none measured ok, 2 for bad input."
)
FINALS = (
    "One measurement per config is not enough on a noisy machine. After the search, the --finalists fastest "
    "feasible configs and the baseline are measured again in --repeats interleaved rounds (baseline, c1, c2, "
    "baseline, c1, ...), so drift hits every config alike. A config's speedup is the median of its per-round "
    "ratios to the baseline measured beside it, with the min-max of those ratios as its interval. The config with "
    "the best median whose whole interval lies above 1.0 by at least --min-gain is recommended; when none does, "
    "speedopt says there is no measurable gain and recommends keeping your settings."
)
QUALITY = (
    "model, imgsz, freeze, batch and amp can change the trained model. A quality probe trains such a "
    "signature for a budget (--probe-epochs on --probe-fraction of the train set, from --weights or from "
    "scratch) and validates mAP50-95 on the val split, once per seed. The baseline is probed first: if its "
    "probes learned too little (mAP50-95 under 0.05) the budget grows (--probe-grow) and, if it still learns "
    "nothing, every other signature is 'unknown' and never recommended. A candidate is probed on the baseline's "
    "seeds and screened from the per-seed differences: lost when the lower end of their one-sided 90% Student-t "
    "interval is beyond --max-map-loss; while it straddles, the seeds double (up to 8), then the budget grows. What "
    "screening keeps is confirmed on --confirm-seeds fresh seeds at its probe's length and at twice it (within --probe-share), "
    "at its share of --risk, and kept only when the loss there, carried on to your --epochs where it grows with the "
    "probe's length, is within --max-map-loss, and the baseline's own probes do not get worse with length (a "
    "fine-tune still disrupted); otherwise it is 'unknown'. No probe trains more than --probe-share of your run (--epochs x train "
    "images), and a candidate is probed only while its estimated probes cost less than its measured speedup "
    "would save over that run: the search says both before the probes run. Probes run lazily (only for a trial "
    "fast enough to become the best feasible one) and are cached in the storage for every worker and later study "
    "on the same dataset. See docs/accuracy.md."
)


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        NAME,
        help="run an Optuna study of trials over the speed knobs and recommend the fastest config",
        description="Run an Optuna study (TPE sampler) of short, real training trials over workers, batch, imgsz, "
        "cache, amp, model, freeze, data (a resized copy) and gpus (with --device 0,1,...: DDP under torch.distributed.run; "
        "batch is the total across the GPUs, as in both trainers), maximising steady-state images/s. The first trial is your baseline (--baseline, "
        "else the trainer's defaults). Trials that end oom, timeout, infeasible or error are recorded with their "
        "status and reason and count as violating the study's constraint, so the sampler avoids them and they are "
        "never recommended. Re-running the same command resumes the study and runs only the missing trials; "
        "a search interrupted (Ctrl-C) or killed mid-trial continues (the interrupted trial is failed and retried "
        "with the same settings; an interrupted baseline stays the baseline); exit status 130 after Ctrl-C or SIGTERM. Trials on one host "
        "never overlap: a host-wide lock serialises them across searches.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", required=True, help="the dataset's data.yaml (YOLO format)")
    parser.add_argument("--trials", type=integer(1, MAX_TRIALS), default=defaults.TRIALS, help=f"trials the study runs, baseline included (default {defaults.TRIALS}): a trial pruned part-way counts "
                        "(it ran the trainer); a config skipped before it ran (measured before, or bounded below the best) does not")
    parser.add_argument("--timeout", type=seconds, default=None, help="stop starting new trials after this many seconds")
    add_storage(parser)
    add_study(parser, default_help="<dataset>-<gpu-or-cpu>-<hash of dataset and machine>")
    parser.add_argument("--space", default=None, metavar="FILE", help="YAML file narrowing or widening knob domains (compile: [off, default] decides torch.compile once at the end, on the recommendation: no trial compiles)")
    parser.add_argument("--fix", action="append", type=_pin, default=[], metavar="KNOB=VALUE", help="pin a knob (repeatable)")
    parser.add_argument("--baseline", default=None, metavar="ARGS", help='your current settings, e.g. "model=yolov5s imgsz=640 batch=16 workers=8"')
    parser.add_argument("--seed", type=integer(0, MAX_SEED), default=defaults.SEED, help="sampler seed (default 0)")
    add_measurement(parser, "--trial-timeout")
    finals = parser.add_argument_group("finals (claims that survive the noise)", FINALS)
    finals.add_argument("--finalists", type=integer(1, MAX_ROUNDS), default=defaults.FINALISTS, metavar="K", help=f"feasible configs re-measured against the baseline (default {defaults.FINALISTS})")
    finals.add_argument("--repeats", type=integer(0, MAX_ROUNDS), default=defaults.REPEATS, metavar="R", help=f"interleaved rounds of the finals (default {defaults.REPEATS}; 0: no finals, no speedup claimed)")
    finals.add_argument(
        "--min-gain", type=fraction(high_open=True), default=defaults.MIN_GAIN, metavar="G",
        help=f"a speedup is claimed only when every round shows at least this gain: 0.05 or 5%% (default {100 * defaults.MIN_GAIN:.0f}%%)",
    )
    finals.add_argument(
        "--no-ablation", dest="ablate", action="store_false",
        help="skip the ablation: after the finals, the path from the baseline to the recommendation, one changed knob at a "
        "time (the change that gains most first), measured in the same interleaved rounds, says which change bought what",
    )
    _add_quality(parser)
    _add_extras(parser)
    parser.set_defaults(run=resumable(run))

    worker = sub.add_parser(
        "worker",
        help="join an existing study and run its trials (several workers can share one study)",
        description="Join a study made by `speedopt search`: data, space, constraint, engine and steps come from the "
        "study's attrs. Refuses a study made on a different kind of machine (GPU model or count, CPU model or core "
        "count), since mixing machines in one study corrupts its numbers. Stops when the study holds its target "
        "number of complete trials.",
    )
    add_storage(worker, required=True, what="the study's storage URL (e.g. postgresql://user@host/db)")
    add_study(worker, required=True)
    worker.set_defaults(run=resumable(run_worker))


def _pin(text: str) -> str:
    """An argparse type: one ``--fix KNOB=VALUE``, a mode the installed trainer lists (compile) checked at parse time
    as its flag is (every other knob and value is checked with the space, where the trainer's limits are known)."""
    name, sep, value = text.partition("=")
    knob = KNOBS.get(name.strip().lower())
    if sep and knob is not None and knob.flag is not None and knob.flag.listed:
        listed(knob)(value.strip())
    return text


def _max_loss(text: str) -> str:
    """An argparse type: ``--max-map-loss`` as the quality policy reads it (0.01 or 2%), refused at parse time."""
    try:
        parse_max_loss(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--max-map-loss ")) from None
    return text


def _add_quality(parser: argparse.ArgumentParser) -> None:
    """The accuracy options: the allowed loss, how probes train and what they may cost."""
    quality = parser.add_argument_group("accuracy (the mAP-loss constraint)", QUALITY)
    quality.add_argument("--max-map-loss", type=_max_loss, default=defaults.MAX_MAP_LOSS, metavar="X", help="allowed mAP50-95 loss: absolute (0.01) or relative (2%%) (default 0.01)")
    quality.add_argument(
        "--quality", default="probe", choices=get_args(QualityMode),
        help="probe (default): probe a signature only when its speed could make it the best feasible trial; "
        "all: probe every signature the search measures (fills the probe cache that later studies reuse); "
        "off: keep accuracy knobs at the baseline, no probes",
    )

    quality.add_argument("--probe-epochs", type=integer(1, MAX_EPOCHS), default=defaults.PROBE_EPOCHS, help=f"epochs per probe (default {defaults.PROBE_EPOCHS})")
    quality.add_argument("--probe-fraction", type=fraction(low_open=True), default=defaults.PROBE_FRACTION, help=f"fraction of the train set per probe (default {defaults.PROBE_FRACTION:g})")
    quality.add_argument("--weights", default=None, metavar="PATH", help="local checkpoint the probes start from (default: from scratch)")
    quality.add_argument("--probe-timeout", type=seconds, default=defaults.PROBE_TIMEOUT_S, help=f"seconds before one probe is killed (default {defaults.PROBE_TIMEOUT_S:g})")
    quality.add_argument(
        "--probe-seeds", type=integer(2, MAX_PROBE_SEEDS), default=defaults.PROBE_SEEDS, metavar="N",
        help=f"seeds a signature is first probed with, the candidate's paired with the baseline's (same data order); a look "
        f"that straddles the allowed loss doubles them up to {defaults.PROBE_MAX_SEEDS} (default {defaults.PROBE_SEEDS}, at least 2)",
    )
    quality.add_argument(
        "--probe-grow", type=real(0.0, MAX_SECONDS, "a finite number of seconds"), default=defaults.PROBE_GROW_S, metavar="SECONDS",
        help="when the baseline's probes learned too little (mAP50-95 under 0.05), grow the budget (epochs, then "
        "fraction) and probe it again, while its probes stay within this many seconds "
        f"(default {defaults.PROBE_GROW_S:g}; 0: never grow)",
    )
    quality.add_argument(
        "--probe-share", type=fraction(low_open=True), default=defaults.PROBE_SHARE, metavar="S",
        help="the most one probe may train, as a share of your run (--epochs x train images): the budget never grows "
        f"past it (default {100 * defaults.PROBE_SHARE:g}%%)",
    )
    quality.add_argument(
        "--risk", type=fraction(low_open=True, high_open=True), default=defaults.ACCURACY_RISK, metavar="P",
        help="the chance you accept that a recommended change of model, imgsz, batch, freeze or amp loses more than "
        "--max-map-loss over your run, over every candidate the search judged: what screening keeps is confirmed on "
        f"fresh seeds at a longer probe, each confirmation spending half the risk left (default {100 * defaults.ACCURACY_RISK:g}%%)",
    )
    quality.add_argument(
        "--confirm-seeds", type=integer(2, MAX_PROBE_SEEDS), default=defaults.CONFIRM_SEEDS, metavar="N",
        help="fresh seeds the confirmation probes at each of its two lengths; fewer cost less, but a loss that strikes "
        f"one seed in four goes unseen more often (default {defaults.CONFIRM_SEEDS})",
    )


def _add_extras(parser: argparse.ArgumentParser) -> None:
    """Where a search starts from and what it does at its end: warm start, prepared copies, report, verify, ceilings."""
    parser.add_argument(
        "--warm-start", default=None, metavar="SOURCE",
        help="start from another study: a storage URL or an exported .db/.log file, optionally ::STUDY; its best "
        "configs are adapted to this machine and run right after the baseline, its probes reused if the dataset matches",
    )
    parser.add_argument(
        "--prepare", default=None, choices=get_args(PrepareFormat), metavar="FORMAT",
        help="first make a resized copy of the dataset at each imgsz in the space (as `speedopt prepare` does; "
        "resumable, reused by later searches) and search the data knob: original or resized. png and npy are "
        "lossless, the very pixels the trainer would compute, so they are searched with --quality off too; "
        "jpg (quality 100) is smaller and can change accuracy, so it is probed. Without --prepare, copies "
        "already made are found and used",
    )
    parser.add_argument("--epochs", type=integer(1, MAX_EPOCHS), default=defaults.EPOCHS, help=f"epochs of your full run: the report's projection, and what quality probes are priced against (default {defaults.EPOCHS})")
    parser.add_argument("--no-report", action="store_true", help="skip writing reports/<study>.md at the end, and the jobs only the report reads (the baseline's and the recommendation's ceilings and timed validation passes)")
    parser.add_argument(
        "--verify", action="store_true",
        help="at the end, run the recommended command for real for --verify-epochs epochs (speedopt verify) and "
        "compare its epoch time with the prediction; the report gets a Verified section",
    )
    parser.add_argument("--verify-epochs", type=integer(1, MAX_EPOCHS), default=2, metavar="E", help="epochs of that run (default 2)")
    parser.add_argument(
        "--prune-margin", type=fraction(high_open=True), default=defaults.PRUNE_MARGIN, metavar="M",
        help="stop a trial part-way (Optuna pruning) once, after at least half its --steps, its running images/s is below "
        f"(1 - M) x the best feasible trial's (default {100 * defaults.PRUNE_MARGIN:.0f}%%: wider than this machine's noise); 0: never",
    )
    parser.add_argument(
        "--cold", dest="warm", action="store_false",
        help="start every trial in a fresh Python (by default each trial is a fresh process forked from one warm worker "
        "that imported torch and the trainer once: the same trial, without paying the imports every time)",
    )
    parser.add_argument(
        "--ceiling-rank", choices=RANK_MODES, default="auto",
        help="before the trials, bound the space's configs by their data and compute ceilings (branch and bound: only "
        "the ceiling jobs that can change which bound is highest run) and run the highest-bound configs first; also "
        "skips configs whose ceilings cannot reach the best. auto (default): when the space holds more configs than "
        "--trials",
    )
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument(
        "--stop-at-ceiling", type=fraction(), default=defaults.STOP_AT_CEILING, metavar="SHARE",
        help="stop sampling once the best config reaches this share of min(data ceiling, compute ceiling): 0.95 or 95%% "
        f"(default {100 * defaults.STOP_AT_CEILING:.0f}%%); nothing is left to gain from these knobs there (see `speedopt ceilings`)",
    )
    stop.add_argument("--no-stop-at-ceiling", dest="stop_at_ceiling", action="store_const", const=0.0, help="never stop at the ceiling")


INTERRUPTED = 130  # the shell's status for a process ended by SIGINT


def resumable(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command`` that answers Ctrl-C (or SIGTERM, see :func:`speedopt.cli.main`) with one line and exit 130: the
    interrupted trial is retried on the rerun."""

    def run_it(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except KeyboardInterrupt:
            print(f"speedopt {args.command}: interrupted; run the same command to resume", file=sys.stderr)
            return INTERRUPTED

    return run_it


def config_of(args: argparse.Namespace) -> SearchConfig:
    """The parsed options as the API's SearchConfig."""
    return SearchConfig(
        data=args.data, trials=args.trials, timeout_s=args.timeout, storage=args.storage, study=args.study,
        space_file=args.space, fix=tuple(args.fix), baseline=args.baseline, steps=args.steps, warmup=args.warmup,
        max_steps=args.max_steps, finalists=args.finalists, repeats=args.repeats, min_gain=args.min_gain, ablate=args.ablate,
        seed=args.seed, device=args.device, engine=args.engine, yolov5_dir=args.yolov5_dir,
        trial_timeout_s=args.trial_timeout, ram_limit_gb=args.ram_limit, quality=args.quality,
        max_map_loss=args.max_map_loss, probe_epochs=args.probe_epochs, probe_fraction=args.probe_fraction,
        weights=args.weights, probe_timeout_s=args.probe_timeout, probe_seeds=args.probe_seeds, probe_grow_s=args.probe_grow,
        probe_share=args.probe_share, accuracy_risk=args.risk, confirm_seeds=args.confirm_seeds, epochs=args.epochs,
        warm_start=args.warm_start, prepare=args.prepare,
        stop_at_ceiling=args.stop_at_ceiling, prune_margin=args.prune_margin, warm=args.warm, ceiling_rank=args.ceiling_rank,
        ends=not args.no_report,
    )


def run(args: argparse.Namespace) -> int:
    config = config_of(args)
    quiet_optuna()
    err = Console(stderr=True)
    result = speedopt.search(config, view=view_for(err), on_prepare=_prepare_printer(err))
    out = Console(soft_wrap=True)  # commands and figures stay whole lines, whatever the terminal width
    out.print(f"study {shown_name(result.study_name, markup=True)}: {result.complete} complete trials ({result.counts_text()}){result.failed_text()}", highlight=False)
    if result.stopped:
        out.print(f"search stopped early: {result.stopped}", highlight=False)
    if result.optimizer_text():
        out.print(result.optimizer_text(), highlight=False)
    print_quality(out, result)
    if result.recommended is None:
        out.print("no feasible trial measured ok: see the statuses above", highlight=False)
        return 1
    base = result.baseline
    if base is not None and not base.result.ok:
        out.print(f"baseline ended {base.status.value}: {base.result.message}", highlight=False)
    _print_finals(out, result)
    if result.compile is not None:  # decided once at the end, on the recommendation (its command compiles where it pays)
        out.print(result.compile.line(), highlight=False, markup=False)
    rec = speedopt.best(result.study_name, storage=config.storage)
    head = "keep your settings" if rec.keep_settings else "recommended"
    out.print(f"{head}: trial {rec.trial.number}: {knobs_text(rec.knobs)}: {rec.verdict}", highlight=False)
    for line in unchecked_lines(result, rec):
        out.print(line, highlight=False)
    where = f" ({rec.where()})" if rec.where() else ""
    if rec.stand_in:
        out.print(rec.stand_in, highlight=False)
    else:
        out.print(f"train with{where}:\n  {rec.command_line()}", highlight=False)
    for problem in rec.problems():
        out.print(f"warning: {problem}", highlight=False)

    out.print("measure it again:\n  " + rec.measure_again(), highlight=False)
    _print_bill(out, result, args.epochs)
    if args.verify:

        def say(text: str) -> None:
            err.print(f"verify: {text}", highlight=False)

        checked = speedopt.verify(result.study_name, storage=config.storage, epochs=args.verify_epochs, progress=say, on_wait=say)

        out.print("\n".join(checked.lines()), highlight=False)
    if not args.no_report:

        err.print("report: writing it (the search measured what it reads)", highlight=False)
        written = speedopt.report(result.study_name, storage=config.storage, epochs=args.epochs)
        out.print(f"report: {written.markdown}", highlight=False)
    return 0


def run_worker(args: argparse.Namespace) -> int:
    quiet_optuna()
    result = speedopt.worker(args.storage, args.study, view=view_for(Console(stderr=True)))
    target = result.protocol.trials if result.protocol else result.complete
    print(f"study {shown_name(result.study_name)}: {result.complete} of {target} complete trials ({result.counts_text()}){result.failed_text()}")
    return 0


def _print_bill(out: Console, result: SearchOutcome, epochs: int) -> None:
    """What the search cost, by stage, and when the saving pays it back."""
    if not result.bill.seconds:
        return
    out.print(f"bill: {result.payback_text(epochs)}", highlight=False)
    for line in result.bill.lines():
        out.print(f"  {line}", highlight=False)


def _print_finals(out: Console, result: SearchOutcome) -> None:
    """Every finals measurement, per config, with each finalist's paired speedup."""
    finals = result.finals
    if finals is None:
        return
    done = "" if finals.complete else " (incomplete: rerun the same command to finish)"
    rounds = f"{finals.rounds} of {finals.repeats}" if finals.rounds < finals.repeats else str(finals.repeats)
    out.print(f"finals: {len(finals.trials) - 1} config(s) and the baseline in {rounds} interleaved rounds{done}:", highlight=False)
    for line in finals.notes():
        out.print(f"  {line}", highlight=False)
    speedups = finals.speedups()
    by_number = {r.number: r for r in result.trials}
    for number in finals.trials:
        series = " ".join("-" if v is None else f"{v:.1f}" for v in finals.series(number))
        record = by_number.get(number)
        config = knobs_text(record.config) if record else "?"
        if number == finals.baseline:
            out.print(f"  trial {number} (baseline) {config}: {series} images/s", highlight=False)
            continue
        speedup = speedups.get(number)
        ratio = speedup.text() if speedup else "no paired round measured ok"
        out.print(f"  trial {number} {config}: {series} images/s: {ratio}", highlight=False)


def unchecked_lines(result: SearchOutcome, rec: Recommendation) -> list[str]:
    """"accuracy not checked: ..." when quality was off and accuracy knobs differ from the baseline."""
    if result.protocol is None:
        return []
    knobs = unchecked_knobs(result.protocol.quality, result.protocol.baseline, rec.knobs)
    return [f"{unchecked_text(knobs)} (quality off)"] if knobs else []


def _prepare_printer(err: Console) -> Callable[[int, int, int], None]:
    """Progress of --prepare: a line per tenth of each copy, with the measured images/s."""
    import time

    started: dict[int, float] = {}
    said: dict[int, int] = {}

    def show(imgsz: int, done: int, total: int) -> None:
        now = time.perf_counter()
        start = started.setdefault(imgsz, now)
        tenth = 10 * done // max(1, total)
        if said.get(imgsz) == tenth and done < total:
            return
        said[imgsz] = tenth
        rate = done / (now - start) if now > start else 0.0
        err.print(f"prepare: copy at imgsz={imgsz}: {done}/{total} images ({rate:.1f} images/s)", highlight=False)

    return show
