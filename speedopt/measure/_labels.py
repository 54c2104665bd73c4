"""The trainer's label caches, built once per study: the labels jobs and the record a study keeps of them.

A trial trains on a leading subset of the train images; without a cache of the full splits the trainer
scans the subset's labels in every trial (minutes per trial on millions of images; under DDP the other
ranks time out while rank 0 scans). :func:`build_label_caches` runs one :class:`LabelsJob` per data.yaml
a study may train on, through the job runner (host lock, child process, timeout, status): the trainer's
own dataset code builds, or finds valid, the cache of each full split, exactly the file the user's real
run reuses. :class:`LabelCaches` is what the study stores (:func:`speedopt.study.schema.write_labels`) and hands each trial.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from speedopt.engines import EngineSpec, LabelCacheBuild, SplitLabels
from speedopt.measure._jobs import LabelsJob
from speedopt.measure._progress import Progress
from speedopt.measure._runner import run_job
from speedopt.offline import cache_dir

#: For the printed command when it launches several GPUs (DDP): the scan is rank 0's, before the others start.
MULTI_GPU_NOTE = (
    "a multi-GPU (DDP) run scans labels on rank 0 while the other ranks wait, and can time out on a large set: "
    "build the label cache first (one single-GPU start of the trainer, or `speedopt search`, which built it for "
    "this dataset); the run then finds it valid"
)


def labels_timeout_s(images: int) -> float:
    """Seconds before a labels job is killed: 10 minutes plus 10 ms per image (a scan at 100 images/s)."""
    return 600.0 + 0.01 * images


@dataclass(frozen=True)
class LabelCaches:
    """The label caches built for a study, one per data.yaml, and the builds that failed (yaml, why)."""

    builds: tuple[LabelCacheBuild, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()
    MULTI_GPU_NOTE: ClassVar[str] = MULTI_GPU_NOTE  # what the printed multi-GPU command is told about the scan

    @property
    def seconds(self) -> float:
        """Measured seconds of every build (the one-time label scan of the study's data)."""
        return sum(b.seconds for b in self.builds)

    @property
    def images(self) -> int:
        return sum(b.images for b in self.builds)

    def build_for(self, data_yaml: str) -> LabelCacheBuild | None:
        """The build of ``data_yaml``'s splits (None when it was not built, or failed)."""
        return next((b for b in self.builds if b.data_yaml == data_yaml), None)

    def for_data(self, data_yaml: str) -> tuple[SplitLabels, ...]:
        """The caches a trial on ``data_yaml`` may take its subset's labels from (empty: it scans)."""
        build = self.build_for(data_yaml)
        return build.splits if build else ()

    def summary(self) -> str:
        """One line for the progress view: what was built (or found valid), for how many images, how long."""
        parts = []
        if self.builds:
            reused = all(s.reused for b in self.builds for s in b.splits)
            done = "found valid" if reused else "built"
            parts.append(f"the trainer's label cache {done} once for {self.images} images: {self.seconds:.1f} s")
        parts += [line for b in self.builds if (line := self.dropped(b, len(self.builds) > 1))]
        parts += [f"label cache of {yaml} not built ({why}): trials scan their labels" for yaml, why in self.failures]
        return "; ".join(parts) or "no label cache built"

    @staticmethod
    def dropped(build: LabelCacheBuild, name: bool = False) -> str:
        """What the trainer's label check (its scan: 'ignoring corrupt image/label') drops from ``build``'s
        splits, in its own counts; "" when it drops nothing. ``name``: say which data.yaml."""
        hit = [s for s in build.splits if s.corrupt]
        if not hit:
            return ""
        counts = " and ".join(f"{s.corrupt} of {s.listed} {s.split}" for s in hit)
        train = next((s for s in build.splits if s.split == "train"), None)
        kept = f": it trains on {train.images} train images, the count trials and the projection use" if train else ""
        where = f" of {build.data_yaml}" if name else ""
        return f"the trainer's label check drops {counts} images{where} as corrupt ({hit[0].problem}){kept}"

    def to_attr(self) -> dict[str, Any]:
        """The study user attr: ``data`` {yaml: {split: {cache, images, seconds, reused, hash, version}}},
        totals, failures and the multi-GPU note (for the report and the printed command)."""
        return {
            "data": {b.data_yaml: {s.split: s.to_dict() for s in b.splits} for b in self.builds},
            "seconds": self.seconds,
            "images": self.images,
            "failed": dict(self.failures),
            "note": MULTI_GPU_NOTE,
        }

    @classmethod
    def from_attr(cls, attr: Any) -> LabelCaches:
        """Inverse of :meth:`to_attr`; an absent or unreadable attr is no cache (trials then scan)."""
        if not isinstance(attr, dict):
            return cls()
        builds = []
        for yaml, splits in (attr.get("data") or {}).items():
            if isinstance(splits, dict):
                builds.append(LabelCacheBuild(yaml, tuple(SplitLabels.from_dict({**s, "split": name}) for name, s in splits.items())))
        failed = attr.get("failed") or {}
        return cls(tuple(builds), tuple((str(k), str(v)) for k, v in failed.items()))


def build_label_caches(
    yamls: Sequence[str],
    engine_spec: EngineSpec,
    images: int,
    owner: str,
    progress: Progress | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> LabelCaches:
    """Run the labels job for each data.yaml (once each, in order); a failed build is recorded, not raised.

    ``images``: the train and val images of the largest of them, which sets the job's timeout.
    """
    builds, failures = [], []
    for yaml in dict.fromkeys(yamls):
        job = LabelsJob(**engine_spec.record(), data_yaml=yaml, timeout_s=labels_timeout_s(images), cache_dir=str(cache_dir()))
        outcome = run_job(job, owner, progress, on_wait)
        build = outcome.labels()
        if build is None:
            failures.append((yaml, f"{outcome.status.value}: {outcome.message}"))
        else:
            builds.append(build)
    return LabelCaches(tuple(builds), tuple(failures))
