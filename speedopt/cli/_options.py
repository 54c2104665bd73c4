"""What every command shares: the one-line argparse, option groups, and quiet Optuna logging."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from speedopt import defaults, engines
from speedopt.engines import NAMES, EngineName
from speedopt.errors import UsageError
from speedopt.knobs import KNOBS, Flag, Knob, Knobs, shown
from speedopt.measure import TrialOptions


class Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line (and exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: Sane maxima of the command line's numbers: far above any real run, low enough that a typo (10**9 seeds, 10**12
#: epochs) cannot make speedopt enumerate, allocate or wait without bound. Each option states its own range.
MAX_SECONDS = 366 * 86400.0  # a year: any timeout or time budget
MAX_STEPS = 100_000  # measured or warm-up batches of one trial
MAX_EPOCHS = 100_000  # epochs of a run, a probe or a verify run
MAX_TRIALS = 100_000  # trials of one study
MAX_ROUNDS = 1_000  # finalists, finals rounds
MAX_SEED = 2**32 - 1  # numpy's and Optuna's samplers take seeds in [0, 2**32)
MAX_PROBE_SEEDS = 64  # seeds a signature is first probed with (each one trains a probe)
MAX_RAM_GIB = 2.0**20  # a pebibyte
MAX_JOBS = 4096  # worker processes of prepare


def _out_of_range(what: str, low: float, high: float, text: str, low_open: bool = False, high_open: bool = False,
                  example: str = "") -> str:
    """'must be <what> at least LOW and at most HIGH<example>, got TEXT': the range and the value, cut short."""
    above = f"above {_bound(low)}" if low_open else f"at least {_bound(low)}"
    below = f"below {_bound(high)}" if high_open else f"at most {_bound(high)}"
    return f"must be {what} {above} and {below}{example}, got {shown(text)}"


def _bound(value: float) -> str:
    """A range's end as written: a whole number in full (31622400, not 3.16224e+07)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def integer(low: int = 0, high: int = MAX_TRIALS) -> Callable[[str], int]:
    """An argparse type: an integer in [``low``, ``high``], else one line naming the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # also a string of more digits than Python converts
            raise argparse.ArgumentTypeError(_out_of_range("an integer", low, high, text)) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(_out_of_range("an integer", low, high, text))
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def real(low: float, high: float, what: str = "a number", low_open: bool = False, high_open: bool = False,
         percent: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number between ``low`` and ``high`` (``*_open``: that end excluded); with
    ``percent``, ``5%`` reads as 0.05. nan and inf are refused: nan compares false with every bound."""

    def parse(text: str) -> float:
        example = " (such as 0.05 or 5%)" if percent else ""
        try:
            value = float(text[:-1]) / 100 if percent and text.endswith("%") else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(_out_of_range(what, low, high, text, low_open, high_open, example)) from None
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (math.isfinite(value) and above and below):
            raise argparse.ArgumentTypeError(_out_of_range(what, low, high, text, low_open, high_open, example))
        return value

    parse.__name__ = "real"
    return parse


def fraction(low_open: bool = False, high_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a fraction in [0, 1] (``*_open``: that end excluded), as ``0.05`` or ``5%``."""
    return real(0.0, 1.0, "a fraction", low_open, high_open, percent=True)


#: An argparse type: a positive number of seconds, at most a year.
seconds = real(0.0, MAX_SECONDS, "a finite number of seconds", low_open=True)


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
        "--engine", default=engines.DEFAULT, type=engine_name, metavar="{" + ",".join(NAMES) + "}",
        help="trainer: ultralytics (default; the ultralytics package) or yolov5 (classic ultralytics/yolov5 train.py)",
    )
    parser.add_argument(
        "--yolov5-dir", default=None, metavar="PATH",
        help="with --engine yolov5: your clone of ultralytics/yolov5 (default: the yolov5 package, speedopt[yolov5])",
    )


def listed(knob: Knob) -> Callable[[str], str]:
    """An argparse type for a knob whose values the installed trainer lists (``--compile``: the one trainer that
    compiles, Ultralytics): a mode it does not list is refused here, naming the modes, as a --space or --fix value is
    checked, instead of running to an infeasible trial that blames the C++ compiler."""

    def parse(text: str) -> str:
        try:
            value = knob.parse(text)
        except UsageError:
            value = text
        if value == knob.default:
            return str(value)
        allowed, why = engines.get("ultralytics").accepted("cpu").get(knob.name, ((str(knob.default),), "this trainer's"))
        if value not in allowed:
            raise argparse.ArgumentTypeError(f"unknown {knob.name} mode {shown(text)}; {why}: {', '.join(allowed)}")
        return str(value)

    parse.__name__ = knob.name
    return parse


def _argument(knob: Knob, flag: Flag) -> dict[str, Any]:
    """argparse's keyword arguments for ``knob``'s ``flag``, as the registry declares it."""
    how: dict[str, Any] = {"default": flag.default, "help": flag.help}
    if flag.choices is not None:
        how["choices"] = flag.choices
    elif flag.low is not None:
        high = flag.high() if callable(flag.high) else flag.high
        how["type"] = integer(flag.low, MAX_TRIALS if high is None else high)
    elif flag.listed:
        how["type"] = listed(knob)
    return how


def add_knobs(parser: argparse.ArgumentParser, own: bool = False) -> None:
    """--data and one config's knobs (each knob's registry :attr:`~speedopt.knobs.Knob.flag`), each defaulting to the
    trainer's own default; ``own``: with the flags of ``speedopt trial``'s own (--gpus), after the others."""
    parser.add_argument("--data", required=True, help="the dataset's data.yaml (YOLO format)")
    flagged = [(k, k.flag) for k in KNOBS.values() if k.flag is not None]
    for knob, flag in sorted(flagged, key=lambda pair: not pair[1].common):  # a stable sort: registry order in each
        if flag.common or own:
            parser.add_argument(flag.name, **_argument(knob, flag))


def knobs_of(args: argparse.Namespace) -> Knobs:
    """The knobs given by :func:`add_knobs`' options (each knob's registry :attr:`~speedopt.knobs.Knob.flag`, where
    the command has it)."""
    return Knobs(**{k.name: k.flag.read(getattr(args, k.name)) for k in KNOBS.values() if k.flag and hasattr(args, k.name)})


def add_measurement(parser: argparse.ArgumentParser, timeout_flag: str) -> None:
    """--steps, --warmup, --device, the per-trial timeout and --ram-limit."""
    parser.add_argument(
        "--steps", type=integer(1, MAX_STEPS), default=defaults.STEPS,
        help=f"measured batches per trial, at least (default {defaults.STEPS}): the window grows until the 90%% "
        "confidence interval of the mean step time is within +/-5%%, or --max-steps",
    )
    parser.add_argument(
        "--max-steps", type=integer(1, MAX_STEPS), default=None,
        help=f"the most measured batches per trial (default {defaults.MAX_STEPS_FACTOR} x --steps)",
    )
    parser.add_argument(
        "--warmup", type=integer(0, MAX_STEPS), default=defaults.WARMUP,
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
        "--ram-limit", type=real(0.0, MAX_RAM_GIB, "a finite number of GiB", low_open=True), default=None, metavar="GIB",
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



