"""Trials whose run ended early, read back: why each failed and which trial retried it (the search retries them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from speedopt.study._schema import FAILED_BECAUSE, ROLE

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

#: Why, when the trial could not say (failed by the heartbeat).
UNSAID = "its run ended without a result (process killed, interrupted, or cut off from the storage)"


def retried_as(trials: Iterable[FrozenTrial]) -> dict[int, int]:
    """Failed trial number -> the number of the trial that retried it."""
    out: dict[int, int] = {}
    for t in trials:
        history = t.system_attrs.get("retry_history") or []
        if history:
            out[int(history[-1])] = t.number
    return out


@dataclass(frozen=True)
class FailedTrial:
    """A trial whose run ended early (interrupted, killed, lost), and the trial that retried it."""

    number: int
    role: str | None
    params: dict[str, Any]
    why: str
    retried_as: int | None

    def text(self) -> str:
        """``trial 0 (baseline): interrupted (Ctrl-C); retried as trial 2``."""
        role = f" ({self.role})" if self.role else ""
        then = f"retried as trial {self.retried_as}" if self.retried_as is not None else "not retried"
        return f"trial {self.number}{role}: {self.why}; {then}"


def failed_trials(study: optuna.Study) -> tuple[FailedTrial, ...]:
    """Every failed trial of the study, why it failed and which trial retried it."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    retried = retried_as(trials)
    out = []
    for t in trials:
        if t.state != TrialState.FAIL:
            continue
        why = str(t.user_attrs.get(FAILED_BECAUSE) or UNSAID)
        out.append(FailedTrial(t.number, t.user_attrs.get(ROLE), dict(t.params), why, retried.get(t.number)))
    return tuple(out)
