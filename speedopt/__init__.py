"""speedopt: measure, don't guess, the fastest way to train YOLOv5 on this machine.

The Python API (the CLI calls exactly these): :func:`trial`, :func:`search`, :func:`worker`,
:func:`report`, :func:`best`, :func:`verify`. Importing speedopt imports no trainer, no torch and no Optuna: each is
imported where it is used.
"""

from speedopt._api import best, ceilings, report, search, trial, verify, worker
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.reporting import Recommendation, Verification, Written
from speedopt.search import SearchConfig, View
from speedopt.status import Status
from speedopt.study import SearchOutcome, TrialRecord
from speedopt.version import __version__

__all__ = [
    "Knobs",
    "Recommendation",
    "SearchConfig",
    "SearchOutcome",
    "Status",
    "TrialRecord",
    "TrialResult",
    "UsageError",
    "Verification",
    "View",
    "Written",
    "__version__",
    "best",
    "ceilings",
    "report",
    "search",
    "trial",
    "verify",
    "worker",
]
