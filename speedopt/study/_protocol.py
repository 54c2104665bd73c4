"""What a study was made with: the frozen record stored in its user attrs.

Everything a worker needs to join lives here (data, engine, space, constraint, machine and dataset
fingerprints, speedopt version), so ``speedopt worker`` and ``speedopt report`` need nothing but the
storage. The stored form (:meth:`StudyProtocol.to_attrs`) is one user attr per field, so the
dashboard shows each of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from speedopt import defaults
from speedopt.checkpoint import check_weights_file
from speedopt.data import DatasetFingerprint
from speedopt.engines import EngineName, RecordsEngine
from speedopt.errors import UsageError
from speedopt.knobs import Knobs, check_loads, parse_compile
from speedopt.machine import MachineFingerprint
from speedopt.quality import Policy
from speedopt.study._copies import DataCopy, copy_for, one_of
from speedopt.study._rank import RankMode
from speedopt.study._space import Space
from speedopt.study._warmstart import WarmStart
from speedopt.version import __version__

OBJECTIVE = "images/s"


@dataclass(frozen=True)
class StudyProtocol(RecordsEngine):
    """The measurement protocol of a study and where it was made."""

    #: Fields a resumed study must match: changing one would mix incomparable measurements.
    MATCHED: ClassVar[tuple[str, ...]] = (
        "data", "engine", "yolov5_dir", "device", "space", "baseline", "steps", "max_steps", "warmup", "quality",
        "compile_modes",
    )

    data: str
    dataset: DatasetFingerprint
    machine: MachineFingerprint
    engine: EngineName
    engine_version: str | None
    device: str
    space: Space
    baseline: Knobs
    quality: Policy
    trials: int
    yolov5_dir: str | None = None
    steps: int = defaults.STEPS
    max_steps: int = defaults.MAX_STEPS_FACTOR * defaults.STEPS
    warmup: int = defaults.WARMUP
    finalists: int = defaults.FINALISTS
    repeats: int = defaults.REPEATS
    min_gain: float = defaults.MIN_GAIN
    ablate: bool = True  # measure the path to the recommendation after the finals

    epochs: int = defaults.EPOCHS
    trial_timeout_s: float = defaults.TRIAL_TIMEOUT_S
    ram_limit_bytes: int | None = None
    seed: int = defaults.SEED
    warm_start: WarmStart | None = None
    speedopt_version: str = __version__
    objective: str = OBJECTIVE
    copies: tuple[DataCopy, ...] = ()  # the prepared copies data=resized trains on, one per imgsz
    prune_margin: float = defaults.PRUNE_MARGIN  # prune a trial running below (1 - this) x the best feasible; 0: never
    stop_at_ceiling: float = defaults.STOP_AT_CEILING  # stop sampling once the best config reaches this share of min(its ceilings); 0: never
    ceiling_rank: RankMode = "auto"  # rank the space by its ceilings before the trials (speedopt.search._rank)
    #: torch.compile modes decided once at the end, on the recommendation (the space listed them; every trial runs
    #: eager): :class:`~speedopt.study.record_types.CompileDecision`. Empty: compile is the space's (off, or pinned).
    compile_modes: tuple[str, ...] = ()

    def data_yaml(self, knobs: Knobs) -> str:
        """The data.yaml a run with ``knobs`` trains on: the study's, or its prepared copy at the knobs' imgsz."""
        return copy_for(self.copies, knobs.imgsz).yaml if knobs.data == "resized" else self.data

    def check_loads(self) -> None:
        """Inspect every ``.pt`` file the study hands a trainer (the models of its space and baseline, the probes'
        weights) before one loads it (:func:`speedopt.knobs.check_loads`): a stored study may be an import from
        anywhere. UsageError naming the file refused."""
        domain = self.space.domains.get("model")
        for model in sorted({self.baseline.model, *(domain.values() if domain else ())}):
            check_loads(model)
        if self.quality.weights:
            check_weights_file(self.quality.weights)

    def to_attrs(self) -> dict[str, Any]:
        """The study user attrs (JSON values), one per field."""
        attrs: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            attrs[f.name] = value.to_dict() if hasattr(value, "to_dict") else value
        if self.warm_start is None:
            del attrs["warm_start"]
        attrs["copies"] = [c.to_dict() for c in self.copies]
        if not self.copies:
            del attrs["copies"]
        attrs["compile_modes"] = list(self.compile_modes)
        if not self.compile_modes:
            del attrs["compile_modes"]
        return attrs

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any], study_name: str = "") -> StudyProtocol:
        """Read a study's protocol back; UsageError for a study speedopt did not make."""
        if "space" not in attrs or "baseline" not in attrs or "machine" not in attrs:
            raise UsageError(f"study {study_name!r} was not made by speedopt search; nothing to read")
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in attrs.items() if k in known}
        values["dataset"] = DatasetFingerprint.from_dict(attrs["dataset"])
        values["machine"] = MachineFingerprint.from_dict(attrs["machine"])
        values["space"] = Space.from_dict(attrs["space"])
        values["baseline"] = Knobs.from_dict(attrs["baseline"])
        values["quality"] = Policy.from_dict(attrs["quality"])
        values["warm_start"] = WarmStart.from_dict(attrs["warm_start"]) if attrs.get("warm_start") else None
        values["copies"] = tuple(DataCopy.from_dict(c) for c in attrs.get("copies") or ())
        values["compile_modes"] = tuple(parse_compile(m) for m in attrs.get("compile_modes") or ())
        values["engine"] = one_of(EngineName, attrs.get("engine"), "engine", study_name)
        values["ceiling_rank"] = one_of(RankMode, attrs.get("ceiling_rank", "auto"), "ceiling_rank", study_name)
        return cls(**values)

    def conflict(self, existing: dict[str, Any], study_name: str) -> str | None:
        """Why this protocol may not resume the study with ``existing`` attrs (None if it may)."""
        planned = self.to_attrs()
        for key in self.MATCHED:
            old, new = existing.get(key, planned.get(key)), planned.get(key)
            if old == new:
                continue
            if isinstance(old, dict) and isinstance(new, dict):
                diff = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
                old, new = {k: old.get(k) for k in diff}, {k: new.get(k) for k in diff}
            return (
                f"study {study_name!r} was made with {key} {old} but this command gives {new}; "
                f"rerun with the same settings to resume it, or give --study NEW_NAME"
            )
        return None
