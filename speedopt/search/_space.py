"""The search space on this machine: which values each knob may take (sampled through Optuna's suggest API).

Defaults adapt to the machine (workers up to the CPU cores, AMP only with CUDA, cache=ram only
where the decoded training set could fit in RAM). ``--space FILE`` (YAML: knob -> list of values
or {low, high, step}) replaces a knob's domain; ``--fix KNOB=VALUE`` pins one. The baseline's
values are always inside the space, so the baseline can be trial 0. Without ``--baseline`` the
baseline is the trainer's defaults with the values the user pinned: they describe the user's setup.
The space itself (:class:`~speedopt.study.Space`, :class:`~speedopt.study.Domain`) is the study's stored record.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from speedopt.data import read_yaml
from speedopt.errors import UsageError
from speedopt.knobs import CACHE_MODES, COMPILE_OFF, KNOBS, MODEL_SCALES, STRIDE, Knobs, knob_names, parse_value, shown, value_text
from speedopt.study import Space
from speedopt.study.record_types import Domain

ORDERED = knob_names(lambda k: k.ranged)  # integer knobs that may be given as {low, high, step}


#: The trainers' other spellings of a knob in a key=value baseline (batch_size=16, img=640, weights=yolov5s.pt).
_ALIASES = {alias: k.name for k in KNOBS.values() for alias in k.aliases}


def gpu_counts(pool: int) -> tuple[int, ...]:
    """The ``gpus`` values worth measuring on a pool of GPUs: powers of two up to it, and the pool itself."""
    counts = [1]
    while counts[-1] * 2 <= pool:
        counts.append(counts[-1] * 2)
    return tuple(sorted({*counts, max(1, pool)}))


def default_space(
    baseline: Knobs, cores: int, cuda: bool, gpu_memory_mb: int | None = None, gpu_pool: int = 1
) -> Space:
    """The default space on this machine, around the baseline (cache=ram is checked by the caller).

    imgsz from half the baseline's up to it (larger images are never faster); batch by powers of two
    (smaller ones on a CPU, where memory bandwidth, not occupancy, limits); freeze 0..10 (the YOLOv5
    backbone); gpus 1, 2, 4 ... up to the GPUs ``--device`` lists (``gpu_pool``); on a GPU also amp=bf16,
    compile off/default (decided at the end: :func:`decide_at_end`), channels_last default/off and deterministic on/off (the engine's :meth:`~speedopt.engines.Engine.accepted`
    and fixed knobs then drop what its trainer cannot run).
    """
    top = max(baseline.imgsz, 2 * STRIDE)
    low = max(STRIDE, (top // 2) // STRIDE * STRIDE)
    batches: tuple[int, ...] = (8, 16, 32, 64, 128) if cuda else (2, 4, 8, 16)
    if cuda and gpu_memory_mb and gpu_memory_mb >= 40_000:
        batches += (256,)
    return Space(
        {
            "workers": Domain(low=0, high=max(1, cores)),
            "batch": Domain(choices=batches),
            "imgsz": Domain(low=low, high=top, step=STRIDE),
            "cache": Domain(choices=CACHE_MODES),
            "amp": Domain(choices=(True, False, "bf16") if cuda else (False,)),  # the engine drops bf16 where it cannot
            "model": Domain(choices=MODEL_SCALES),
            "freeze": Domain(low=0, high=10),
            "gpus": Domain(choices=gpu_counts(gpu_pool) if cuda else (1,)),
            # Decided once at the end (decide_at_end), never per trial. A cold compile takes minutes on a CPU: listed in
            # --space there, decided by default on a GPU only.
            "compile": Domain(choices=(COMPILE_OFF, "default") if cuda else (COMPILE_OFF,)),
            "channels_last": Domain(choices=("default", "off") if cuda else ("default",)),
            "deterministic": Domain(choices=(True, False) if cuda else (True,)),
        }
    )


def decide_at_end(space: Space, baseline: Knobs) -> tuple[Space, Knobs, tuple[str, ...], list[str]]:
    """Take the values of the knob the registry marks ``at_end`` (compile: a one-time cost per run) out of what the
    trials sample: the space (its default, ``off``, for every trial), the baseline (at the default: eager), the values
    decided once at the end on the recommendation (:class:`~speedopt.study.record_types.CompileDecision`), and a note.
    A space that pins one value (``--fix compile=default``) keeps it: every trial compiles, as asked."""
    knob = next((k for k in KNOBS.values() if k.at_end), None)
    domain = space.domains.get(knob.name) if knob is not None else None
    if knob is None or domain is None or len(domain.values()) < 2:
        return space, baseline, (), []
    name, off = knob.name, knob.default
    modes = tuple(v for v in domain.values() if v != off)
    notes = [
        f"{name} {domain.text()}: decided once at the end, on the recommendation measured eager and compiled in "
        "interleaved rounds, its one-time cost charged against --epochs; no trial compiles"
    ]
    if getattr(baseline, name) != off:
        notes.append(f"baseline {name}={getattr(baseline, name)} is measured eager: {name} is decided at the end")
        baseline = dataclasses.replace(baseline, **{name: off})
    return Space({**space.domains, name: Domain(choices=(off,))}), baseline, modes, notes


Accepted = dict[str, tuple[tuple[Any, ...], str]]  # Engine.accepted(): knob -> (the values its trainer takes, why)


def narrow(domains: dict[str, Domain], accepted: Accepted) -> list[str]:
    """Leave out of ``domains`` (in place) the values the engine's trainer does not take; a note for each knob."""
    notes = []
    for knob, (allowed, why) in accepted.items():
        have = domains[knob].values()
        if any(v not in allowed for v in have):
            domains[knob] = Domain(choices=tuple(v for v in have if v in allowed) or (allowed[0],))
            dropped = ", ".join(f"{knob}={value_text(v)}" for v in have if v not in allowed)
            notes.append(f"{dropped} left out of the space: {why}")
    return notes


