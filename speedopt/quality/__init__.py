"""Quality: the mAP-loss constraint that keeps a faster config from costing accuracy.

:class:`Policy` says how accuracy is judged; :class:`Judge` probes signatures lazily through the
:class:`ProbeCache` in the storage and returns a :class:`Verdict` per trial; :func:`unchecked_knobs`
names the accuracy knobs a config changed without any check (quality off), so no claim hides them.
"""

from speedopt.quality._budget import LOW_MAP, ProbeBudget
from speedopt.quality._cache import CACHE_STUDY, ProbeCache, ProbeResult, cache_entries, cache_key, merge_cache
from speedopt.quality._judge import Judge, Reference
from speedopt.quality._policy import (
    ACCURACY_KNOBS,
    Feasibility,
    MaxLoss,
    Policy,
    QualityMode,
    check_weights,
    make_policy,
    parse_max_loss,
    signature,
    signature_text,
    unchecked_knobs,
    unchecked_text,
)
from speedopt.quality._target import ProbeTarget
from speedopt.quality._verdict import Verdict, not_measured

__all__ = [
    "ACCURACY_KNOBS",
    "CACHE_STUDY",
    "LOW_MAP",
    "Feasibility",
    "Judge",
    "MaxLoss",
    "Policy",
    "ProbeBudget",
    "ProbeCache",
    "ProbeResult",
    "ProbeTarget",
    "QualityMode",
    "Reference",
    "Verdict",
    "cache_entries",
    "cache_key",
    "merge_cache",
    "check_weights",
    "make_policy",
    "not_measured",
    "parse_max_loss",
    "signature",
    "signature_text",
    "unchecked_knobs",
    "unchecked_text",
]
