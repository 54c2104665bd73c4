"""What every command shares: the one-line argparse, option groups, and quiet Optuna logging."""

from __future__ import annotations

import argparse
from typing import NoReturn

from speedopt import defaults, engines
from speedopt.engines import NAMES, EngineName
from speedopt.errors import UsageError
from speedopt.knobs import CACHE_MODES, Knobs, parse_amp, parse_channels_last, parse_compile
from speedopt.measure import TrialOptions


class Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line (and exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def integer(text: str) -> int:
    """An integer argument, with a one-line message when it is not one."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def fraction(text: str) -> float:
    """A fraction: ``0.05`` or ``5%``."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.05 or 5%, got {text!r}") from None


def seconds(text: str) -> float:

    """A number of seconds."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None


def add_storage(parser: argparse.ArgumentParser, required: bool = False, what: str = "Optuna storage URL") -> None:
    """--storage: an Optuna storage URL or a journal file."""
    default = "" if required else f" (default {defaults.STORAGE_URL})"
    parser.add_argument("--storage", required=required, default=None, help=f"{what}{default}, or a journal file *.log")


def add_study(parser: argparse.ArgumentParser, required: bool = False, default_help: str = "the only study in the storage") -> None:
    """--study: a study name."""
    parser.add_argument("--study", required=required, default=None, help=f"study name (default: {default_help})" if not required else "the study")


def engine_name(text: str) -> EngineName:
    """An ``--engine`` value: a user's trainer, or the stand-in test double, which tests reach this way and
    ``--help`` does not list."""
    try:
        return engines.engine_name(text)
    except UsageError:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(NAMES)})") from None


def add_engine(parser: argparse.ArgumentParser) -> None:
    """--engine and --yolov5-dir: which trainer a trial measures."""
    parser.add_argument(
        "--engine", default="ultralytics", type=engine_name, metavar="{" + ",".join(NAMES) + "}",
        help="trainer: ultralytics (default; the ultralytics package) or yolov5 (classic ultralytics/yolov5 train.py)",
    )
    parser.add_argument(
        "--yolov5-dir", default=None, metavar="PATH",
        help="with --engine yolov5: your clone of ultralytics/yolov5 (default: the yolov5 package, speedopt[yolov5])",
    )


def add_knobs(parser: argparse.ArgumentParser) -> None:
    """--data and one config's knobs, each defaulting to the trainer's own default."""
    parser.add_argument("--data", required=True, help="the dataset's data.yaml (YOLO format)")
    parser.add_argument("--model", default="yolov5s", help="yolov5n|s|m|l|x (built from the architecture yaml) or a local .pt/.yaml")
    parser.add_argument("--imgsz", type=integer, default=640, help="train image size, multiple of 32 (default 640)")
    parser.add_argument("--batch", type=integer, default=16, help="batch size (default 16)")
    parser.add_argument("--workers", type=integer, default=8, help="dataloader workers (default 8; the trainer caps at CPU cores)")
    parser.add_argument("--cache", default="none", choices=CACHE_MODES, help="image cache (default none)")
    parser.add_argument(
        "--amp", default=None, choices=("on", "off", "fp16", "fp32", "bf16"),
        help="precision: on/fp16 (AMP, the default with CUDA), off/fp32 (the CPU's), bf16 (Ultralytics, on a GPU that has it)",
    )
    parser.add_argument(
        "--compile", default="off",
        help="torch.compile mode (Ultralytics only): off (default), default, reduce-overhead, ... as the installed "
        "trainer accepts; its one-time compile is measured apart from the steady images/s",
    )
    parser.add_argument(
        "--channels-last", default="default", choices=("default", "on", "off"),
        help="the model's memory format on CUDA (Ultralytics only); default: the trainer's choice (on for CUDA)",
    )
    parser.add_argument("--freeze", type=integer, default=0, help="freeze the first N layers (default 0)")


def knobs_of(args: argparse.Namespace) -> Knobs:
    """The knobs given by :func:`add_knobs`' options."""
    return Knobs(
        model=args.model, imgsz=args.imgsz, batch=args.batch, workers=args.workers, cache=args.cache,
        amp=parse_amp(args.amp) if args.amp else True, freeze=args.freeze, compile=parse_compile(args.compile),
        channels_last=parse_channels_last(args.channels_last),
    )


def add_measurement(parser: argparse.ArgumentParser, timeout_flag: str) -> None:
    """--steps, --warmup, --device, the per-trial timeout and --ram-limit."""
    parser.add_argument(
        "--steps", type=integer, default=defaults.STEPS,
        help=f"measured batches per trial, at least (default {defaults.STEPS}): the window grows until the 90%% "
        "confidence interval of the mean step time is within +/-5%%, or --max-steps",
    )
    parser.add_argument(
        "--max-steps", type=integer, default=None,
        help=f"the most measured batches per trial (default {defaults.MAX_STEPS_FACTOR} x --steps)",
    )
    parser.add_argument(
        "--warmup", type=integer, default=defaults.WARMUP,
        help=f"warm-up batches, not measured (default {defaults.WARMUP}); with dataloader workers, warm-up also "
        "lasts until the batches they prefetched while the model was built are consumed",
    )
    parser.add_argument(
        "--device", default=None,
        help="cpu, a GPU index such as 0, or the GPUs a multi-GPU run may use, such as 0,1,2,3 (the knob gpus=G takes "
        "the first G; default: GPU 0 if any, else cpu)",
    )
    parser.add_argument(
        timeout_flag, type=seconds, default=defaults.TRIAL_TIMEOUT_S,
        help=f"seconds before one trial is killed (default {defaults.TRIAL_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--ram-limit", type=float, default=None, metavar="GIB",
        help="RAM (GiB) that cache=ram may assume is available (default: what is free now)",
    )
    add_engine(parser)


def trial_options(args: argparse.Namespace, timeout_s: float) -> TrialOptions:
    """The options given by :func:`add_measurement` (``timeout_s``: its per-trial timeout flag's value); their
    field names are the Python API's keyword arguments (:func:`speedopt.trial`, :func:`speedopt.ceilings`)."""
    return TrialOptions(
        steps=args.steps, max_steps=args.max_steps, warmup=args.warmup, timeout_s=timeout_s, device=args.device,
        engine=args.engine, yolov5_dir=args.yolov5_dir, ram_limit_gb=args.ram_limit,
    )


def quiet_optuna() -> None:
    """Optuna's INFO lines and experimental warnings would drown speedopt's own output."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

