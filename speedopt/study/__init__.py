"""The stored model of a search: a study's storage, its protocol, its trials read back as typed records.

:func:`open_storage` and :func:`find_study` reach a study; :class:`StudyProtocol` is what it was made
with; :func:`records` and :func:`best_trial` read its trials as :class:`TrialRecord`; :func:`outcome`
summarises it and :func:`recommended_trial` is the one definition of the recommendation. The finals
(:class:`Finals`) and the ablation (:class:`Ablation`) are stored records here; :mod:`schema` names
every key a study stores, reads and writes them, and refuses a study stored in another layout. Running a
search (planning, the loop, the stop rules, measuring the ceilings, the finals and the ablation) is
:mod:`speedopt.search`; what it stores is here, with the storage-level steps it takes (claims, recovery), the bill
its :class:`Clock` adds to, and the warm-start sources it reads (:func:`warm_start`). Export and import move a
study between storages; notes are what optuna-dashboard shows.
"""

# Beside __all__, names the running search (speedopt.search) still reads and writes: the parts of the stored
# records and the storage-level steps of its loop. tests/test_imports.py lists them (KNOWN); none is new.
from speedopt.study import _schema as schema
from speedopt.study._ablation import Ablation
from speedopt.study._ablation import Change as Change
from speedopt.study._ablation import Probe as Probe
from speedopt.study._claim import Claim as Claim
from speedopt.study._claim import claimed as claimed
from speedopt.study._claim import is_claim
from speedopt.study._claim import worker_id as worker_id
from speedopt.study._clock import Clock
from speedopt.study._copies import LOSSLESS as LOSSLESS
from speedopt.study._copies import DataCopy as DataCopy
from speedopt.study._finals import Drop as Drop
from speedopt.study._finals import Finals
from speedopt.study._finals import Repeat as Repeat
from speedopt.study._note import save as save_note
from speedopt.study._note import write_finals_notes as write_finals_notes
from speedopt.study._note import write_note as write_note
from speedopt.study._outcome import SearchOutcome, list_studies, outcome, recommended_trial
from speedopt.study._protocol import StudyProtocol
from speedopt.study._rank import Ranking as Ranking
from speedopt.study._rank import RankMode as RankMode
from speedopt.study._record import TrialRecord, best_trial, finalists, records
from speedopt.study._record import baseline_trial as baseline_trial
from speedopt.study._record import measured_pruned as measured_pruned
from speedopt.study._recovery import awaited as awaited
from speedopt.study._recovery import recover_interrupted as recover_interrupted
from speedopt.study._recovery import recover_stale as recover_stale
from speedopt.study._recovery import retry_interrupted as retry_interrupted
from speedopt.study._recovery import say_interrupted as say_interrupted
from speedopt.study._schema import flat_attrs
from speedopt.study._source import warm_start as warm_start
from speedopt.study._space import Domain as Domain
from speedopt.study._space import Space
from speedopt.study._storage import Need, artifact_dir, find_study, open_storage, redact, storage_errors
from speedopt.study._storage import check_study_name as check_study_name
from speedopt.study._storage import study_names as study_names
from speedopt.study._transfer import export, import_study
from speedopt.study._warmstart import WarmStart as WarmStart

__all__ = [
    "open_storage",
    "find_study",
    "Need",
    "storage_errors",
    "redact",
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
    "save_note",
    "export",
    "import_study",
]
