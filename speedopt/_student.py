"""Student's t quantiles, the one place speedopt computes them: the step clock's two-sided interval of a mean step
time (:mod:`speedopt.measure`) and the accuracy rule's one-sided bound on a mean paired loss (:mod:`speedopt.quality`).

``scipy.special.stdtrit`` is ``scipy.stats.t.ppf`` without scipy.stats' import (about 1.9 s here, against 0.6 s);
imported when first called, never at import time.
"""

from __future__ import annotations

from collections.abc import Sequence


def t_quantiles(dfs: Sequence[int], p: float) -> list[float]:
    """The ``p`` quantile of Student's t for each degrees of freedom in ``dfs`` (one scipy call for them all)."""
    from scipy.special import stdtrit

    return [float(q) for q in stdtrit(list(dfs), p)]
