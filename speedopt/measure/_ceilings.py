"""The two ceilings of a config: what its data pipeline alone delivers, what its model alone computes.

A trial's images/s cannot beat either: the **data ceiling** is the trainer's own train loader (same
workers, cache, imgsz, batch, augmentation, data) drained with no model step; the **compute ceiling**
is the trainer's own steps (forward, backward, optimizer; same model, imgsz, batch, AMP, freeze) on
the trainer's first few batches, taken once and kept on the device, no loader. Each is one short job of the real trainer,
set up as for training, through the one job runner (``TrialRequest.mode``; see
:data:`speedopt.engines.MODES`), on one GPU.

They are separable: a data ceiling depends only on :data:`DATA_KNOBS`, a compute ceiling only on
:data:`COMPUTE_KNOBS`. :func:`ceiling_knobs` sets the other knobs to cheap neutral values (the
smallest model for a data ceiling; no workers and no cache for a compute ceiling), so one
measurement serves every config with the same :func:`key_of`, and a study keeps them by key
(``kind|key``, :func:`speedopt.study.schema.read_ceilings`). min(data, compute) bounds the config; the lower one binds.

A bound is checked against every trial measured beside it (:meth:`Ceilings.fault`): a trial above its
ceiling beyond both intervals is a measurement fault, shown with both figures, and no rule acts on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from speedopt.knobs import KNOBS, MODEL_SCALES, Knobs, Side, knob_names
from speedopt.measure._request import TrialRequest
from speedopt.measure._result import TrialResult
from speedopt.status import Status

CeilingKind = Side  # the loader alone, the model alone: knobs.Side, the one declaration of the ceiling kinds
KINDS: tuple[CeilingKind, ...] = get_args(CeilingKind)
DATA_KNOBS = knob_names(lambda k: "data" in k.sides)  # the registry's knobs that act on the loader
COMPUTE_KNOBS = knob_names(lambda k: "compute" in k.sides)  # ... and on the model's steps
#: The stored keys' format (a study keeps its ceilings by key): the knobs a ceiling depended on when keys were first
#: stored, always written, in this order; a knob added since follows them in registry order, written only where it
#: differs from its default, so every key stored before it still matches.
_KEY_FORMAT = ("workers", "cache", "model", "imgsz", "batch", "amp", "freeze", "data")
KNOBS_OF: dict[CeilingKind, tuple[str, ...]] = {"data": DATA_KNOBS, "compute": COMPUTE_KNOBS}  # the knobs each ceiling depends on
_WHAT: dict[CeilingKind, str] = {"data": "the train loader alone, no model step", "compute": "the model's steps alone, on its first batches kept on the device"}

#: What two jobs of one config may differ by beyond their own intervals (each interval is within its job; the machine
#: drifts between jobs: the replay's tables drew a trial 14% above its compute ceiling's repeat, both within 3%, where
#: the means agree). A trial above its ceiling by less is not taken for a fault; the finals' sigma floor is the same 10%.
DRIFT = 0.10

Prepare = Callable[[Knobs], "TrialRequest | TrialResult"]
Measure = Callable[[TrialRequest], TrialResult]


def key_of(kind: CeilingKind, knobs: Knobs) -> str:
    """The knobs a ``kind`` ceiling depends on, as text: ``workers=2 cache=ram imgsz=320 batch=16 data=original``."""
    names = KNOBS_OF[kind]
    values = knobs.to_dict()
    first = [n for n in _KEY_FORMAT if n in names]
    newer = [n for n in names if n not in _KEY_FORMAT and values[n] != KNOBS[n].default]
    return " ".join(f"{n}={values[n]}" for n in (*first, *newer))


def ceiling_knobs(kind: CeilingKind, knobs: Knobs) -> Knobs:
    """``knobs`` for a ``kind`` ceiling job: the knobs it does not depend on set to cheap neutral values, one GPU."""
    if kind == "data":
        model = MODEL_SCALES[0] if knobs.model in MODEL_SCALES else knobs.model  # the loader is the same for every scale
        return dataclasses.replace(knobs, model=model, freeze=0, gpus=1)
    return dataclasses.replace(knobs, workers=0, cache="none", data="original", gpus=1)


@dataclass(frozen=True)
class Ceiling:
    """One measured ceiling: images/s of the loader alone (``data``) or of the model alone (``compute``)."""

    kind: CeilingKind
    key: str
    status: Status  # the job's closed status
    message: str
    images_per_s: float | None = None
    ci_rel: float | None = None  # the 90% CI half-width of its mean step time, relative
    steps: int | None = None
    wall_s: float | None = None  # the job's wall time (set-up included)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.images_per_s is not None

    @staticmethod
    def name_of(job: str, key: str) -> str:
        """The one name a study stores a ceiling under: ``job|key`` (``job``: its kind, or the loader with mosaic off,
        :data:`MOSAIC_OFF`; ``key``: :func:`key_of` the knobs it ran)."""
        return f"{job}|{key}"

    @classmethod
    def name_for(cls, job: str, knobs: Knobs) -> str:
        """:meth:`name_of` the ceiling ``job`` of ``knobs`` (the mosaic-off loader is keyed as the data ceiling is)."""
        return cls.name_of(job, key_of("compute" if job == "compute" else "data", knobs))

    def text(self) -> str:
        """``data ceiling 45.1 images/s (+/-3.2%, 20 steps; the train loader alone ...)``, or why it is missing."""
        if not self.ok:
            return f"{self.kind} ceiling not measured ({self.status.value}: {self.message})"
        ci = f"+/-{100 * self.ci_rel:.1f}%, " if self.ci_rel is not None and self.ci_rel < 10 else ""
        return f"{self.kind} ceiling {self.images_per_s:.1f} images/s ({ci}{self.steps} steps; {_WHAT[self.kind]}: {self.key})"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ceiling:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        return cls(**{**values, "status": Status(values["status"])})

    @classmethod
    def of(cls, kind: CeilingKind, result: TrialResult) -> Ceiling:
        """The ceiling a job measured, keyed by the knobs it ran (read back from the trainer)."""
        return cls(
            kind, key_of(kind, result.config), result.status, result.message,
            result.images_per_s if result.ok else None, result.ci_rel, result.steps, result.wall_s,
        )


@dataclass(frozen=True)
class Ceilings:
    """A config's two ceilings (None: not measured)."""

    data: Ceiling | None = None
    compute: Ceiling | None = None

    @property
    def bound(self) -> float | None:
        """min(data, compute) images/s; None unless both were measured ok."""
        if self.data is None or self.compute is None or not (self.data.ok and self.compute.ok):
            return None
        return min(self.data.images_per_s or 0.0, self.compute.images_per_s or 0.0)

    @property
    def binding(self) -> CeilingKind | None:
        """``data`` or ``compute``: the lower ceiling, which bounds the config (None without both)."""
        if self.bound is None:
            return None
        assert self.data is not None and self.compute is not None
        return "data" if (self.data.images_per_s or 0.0) <= (self.compute.images_per_s or 0.0) else "compute"

    def share(self, images_per_s: float | None) -> float | None:
        """``images_per_s`` as a fraction of min(ceilings) (None without both or without a figure)."""
        bound = self.bound
        return None if bound is None or not images_per_s else images_per_s / bound

    def fault(self, images_per_s: float | None, ci_rel: float | None = None) -> str | None:
        """Why a trial's figure and these ceilings cannot both hold (None: they can): the trial lies above
        min(ceilings) beyond both intervals (``ci_rel``: the trial's). A ceiling bounds every trial of its
        knobs, so one of the two did not measure what it claims: a measurement fault, never a config at its limit."""
        bound, binding = self.bound, self.compute if self.binding == "compute" else self.data
        if bound is None or binding is None or not images_per_s or not Ceilings.above(images_per_s, ci_rel, bound, binding.ci_rel):
            return None
        return (
            f"measurement fault: the trial measured {images_per_s:.1f} images/s{_pm(ci_rel)}, {100 * images_per_s / bound:.0f}% "
            f"of its {self.binding} ceiling {bound:.1f} images/s{_pm(binding.ci_rel)}, which should bound it: "
            "no rule stops or skips on these ceilings"
        )

    @staticmethod
    def above(images_per_s: float, ci_rel: float | None, bound: float, bound_ci_rel: float | None) -> bool:
        """``images_per_s`` lies above ``bound`` beyond both relative intervals and :data:`DRIFT`. A figure without a
        bounded interval (``ci_rel`` None or unbounded) claims nothing beyond it: False; a bound without one counts as exact."""
        if ci_rel is None or ci_rel >= 10:
            return False
        spread = bound_ci_rel if bound_ci_rel is not None and bound_ci_rel < 10 else 0.0
        return images_per_s * (1 - ci_rel) > bound * (1 + spread + DRIFT)

    def lines(self, images_per_s: float | None = None, ci_rel: float | None = None) -> list[str]:
        """The two ceilings, which binds, and (given a trial's figure) how close the trial is to it, or the fault."""
        out = [c.text() for c in (self.data, self.compute) if c is not None]
        bound, share = self.bound, self.share(images_per_s)
        if bound is not None:
            out.append(f"min(ceilings) {bound:.1f} images/s: the {self.binding} ceiling binds")
        fault = self.fault(images_per_s, ci_rel)
        if fault is not None:
            out.append(fault)
        elif share is not None:
            out.append(f"trial {images_per_s:.1f} images/s = {100 * share:.0f}% of min(ceilings)")
        return out


