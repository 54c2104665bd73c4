"""The progress contract: what a running search tells whoever watches it (the CLI's live view, the Python API).

Every hook is optional; :class:`QuietView` hears nothing. The search calls them in order: :meth:`View.start`,
then per trial :meth:`~View.trial_started`, :meth:`~View.trial_progress` and :meth:`~View.trial_finished`,
then the finals' and the ablation's hooks, and :meth:`~View.stop` at the end, however it ends.
:meth:`~View.note` carries every other line the search has to say, at any point.
"""

from __future__ import annotations

import abc

from speedopt.knobs import Knobs
from speedopt.measure import TrialProgress, TrialResult
from speedopt.quality import Verdict
from speedopt.search._plan import SearchPlan
from speedopt.search._step import Step
from speedopt.study import SearchOutcome


class View(abc.ABC):  # noqa: B024 - every hook is optional
    """What a search reports while it runs; every hook does nothing unless a view overrides it."""

    def start(self, plan: SearchPlan, so_far: SearchOutcome, notes: list[str]) -> None:
        """The study is open: its target, what it already holds, notes on the plan."""

    def stage_started(self, name: str) -> None:
        """A stage of the search begins (``ranking``, ``trials``, ``finals``, ``compile``, ``ablation``, ``ends``: the
        names of :data:`speedopt.search._run.STAGES`, as the bill names their time)."""

    def stage_finished(self, name: str) -> None:
        """A stage of the search ended (normally or not)."""

    def trial_started(self, number: int, knobs: Knobs) -> None:
        """A trial begins measuring ``knobs``."""

    def trial_progress(self, update: TrialProgress) -> None:
        """A running trial, probe or labels job moved on (its phase, and ``done`` of ``of`` where known)."""

    def trial_finished(self, number: int, result: TrialResult, baseline: bool, verdict: Verdict) -> None:
        """A trial ended, with its accuracy verdict."""

    def trial_pruned(self, number: int, why: str) -> None:
        """The pruner stopped a trial part-way (it ran, and counts toward ``--trials``); by default a :meth:`note`."""
        self.note(f"trial {number}: {why}")

    def note(self, message: str) -> None:
        """One line on what the search is doing or waiting for: the host lock held by another process, the label
        caches or a memory fit being built, ceiling jobs, other workers' trials, why a trial was pruned."""

    def price(self, message: str) -> None:
        """What judging a candidate's accuracy will cost and could save, said before its probes run: a line that
        stays (the user weighs it), unlike a passing note. By default a note."""
        self.note(message)

    def decided(self, message: str) -> None:
        """A decision the search took after the trials (torch.compile's), in a line that stays. By default a :meth:`price`."""
        self.price(message)

    def finals_started(self, finals: tuple[int, ...], repeats: int) -> None:
        """The finals begin: these trials' configs (the baseline's first) in ``repeats`` interleaved rounds."""

    def ablation_started(self, changes: tuple[str, ...], repeats: int) -> None:
        """The ablation begins: these changes (``workers 8 -> 2``) ordered, then the path in ``repeats`` rounds."""

    def step_started(self, step: Step) -> None:
        """A measurement of a stage after the trials begins: a finals round (a trial's config again), an ablation
        step (an ordering candidate, or a round's config on the path), a torch.compile round (eager or a mode)."""

    def step_finished(self, step: Step, result: TrialResult) -> None:
        """That measurement ended."""

    def stop(self) -> None:
        """The search is over (normally or not)."""


class QuietView(View):
    """Reports nothing (the Python API's default)."""
