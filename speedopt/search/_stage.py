"""A search is a list of stages over one context (issue 55): the ranking, the trials, the finals, the compile decision,
the ablation and the ends.

A :class:`Stage` names itself (its name is the bill's), says whether only the study's creator runs it, whether it
runs only once the study holds its target, and under which step it is claimed in the storage (a decision taken once
for the study: the first run to get there owns it, another waits, then reads what it stored). :func:`run_stages`
(in :mod:`speedopt.search._run`) walks the list; a new stage is its own module, its record, its report section, and a
line in that list. :class:`SearchContext` carries what every stage reads: the plan, the study and its storage, the
view, the bill's clock, the job runner, the inputs of every trial, the accuracy judge and Ctrl-C's bookkeeping.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from speedopt.defaults import GRACE_S
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.quality import Judge
from speedopt.search._claim import Claim
from speedopt.search._interrupt import Interrupts
from speedopt.search._objective import Inputs, measure, request_for
from speedopt.search._plan import SearchPlan
from speedopt.search._view import View
from speedopt.study import Clock

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage

    from speedopt.study.record_types import BillStage


@dataclass(frozen=True)
class SearchContext:
    """What every stage of one search reads."""

    plan: SearchPlan
    study: optuna.Study
    storage: BaseStorage
    view: View
    clock: Clock
    inputs: Inputs
    judge: Judge
    interrupts: Interrupts

    def measure(self, claim: Claim | None = None) -> Callable[[Knobs], TrialResult]:
        """One measurement of the finals, the compile decision or the ablation (by the owner of ``claim``: each renews
        it first)."""

        def one(knobs: Knobs) -> TrialResult:
            if claim is not None:
                claim.beat()
            return measure(self.plan, request_for(self.plan, knobs, self.inputs), self.view, self.inputs)

        return one

    @property
    def longest_s(self) -> float:
        """The most one trial may run, probes included (three: the baseline's two seeds and its own), plus the grace:
        how long a claim's owner on another host may be silent before it counts as gone."""
        p = self.plan.protocol
        return p.trial_timeout_s + (3 * p.quality.timeout_s if p.quality.probing else 0.0) + 2 * GRACE_S


class Stage(abc.ABC):
    """One stage of a search; the class flags say who runs it and how, :meth:`run` does it."""

    name: ClassVar[BillStage]  # the bill's name for its time
    creator_only: ClassVar[bool] = True  # only the study's creator (``speedopt search``) runs it; a worker does not
    after_trials: ClassVar[bool] = True  # only once the study holds its target (or a stop rule ended the trials)
    claim: ClassVar[str | None] = None  # claimed in the storage under this step for the whole stage

    def wanted(self, ctx: SearchContext) -> bool:
        """Whether this search runs the stage at all (default: always)."""
        return True

    @abc.abstractmethod
    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        """Do the stage; ``claim`` is the storage claim when the stage is claimed, else None."""
