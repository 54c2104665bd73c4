"""What runs a search's jobs: the trainer's processes by default, or whatever a caller substitutes.

Every job of a search goes through one :class:`Runner`: its trials, the finals' rounds, the ablation's steps,
the ceiling jobs, the memory fits' short trials (:meth:`Runner.trial`), the label caches built before the first
trial (:meth:`Runner.label_caches`), the quality probes and the ends' validation pass (:meth:`Runner.job`). The
default runs them as :mod:`speedopt.measure` does for ``speedopt search``. ``benchmarks/replay.py`` gives
:func:`~speedopt.search.run` a runner that answers from a measured table instead, so the loop it replays is the
shipped one: the sampler, the skips, the pruner, the ceiling rules, the memory-fit rule, the probe policy, the
finals and the ablation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from speedopt.measure import JobOutcome, LabelCaches, TrialProgress, TrialRequest, TrialResult, build_label_caches, run_job, run_trial

if TYPE_CHECKING:
    from speedopt.data import Dataset
    from speedopt.engines import EngineSpec
    from speedopt.measure import ProbeJob, ValidateJob

Progress = Callable[[TrialProgress], None]
Say = Callable[[str], None]


class Runner:
    """Runs a search's jobs in the trainer's own processes (:func:`~speedopt.measure.run_trial`,
    :func:`~speedopt.measure.run_job`); a subclass may answer them otherwise (a replay: from a measured table)."""

    def trial(
        self, request: TrialRequest, progress: Progress | None = None, on_wait: Say | None = None, owner: str = "speedopt trial",
        dataset: Dataset | None = None,
    ) -> TrialResult:
        """One speed job: a trial, a finals round, an ablation step, a ceiling job (``request.mode``) or a memory
        fit's short trial. ``progress`` gets each update (a measured step's running images/s feeds the pruner,
        which may raise ``optuna.TrialPruned`` out of it)."""
        return run_trial(request, progress=progress, on_wait=on_wait, owner=owner, dataset=dataset)

    def job(self, job: ProbeJob | ValidateJob, owner: str, progress: Progress | None = None, on_wait: Say | None = None) -> JobOutcome:
        """One other job: a quality probe, or the ends' validation pass."""
        return run_job(job, owner, progress, on_wait)

    def label_caches(
        self, yamls: Sequence[str], engine_spec: EngineSpec, images: int, owner: str,
        progress: Progress | None = None, on_wait: Say | None = None,
    ) -> LabelCaches:
        """The trainer's label caches of ``yamls``, built once per study before its first trial."""
        return build_label_caches(yamls, engine_spec, images, owner, progress=progress, on_wait=on_wait)
