"""The search space: which values each knob may take on this machine (sampled through Optuna's suggest API).

Defaults adapt to the machine (workers up to the CPU cores, AMP only with CUDA, cache=ram only
where the decoded training set could fit in RAM). ``--space FILE`` (YAML: knob -> list of values
or {low, high, step}) replaces a knob's domain; ``--fix KNOB=VALUE`` pins one. The baseline's
values are always inside the space, so the baseline can be trial 0. Without ``--baseline`` the
baseline is the trainer's defaults with the values the user pinned: they describe the user's setup.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedopt.data import read_yaml
from speedopt.errors import UsageError
from speedopt.knobs import CACHE_MODES, MODEL_SCALES, STRIDE, Knobs, parse_value, shown, value_text

ORDERED = ("workers", "batch", "imgsz", "freeze", "gpus")  # integer knobs that may be given as {low, high, step}
MAX_VALUES = 10_000  # a stored range with more values than this was not made by speedopt (batch <= 4096)


@dataclass(frozen=True)
class Domain:
    """One knob's values: a list of choices, or an integer range low..high by step."""

    choices: tuple[Any, ...] | None = None
    low: int | None = None
    high: int | None = None
    step: int = 1

    def values(self) -> tuple[Any, ...]:
        """Every value in the domain, in order."""
        if self.choices is not None:
            return self.choices
        assert self.low is not None and self.high is not None
        return tuple(range(self.low, self.high + 1, self.step))

    def with_value(self, value: Any) -> Domain:
        """This domain widened (if needed) so that it contains ``value``."""
        if value in self.values():
            return self
        if self.choices is not None:
            return dataclasses.replace(self, choices=tuple(sorted((*self.choices, value), key=_order)))
        assert self.low is not None and self.high is not None
        if (value - self.low) % self.step:
            return Domain(choices=tuple(sorted({*self.values(), value})))
        return dataclasses.replace(self, low=min(self.low, value), high=max(self.high, value))

    def text(self) -> str:
        """The domain as a user wrote it: ``[4, 8]``, ``[on, off]`` or ``320..640 step 32``."""
        if self.choices is not None:
            return f"[{', '.join(value_text(v) for v in self.choices)}]"
        return f"{self.low}..{self.high}" + (f" step {self.step}" if self.step != 1 else "")

    def to_dict(self) -> dict[str, Any]:
        if self.choices is not None:
            return {"choices": list(self.choices)}
        return {"low": self.low, "high": self.high, "step": self.step}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Domain:
        if "choices" in data:
            return cls(choices=tuple(data["choices"]))
        return cls(low=data["low"], high=data["high"], step=data.get("step", 1))


def _small_range(d: Domain) -> bool:
    """``d`` is an integer range of at most MAX_VALUES values."""
    ends = (d.low, d.high, d.step)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in ends):
        return False
    assert d.low is not None and d.high is not None
    return d.step >= 1 and d.low <= d.high and (d.high - d.low) // d.step < MAX_VALUES


def _order(value: Any) -> Any:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


@dataclass(frozen=True)
class Space:
    """A domain per knob. A knob with a single value is fixed: it is not sampled."""

    domains: dict[str, Domain]

    def fixed(self) -> dict[str, Any]:
        """Knobs pinned to one value."""
        return {k: d.values()[0] for k, d in self.domains.items() if len(d.values()) == 1}

    def sampled(self) -> dict[str, Domain]:
        """Knobs the sampler chooses."""
        return {k: d for k, d in self.domains.items() if len(d.values()) > 1}

    def containing(self, knobs: Knobs) -> Space:
        """The space widened so every sampled knob's domain holds this config's value (the baseline)."""
        values = knobs.to_dict()
        return Space({k: (d.with_value(values[k]) if len(d.values()) > 1 else d) for k, d in self.domains.items()})

    def outside(self, knobs: Knobs) -> str | None:
        """Why a config (as it ran) is no point of this space: a knob at a value its domain lacks (a fixed knob
        at another value: the baseline's other model). None: the config is one of the space's."""
        values = knobs.to_dict()
        for knob, d in self.domains.items():
            if knob in values and values[knob] not in d.values():
                fixed = len(d.values()) == 1
                return f"it ran {knob}={value_text(values[knob])}, " + (
                    f"which the search fixes at {value_text(d.values()[0])}" if fixed else "a value the search does not try"
                )
        return None

    def to_dict(self) -> dict[str, Any]:
        return {k: d.to_dict() for k, d in self.domains.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Space:
        """The stored form back. An imported study is input too: a range that would enumerate more than
        :data:`MAX_VALUES` values (or is not one) is refused in one line instead of exhausting memory."""
        domains = {k: Domain.from_dict(v) for k, v in data.items()}
        for knob, d in domains.items():
            if d.choices is None and not _small_range(d):
                raise UsageError(
                    f"the study's stored space has a {knob} range that is not a sane range ({shown(d.to_dict())}); "
                    "it was not made by this speedopt: start a new study"
                )
        return cls(domains)


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
    backbone); gpus 1, 2, 4 ... up to the GPUs ``--device`` lists (``gpu_pool``).
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
            "amp": Domain(choices=(True, False) if cuda else (False,)),
            "model": Domain(choices=MODEL_SCALES),
            "freeze": Domain(low=0, high=10),
            "gpus": Domain(choices=gpu_counts(gpu_pool) if cuda else (1,)),
        }
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
    if knob == "imgsz" and step % STRIDE:
        raise UsageError(f"{source}: imgsz range step must be a multiple of {STRIDE}, got {step}")
    return Domain(low=low, high=high, step=step)


def _parse_domain(knob: str, spec: Any, source: str) -> Domain:
    if isinstance(spec, dict):
        if knob not in ORDERED:
            raise UsageError(f"{source}: {knob} takes a list of values, not a range")
        if set(spec) - {"low", "high", "step"} or not {"low", "high"} <= set(spec):
            raise UsageError(f"{source}: {knob} range needs low and high (and optionally step), got {shown(spec)}")
        return _range(knob, spec["low"], spec["high"], spec.get("step", STRIDE if knob == "imgsz" else 1), source)
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
        key = {"batch_size": "batch", "img": "imgsz", "weights": "model"}.get(key, key)
        if key == "device" and "," in value:  # the trainer's multi-GPU form: device=0,1 is DDP on 2 GPUs
            values["gpus"] = len([v for v in value.split(",") if v.strip()])
            continue
        if key in ignored:
            continue
        values[key] = parse_value(key, value)
    return dataclasses.replace(knobs, **values)
