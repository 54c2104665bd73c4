"""The stored model of a search: a study's storage, its schema, its records and what they add up to.

study/ is what a search leaves in the storage and how it is read back; it imports nothing from
:mod:`speedopt.search`. :func:`open_storage` and :func:`find_study` reach a study; :class:`StudyProtocol` is
what it was made with; :func:`records` and :func:`best_trial` read its trials as :class:`TrialRecord`;
:func:`outcome` summarises it and :func:`recommended_trial` is the one definition of the recommendation. The
finals (:class:`Finals`) and the ablation (:class:`Ablation`) are stored records, with the bill their
:class:`Clock` adds to; :mod:`schema` names every key a study stores, reads and writes them, and refuses a study
stored in another layout. Export and import move a study between storages.

Three public modules beside this surface: :mod:`speedopt.study.record_types` (the record types a study stores, which
the search builds and the report reads), :mod:`speedopt.study.names` (the studies a storage holds, and
speedopt's own: claims) and :mod:`speedopt.study.notes` (the notes optuna-dashboard shows).
"""

from speedopt.study import _schema as schema
from speedopt.study._ablation import Ablation
from speedopt.study._clock import Clock
from speedopt.study._finals import Finals
from speedopt.study._outcome import SearchOutcome, list_studies, outcome, recommended_trial
from speedopt.study._protocol import StudyProtocol
from speedopt.study._record import TrialRecord, best_trial, finalists, records
from speedopt.study._schema import flat_attrs
from speedopt.study._space import Space
from speedopt.study._storage import Need, artifact_dir, find_study, open_storage, quiet_optuna, redact, storage_errors
from speedopt.study._transfer import export, import_study
from speedopt.study.names import is_claim

__all__ = [
    "open_storage",
    "find_study",
    "Need",
    "storage_errors",
    "redact",
    "quiet_optuna",
    "artifact_dir",
    "is_claim",
    "StudyProtocol",
    "Space",
    "TrialRecord",
    "records",
    "best_trial",
    "finalists",
    "flat_attrs",
    "SearchOutcome",
    "outcome",
    "recommended_trial",
    "list_studies",
    "Finals",
    "Ablation",
    "Clock",
    "schema",
    "export",
    "import_study",
]