def _pm(ci_rel: float | None) -> str:
    return f" (+/-{100 * ci_rel:.1f}%)" if ci_rel is not None and ci_rel < 10 else ""


def measure_one(kind: CeilingKind, knobs: Knobs, prepare: Prepare, run: Measure, mode: str | None = None) -> Ceiling:
    """Measure the ``kind`` ceiling of ``knobs``: its job prepared as a trial of :func:`ceiling_knobs`, then run
    (in the engine's ``mode``: the kind's own unless given)."""
    wanted = ceiling_knobs(kind, knobs)
    request = prepare(wanted)
    if isinstance(request, TrialResult):  # refused before running (the message says why)
        return Ceiling.of(kind, request)
    return Ceiling.of(kind, run(dataclasses.replace(request, mode=mode or kind)))


#: The data ceiling's loader with mosaic off: the trainer's last ``close_mosaic`` epochs (a mosaic sample loads four
#: images, so those epochs load faster). Stored beside the ceilings as ``data-no-mosaic|<data key>``.
MOSAIC_OFF = "data-no-mosaic"


def measure_mosaic_off(
    knobs: Knobs,
    prepare: Prepare,
    run: Measure,
    known: Mapping[str, Ceiling] | None = None,
    save: Callable[[str, Ceiling], None] = lambda name, ceiling: None,
) -> Ceiling:
    """The loader of ``knobs`` with mosaic off (its kind ``data``): from ``known`` when measured ok before, else
    measured now and handed to ``save``, under :data:`MOSAIC_OFF`'s name."""
    return _found_or_measured(MOSAIC_OFF, "data", knobs, prepare, run, known, save)