def refuse_unaccepted(listed: dict[str, Domain], accepted: Accepted, engine: str, flag: str = "--space") -> None:
    """UsageError naming a ``flag`` (--space or --fix) value the engine's trainer does not take, and the values it does."""
    for knob, (allowed, why) in accepted.items():
        refused = [v for v in listed[knob].values() if v not in allowed] if knob in listed else []
        if refused:
            given = ", ".join(value_text(v) for v in refused)
            what = f"--fix {knob}={given}" if flag == "--fix" else f"{flag} lists {knob} {given}"
            raise UsageError(
                f"{what}, which the {engine} trainer here does not take ({why}: "
                f"{', '.join(value_text(v) for v in allowed)}); {'pin' if flag == '--fix' else 'list'} only those"
            )


def _range(knob: str, low: Any, high: Any, step: Any, source: str) -> Domain:
    """An integer range low..high by step, each end checked as a knob value (so within the knob's sane
    maximum: a range cannot enumerate without bound), imgsz by multiples of the stride."""
    if knob not in ORDERED:
        raise UsageError(f"{source}: {knob} takes a list of values, not a range")
    try:
        low, high = parse_value(knob, low), parse_value(knob, high)
    except UsageError as exc:
        raise UsageError(f"{source}: {knob} range: {exc}") from None
    if isinstance(step, bool) or not isinstance(step, int) or step < 1 or low > high:
        raise UsageError(
            f"{source}: {knob} range must have low <= high and a positive integer step, "
            f"got low={low} high={high} step={shown(step)}"
        )
    unit = KNOBS[knob].step or 1
    if step % unit:
        raise UsageError(f"{source}: {knob} range step must be a multiple of {unit}, got {step}")
    return Domain(low=low, high=high, step=step)


def _parse_domain(knob: str, spec: Any, source: str) -> Domain:
    if isinstance(spec, dict):
        if knob not in ORDERED:
            raise UsageError(f"{source}: {knob} takes a list of values, not a range")
        if set(spec) - {"low", "high", "step"} or not {"low", "high"} <= set(spec):
            raise UsageError(f"{source}: {knob} range needs low and high (and optionally step), got {shown(spec)}")
        return _range(knob, spec["low"], spec["high"], spec.get("step", KNOBS[knob].step), source)
    values = spec if isinstance(spec, list) else [spec]
    if not values:
        raise UsageError(f"{source}: {knob} has no values")
    parsed = []
    for value in values:
        try:
            v = parse_value(knob, value)
        except UsageError as exc:
            raise UsageError(f"{source}: {exc}") from None
        if v not in parsed:
            parsed.append(v)
    return Domain(choices=tuple(parsed))


def load_file(path: str) -> dict[str, Domain]:
    """Domains from a --space YAML file (at most 1 MiB, aliases bounded: see :func:`speedopt.data.read_yaml`)."""
    if not Path(path).is_file():
        raise UsageError(f"space file not found: {path}")
    data = read_yaml(path, "space file")
    if not isinstance(data, dict) or not data:
        raise UsageError(f"space file {path} must map knobs to a list of values or {{low, high, step}}")
    return {str(k): _parse_domain(str(k), v, path) for k, v in data.items()}


def parse_fix(items: list[str]) -> dict[str, Domain]:
    """Domains pinned by ``--fix KNOB=VALUE``."""
    fixed = {}
    for item in items:
        knob, sep, value = item.partition("=")
        if not sep or not value:
            raise UsageError(f"--fix expects KNOB=VALUE, got {item!r}")
        fixed[knob.strip()] = Domain(choices=(parse_value(knob.strip(), value),))
    return fixed


def parse_baseline(text: str | None, pinned: dict[str, Any] | None = None) -> Knobs:
    """The user's current settings in the trainer's ``key=value`` form; unknown keys are an error.

    Keys the trainer has but speedopt does not tune (epochs, data, device, ...) are ignored. Without
    ``text`` the baseline is the trainer's defaults with the ``pinned`` values (``--fix``, one-value
    ``--space`` entries): a value the user pinned describes their setup, so a speedup over the baseline
    never hides a change they asked for (yolov5n at 320 measured against the default yolov5s at 640).
    Given ``text`` is the baseline as written; the space widens to contain it.
    """
    knobs = Knobs()
    if not text:
        return dataclasses.replace(knobs, **(pinned or {}))
    ignored = {"data", "epochs", "device", "project", "name", "exist_ok", "patience", "seed", "optimizer"}
    values: dict[str, Any] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--baseline expects key=value pairs like 'model=yolov5s imgsz=640', got {item!r}")
        key = _ALIASES.get(key, key)
        if key == "device" and "," in value:  # the trainer's multi-GPU form: device=0,1 is DDP on 2 GPUs
            values["gpus"] = len([v for v in value.split(",") if v.strip()])
            continue
        if key in ignored:
            continue
        values[key] = parse_value(key, value)
    return dataclasses.replace(knobs, **values)
