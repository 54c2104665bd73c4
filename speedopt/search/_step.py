"""One measurement of a stage after the trials, as the progress names it: a finals round, an ablation step, a
torch.compile round. Every such stage tells the view the same two things (:meth:`~speedopt.search.View.step_started`,
:meth:`~speedopt.search.View.step_finished`), so a new stage adds no hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from speedopt.knobs import Knobs
from speedopt.measure import TrialResult


@dataclass(frozen=True)
class Step:
    """What is measured and how the progress names it."""

    stage: Literal["finals", "ablation", "compile"]
    label: str  # "round 2/3: trial 5", "ablation cache none -> disk", "torch.compile round 1/3: eager"
    knobs: Knobs
    number: str = ""  # the live table's "#" cell (a finals round: "5 r2"), whose config cell then shows its knobs


Started = Callable[[Step], None]
Finished = Callable[[Step, TrialResult], None]