def _found_or_measured(
    job: str, kind: CeilingKind, knobs: Knobs, prepare: Prepare, run: Measure,
    known: Mapping[str, Ceiling] | None, save: Callable[[str, Ceiling], None],
) -> Ceiling:
    """The ``job`` (a kind, or :data:`MOSAIC_OFF`) of ``knobs``: ``known`` by ``job|key`` when ok, else measured and saved
    under the key it ran (read back from the trainer)."""
    found = (known or {}).get(Ceiling.name_of(job, key_of(kind, knobs)))
    if found is not None and found.ok:
        return found
    ceiling = measure_one(kind, knobs, prepare, run, mode=job)
    save(Ceiling.name_of(job, ceiling.key), ceiling)
    return ceiling


def measure_ceilings(
    knobs: Knobs,
    prepare: Prepare,
    run: Measure,
    known: Mapping[str, Ceiling] | None = None,
    save: Callable[[str, Ceiling], None] = lambda name, ceiling: None,
    kinds: tuple[CeilingKind, ...] | None = None,
) -> Ceilings:
    """The ceilings of ``knobs`` (both, or ``kinds``; give them as they run: the lookup is by their key): taken from
    ``known`` (by ``kind|key``) when measured ok before, else measured now and handed to ``save``."""
    found = {kind: _found_or_measured(kind, kind, knobs, prepare, run, known, save) for kind in kinds or KINDS}
    return Ceilings(found.get("data"), found.get("compute"))
