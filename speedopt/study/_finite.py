"""Numbers a study stores are finite or missing: a NaN or an infinity is read as "not measured", never used.

Python's JSON (so Optuna's storages) writes ``NaN`` and ``Infinity`` and reads them back as floats. A hostile
or damaged export may hold them where a measurement belongs; one would reach the report's arithmetic
(``round(nan)`` raises), the ranking (a NaN sorts anywhere) and ``best --format json`` (which is then no longer
JSON). :func:`finite` is how every reader sees stored values; :func:`nonfinite_refusal` is why an import
refuses such a study before it writes anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from speedopt.knobs import shown

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def finite(value: Any) -> Any:
    """``value`` with every non-finite float in it (nested in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _where(value: Any, path: str = "") -> tuple[str, float] | None:
    """The first non-finite float in ``value`` (its path inside, and the number), None when there is none."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    for key, inner in items:
        found = _where(inner, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _named(owner: str, attrs: Mapping[str, Any]) -> str | None:
    found = _where(attrs)
    if found is None:
        return None
    path, number = found
    return f"{owner} {shown(path, 60)} is {number}, not a finite number"


def nonfinite_refusal(study: optuna.Study, trials: Iterable[FrozenTrial], cache: Mapping[str, Any]) -> str | None:
    """Where ``study``, one of its ``trials`` (user attrs, values) or its probe-cache entries (``cache``) stores a
    NaN or an infinity, as part of one line; None when every number is finite."""
    for trial in trials:
        why = _named(f"trial {trial.number}'s user attr", trial.user_attrs)
        why = why or _named(f"trial {trial.number}'s objective value", {"value": trial.values or []})
        if why is not None:
            return why
    return _named("its user attr", study.user_attrs) or _named("its probe-cache entry", cache)
