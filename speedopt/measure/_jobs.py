"""The work speedopt runs in a child process, as typed records, and how each one ended.

Four kinds, one shape: a speed trial (:class:`~speedopt.measure.TrialRequest`), a quality probe
(:class:`ProbeJob`: train one accuracy signature for a fixed budget, validate), a timed validation
pass (:class:`ValidateJob`, for the report's projection) and the trainer's label cache of the full
splits (:class:`LabelsJob`, once per study, so no trial scans labels). Each crosses into the child as
JSON and comes back as a :class:`JobOutcome` whose status is one of the closed set in :mod:`speedopt.status`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from speedopt import defaults
from speedopt.engines import EngineName, LabelCacheBuild, ProbeScores, RecordsEngine, SplitLabels
from speedopt.knobs import Knobs
from speedopt.measure._request import TrialRequest
from speedopt.status import Status


@dataclass(frozen=True)
class _EngineJob(RecordsEngine):
    """What a probe and a validation pass share: the engine, the data, the knobs, the device."""

    engine: EngineName
    yolov5_dir: str | None
    data_yaml: str
    knobs: Knobs
    device: str
    timeout_s: float
    cache_dir: str
    weights: str | None = None  # a local checkpoint to start from (None: from scratch)


@dataclass(frozen=True)
class ProbeJob(_EngineJob):
    """Train one accuracy signature for ``epochs`` on ``fraction`` of the train set, then validate."""

    kind: ClassVar[str] = "probe"
    timeout_flag: ClassVar[str] = "--probe-timeout"

    epochs: int = defaults.PROBE_EPOCHS
    fraction: float = defaults.PROBE_FRACTION
    seed: int = 0
    run_epochs: int = 0  # the user's run the probe is a miniature of (its schedule's shares); 0: the probe's own
    run_images: int = 0  # that run's train images: the optimizer it trains is the one optimizer=auto gives that run


@dataclass(frozen=True)
class ValidateJob(_EngineJob):
    """Time one validation pass on the val split, as the trainer runs it at each epoch's end, and the
    checkpoint save that follows it (figures ``val_s``, ``val_images``, ``save_s``)."""

    kind: ClassVar[str] = "validate"
    timeout_flag: ClassVar[str] = "the validation timeout"


@dataclass(frozen=True)
class LabelsJob(RecordsEngine):
    """Build (or find valid) the trainer's own label cache of a data.yaml's full train and val splits."""

    kind: ClassVar[str] = "labels"
    timeout_flag: ClassVar[str] = "the label-cache timeout"

    engine: EngineName
    yolov5_dir: str | None
    data_yaml: str
    timeout_s: float
    cache_dir: str


Job: TypeAlias = TrialRequest | ProbeJob | ValidateJob | LabelsJob
_KINDS: dict[str, type[TrialRequest] | type[ProbeJob] | type[ValidateJob] | type[LabelsJob]] = {
    cls.kind: cls for cls in (TrialRequest, ProbeJob, ValidateJob, LabelsJob)
}


def job_to_json(job: Job) -> str:
    """The job as the child reads it."""
    return json.dumps({"kind": job.kind, **dataclasses.asdict(job)})


def job_from_json(text: str) -> Job:
    """Inverse of :func:`job_to_json`."""
    data = json.loads(text)
    cls = _KINDS[data.pop("kind")]
    for key in ("knobs", "requested"):
        if key in data:
            data[key] = Knobs.from_dict(data[key])
    for key in ("notes", "train_subset"):
        if key in data:
            data[key] = tuple(data[key])
    if "label_caches" in data:
        data["label_caches"] = tuple(SplitLabels.from_dict(s) for s in data["label_caches"])
    return cls(**data)


@dataclass(frozen=True)
class ValidationTime:
    """One validation pass, timed: seconds and the images it validated; and the epoch-end checkpoint save
    timed in the same job (``save_s``: last.pt, and best.pt as the first epoch always improves; None where
    not timed, e.g. a time stored before saves were timed)."""

    seconds: float
    images: int
    save_s: float | None = None


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended (one of the closed statuses, with a one-line message) and what it measured.

    ``figures`` is what the job itself wrote (empty when the process died first); the typed views
    :meth:`scores` and :meth:`validation` read it for probes and validation passes.
    """

    status: Status
    message: str
    figures: dict[str, Any]
    wall_s: float
    log_tail: str
    network_blocked: tuple[str, ...]
    started_at: float  # epoch seconds: the host lock was held from here
    ended_at: float

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def scores(self) -> ProbeScores | None:
        """A probe's validation accuracy (None unless it ended ok)."""
        if not self.ok:
            return None
        return ProbeScores(self.figures["map50"], self.figures["map50_95"], self.figures["images"],
                           str(self.figures.get("optimizer") or ""))

    def validation(self) -> ValidationTime | None:
        """A validation pass's time (None unless it ended ok)."""
        if not self.ok:
            return None
        return ValidationTime(self.figures["val_s"], self.figures["val_images"], self.figures.get("save_s"))

    def labels(self) -> LabelCacheBuild | None:
        """A labels job's caches (None unless it ended ok)."""
        if not self.ok or "build" not in self.figures:
            return None
        return LabelCacheBuild.from_dict(self.figures["build"])
