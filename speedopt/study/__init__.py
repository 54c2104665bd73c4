"""The study: plan a search, run the Optuna loop, read its trials back as typed records.

:func:`plan` turns a :class:`SearchConfig` into a :class:`SearchPlan` (its :class:`StudyProtocol` is
what the storage keeps); :func:`run` optimises; :func:`outcome` and :func:`best_trial` read the
result. Storage, warm start from another machine's study, and export/import live here too.
"""

from speedopt.study._ablation import Ablation
from speedopt.study._ablation import stored as stored_ablation
from speedopt.study._ceilings import FOR_ATTR as CEILINGS_FOR_ATTR
from speedopt.study._ceilings import of_config as ceilings_of_config
from speedopt.study._config import SearchConfig
from speedopt.study._copies import DataCopy, find_copies, make_copies
from speedopt.study._finals import Finals, Repeat, finalists
from speedopt.study._note import save as save_note
from speedopt.study._optimize import QuietView, View, best_feasible, run, suggest
from speedopt.study._outcome import ProbedSignature, SearchOutcome, StudySummary, list_studies, outcome, recommended_trial
from speedopt.study._plan import SearchPlan, default_study_name, plan, plan_for_worker
from speedopt.study._protocol import OBJECTIVE, StudyProtocol
from speedopt.study._rank import MODES as RANK_MODES
from speedopt.study._rank import Ranking
from speedopt.study._rank import stored_attr as stored_ranking
from speedopt.study._record import TrialRecord, baseline_trial, best_trial, flat_attrs, ranked, records
from speedopt.study._recovery import FailedTrial, recover_interrupted, worker_id
from speedopt.study._space import Domain, Space, default_space, load_file, parse_baseline, parse_fix
from speedopt.study._storage import (
    Need,
    artifact_dir,
    check_study_name,
    find_study,
    open_storage,
    redact,
    retry_callback,
    storage_errors,
    study_names,
    url_for,
)
from speedopt.study._transfer import export, import_study, split_source
from speedopt.study._warmstart import WarmConfig, WarmStart, adapt

__all__ = [
    "save_note",
    "flat_attrs",
    "CEILINGS_FOR_ATTR",
    "ceilings_of_config",
    "RANK_MODES",
    "Ranking",
    "stored_ranking",
    "OBJECTIVE",
    "Ablation",
    "DataCopy",
    "Domain",
    "FailedTrial",
    "Finals",
    "Need",
    "ProbedSignature",
    "QuietView",
    "Repeat",
    "SearchConfig",
    "SearchOutcome",
    "SearchPlan",
    "Space",
    "StudyProtocol",
    "StudySummary",
    "TrialRecord",
    "View",
    "WarmConfig",
    "WarmStart",
    "adapt",
    "artifact_dir",
    "baseline_trial",
    "best_feasible",
    "best_trial",
    "check_study_name",
    "default_space",
    "default_study_name",
    "export",
    "find_copies",
    "finalists",
    "find_study",
    "import_study",
    "list_studies",
    "load_file",
    "make_copies",
    "open_storage",
    "outcome",
    "parse_baseline",
    "parse_fix",
    "plan",
    "plan_for_worker",
    "ranked",
    "recommended_trial",
    "records",
    "recover_interrupted",
    "redact",
    "retry_callback",
    "run",
    "split_source",
    "stored_ablation",
    "storage_errors",
    "study_names",
    "suggest",
    "url_for",
    "worker_id",
]
