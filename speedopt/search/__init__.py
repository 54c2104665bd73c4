"""Running a search: plan it, run the Optuna loop of short real trials, then the finals and the ablation.

:func:`plan` turns a :class:`SearchConfig` into a :class:`SearchPlan` (every input checked, the study's
protocol fixed, no storage touched); :func:`run` opens the study and runs its stages, telling a
:class:`View` what happens; every job they run goes through a :class:`Runner` (the trainer's processes by
default; ``benchmarks/replay.py`` substitutes a measured table). The space (:func:`default_space`, ``--space``
files, ``--fix``, the baseline), the data knob's copies, memory prediction, the ceilings (measured, stored, read
back: :func:`ceilings_of_config`), the stop rules (the budget, the skip, the pruner, stop at the ceiling, with
what bounded the search and the levers left: :func:`headroom_of`), the
finals and the ablation live here, with the steps the running search takes on the storage: claims (a decision
taken by one process only) and the recovery of trials that ended early (interrupted, killed, stale). What a
search stores and how it is read back (the stored model) is :mod:`speedopt.study`; the record types the search
builds are :mod:`speedopt.study.record_types`.
"""

from speedopt.search._ceilings import of_config as ceilings_of_config
from speedopt.search._config import SearchConfig
from speedopt.search._copies import find_copies, make_copies
from speedopt.search._ends import validation_time
from speedopt.search._headroom import headroom_of
from speedopt.search._objective import suggest
from speedopt.search._plan import SearchPlan, default_study_name, plan, plan_for_worker
from speedopt.search._rank import MODES as RANK_MODES
from speedopt.search._run import run
from speedopt.search._runner import Runner
from speedopt.search._space import default_space, load_file, parse_baseline, parse_fix
from speedopt.search._step import Step
from speedopt.search._view import QuietView, View

__all__ = [
    "SearchConfig",
    "SearchPlan",
    "plan",
    "plan_for_worker",
    "default_study_name",
    "run",
    "Runner",
    "View",
    "QuietView",
    "Step",
    "RANK_MODES",
    "default_space",
    "load_file",
    "parse_fix",
    "parse_baseline",
    "find_copies",
    "make_copies",
    "ceilings_of_config",
    "headroom_of",
    "suggest",
    "validation_time",
]
