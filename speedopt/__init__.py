"""speedopt: measure, don't guess, the fastest way to train YOLOv5 on this machine.

The Python API (the CLI calls exactly these): :func:`trial`, :func:`search`, :func:`worker`,
:func:`report`, :func:`best`, :func:`verify`. Importing speedopt imports no trainer, no torch and no Optuna: each is
imported where it is used.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from speedopt._api import best, ceilings, report, search, trial, verify, worker
    from speedopt.errors import UsageError
    from speedopt.knobs import Knobs
    from speedopt.measure import TrialResult
    from speedopt.reporting import Recommendation, Verification, Written
    from speedopt.search import SearchConfig, View
    from speedopt.status import Status
    from speedopt.study import SearchOutcome, TrialRecord

from speedopt.version import __version__

#: Where each public name lives: imported on first use (PEP 562), so that a job or a command that needs
#: one subpackage (``speedopt.measure`` in a trial's process, the CLI's ``--help``) does not import them all.
_HOMES = {
    **dict.fromkeys(("best", "ceilings", "report", "search", "trial", "verify", "worker"), "speedopt._api"),
    "UsageError": "speedopt.errors",
    "Knobs": "speedopt.knobs",
    "TrialResult": "speedopt.measure",
    **dict.fromkeys(("Recommendation", "Verification", "Written"), "speedopt.reporting"),
    **dict.fromkeys(("SearchConfig", "View"), "speedopt.search"),
    "Status": "speedopt.status",
    **dict.fromkeys(("SearchOutcome", "TrialRecord"), "speedopt.study"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'speedopt' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


class _Surface(types.ModuleType):
    """The package's module type: importing the subpackage :mod:`speedopt.search` must not bind the module
    over the function :func:`search` (Python sets a package's attribute to each submodule it imports)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Surface  # the documented way to customise a module's attribute setting


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
