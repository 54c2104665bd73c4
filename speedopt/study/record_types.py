"""The record types a study stores, which the search builds and the report reads.

The parts of the stored records (a finals' :class:`Repeat` and :class:`Drop`, an ablation's :class:`Change`
and :class:`Probe`, the :class:`CompileDecision` and its :class:`Payback`, the :class:`Ranking` and its :class:`RankMode`, a prepared :class:`DataCopy`, a knob's
:class:`Domain`, a :class:`WarmStart` and its reader :func:`warm_start`, the bill's stage names :data:`BillStage`) and the readers the search acts on
(:func:`baseline_trial`, :func:`measured_pruned`, :func:`retried_as`). The whole records (:class:`~speedopt.study.TrialRecord`,
:class:`~speedopt.study.Finals`, :class:`~speedopt.study.Ablation`, ...) are :mod:`speedopt.study`'s own surface.
"""

from speedopt.study._ablation import Change, Probe
from speedopt.study._bill import Stage as BillStage
from speedopt.study._compile import CompileDecision, Payback
from speedopt.study._copies import LOSSLESS, DataCopy
from speedopt.study._failed import retried_as
from speedopt.study._finals import Drop, Repeat
from speedopt.study._rank import Ranking, RankMode
from speedopt.study._record import baseline_trial, measured_pruned
from speedopt.study._source import warm_start
from speedopt.study._space import Domain
from speedopt.study._warmstart import WarmStart

__all__ = [
    "CompileDecision",
    "Payback",
    "Change",
    "Probe",
    "Repeat",
    "Drop",
    "Ranking",
    "RankMode",
    "DataCopy",
    "LOSSLESS",
    "Domain",
    "WarmStart",
    "warm_start",
    "baseline_trial",
    "measured_pruned",
    "retried_as",
    "BillStage",
]
