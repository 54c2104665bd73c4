"""What a study stores: every key of a speedopt study's Optuna user attrs and of its trials', in one place.

A study is written in one layout, :data:`SCHEMA_VERSION`, stored once in the study attr :data:`SCHEMA` when
the search creates it (:func:`write_protocol`). Every command that opens a study (a search resuming or
joining it, a worker, report, best, verify, export, import, a warm start's source) asks :func:`check`
first, which refuses a study stored in another layout (a newer one, or none) in one line. Nothing here
reads an older layout: a change of layout is a new version.

Study attrs: :data:`SCHEMA`; the protocol, one attr per :class:`~speedopt.study.StudyProtocol` field, under
the field's name (the ones read on their own: :data:`DATA`, :data:`DATASET`, :data:`MACHINE`,
:data:`SPACE`, :data:`TRIALS`, :data:`ABLATE`); the records a search fills (:data:`LABELS`,
:data:`CEILINGS`, :data:`CEILINGS_FOR`, :data:`RANKING`, :data:`MEMORY_FITS`, :data:`FINALS`,
:data:`FINALS_PREVIOUS`, :data:`ABLATION`, :data:`COMPILE`, :data:`STOPPED`) and those a report and verify fill
(:data:`VAL_TIME` + a digest, :data:`REPORT_ARTIFACTS`, :data:`VERIFY`).

Trial attrs: the planned ones a trial is enqueued with (:data:`PLANNED`: :data:`ROLE`, :data:`SOURCE_TRIAL`;
and :data:`BOUND`), what its run writes (:data:`WORKER`, :data:`PHASE`), its measurement and verdict
(:data:`SHOWN` under their own names, the rest in the JSON attrs :data:`MEASUREMENT` and :data:`ACCURACY`),
and why it did not finish (:data:`PRUNED`, :data:`PRUNED_CONFIG`, :data:`DUPLICATE_OF`,
:data:`FAILED_BECAUSE`). Trial system attrs: its constraints, named and as a list (:data:`CONSTRAINTS`,
:func:`write_constraints`, :func:`constraint_list`, :func:`with_constraint_lists`; :mod:`speedopt.study._constraints`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from speedopt.errors import UsageError
from speedopt.knobs import shown
from speedopt.measure import Ceiling, LabelCaches
from speedopt.study._ablation import Ablation
from speedopt.study._bill import Bill
from speedopt.study._compile import CompileDecision
from speedopt.study._constraints import CONSTRAINTS as CONSTRAINTS
from speedopt.study._constraints import constraint_list as constraint_list
from speedopt.study._constraints import with_constraint_lists as with_constraint_lists
from speedopt.study._constraints import write_constraints as write_constraints
from speedopt.study._finals import Finals
from speedopt.study._finite import finite
from speedopt.study._protocol import StudyProtocol
from speedopt.study._rank import Ranking

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

SCHEMA_VERSION = 1
SCHEMA = "schema"  # study attr: the SCHEMA_VERSION the study was written with

# -- study attrs ------------------------------------------------------------------------------------------
# The protocol: StudyProtocol.to_attrs, one attr per field under its name; these are read on their own.
DATA = "data"  # the data.yaml the study trains on
DATASET = "dataset"  # DatasetFingerprint.to_dict (its "id" names the probe cache's entries)
YOLOV5_DIR = "yolov5_dir"  # the classic engine's checkout: code, so never taken from an import (speedopt.study._transfer)
IMPORTED_YOLOV5_DIR = "imported_yolov5_dir"  # the checkout an imported study named where it was made (never run)
MACHINE = "machine"  # MachineFingerprint.to_dict (its "key": what a worker's machine must match)
SPACE = "space"  # Space.to_dict (a search joining the study waits until its creator has stored it)
TRIALS = "trials"  # the target of complete trials (a resumed search may raise it)
ABLATE = "ablate"  # whether the last run measured the ablation
# Records a search fills.
LABELS = "label_cache"  # LabelCaches.to_attr: the trainer's label caches, built once before the first trial
CEILINGS = "ceilings"  # {"data|<key>" or "compute|<key>": Ceiling.to_dict()}
CEILINGS_FOR = "ceilings_for"  # {"baseline": trial number, "recommended": trial number}: the report's ceilings
RANKING = "ceiling_ranking"  # Ranking.to_dict (the protocol's ``ceiling_rank`` is the mode)
MEMORY_FITS = "memory_fits"  # {memory key: MemoryFit.to_dict()} (speedopt.search's memory model)
FINALS = "finals"  # Finals.to_attr
BILL = "bill"  # Bill.to_attr: wall seconds per stage, summed over runs and workers
FINALS_PREVIOUS = "finals_previous"  # [Finals.to_attr]: earlier finals of other finalists (the study grew)
ABLATION = "ablation"  # Ablation.to_attr
COMPILE = "compile_decision"  # CompileDecision.to_attr: the recommendation measured eager and compiled
STOPPED = "stopped"  # why the search stopped before its target (None: it did not, or a resume samples again)
# Records a report and verify fill.
VAL_TIME = "val_time:"  # + a digest of the validation's inputs: {status, val_s, val_images, save_s}
REPORT_ARTIFACTS = "report_artifacts"  # {figure file name: artifact id}
#: An artifact id as Optuna and optuna-dashboard make one (a UUID), the only form the dashboard serves. An id is
#: a file name in the artifact store: any other text (``../../x``) would name a file outside it.
ARTIFACT_ID = re.compile(r"[0-9A-Fa-f-]{1,64}")
_NO_ID = "which names no file inside an artifact store (an Optuna artifact id is hex digits and dashes)"
#: System attrs that name an artifact: Optuna's ``artifacts:<id>`` (study and trial), optuna-dashboard's
#: ``dashboard:artifacts:<trial>:<id>``.
_ARTIFACT_ATTRS = (re.compile(r"artifacts:(?P<id>.*)", re.S), re.compile(r"dashboard:artifacts:\d+:(?P<id>.*)", re.S))
VERIFY = "verify"  # Verification.to_dict: the last verification

# -- trial attrs ------------------------------------------------------------------------------------------
ROLE = "role"  # "baseline", "prepared" (the baseline on the prepared copy), "warm-start", "ceiling-rank"; absent: sampled
SOURCE_TRIAL = "source_trial"  # warm start: the source study's trial
BOUND = "bound"  # ceiling-rank: the bound its ceilings gave it
PLANNED = (ROLE, SOURCE_TRIAL)  # what a retried trial keeps (the rest is what the failed run wrote)
WORKER = "worker"  # {host, pid, started}: the process that runs it
PHASE = "phase"  # the job's phase while it runs, "accuracy" while probed, then "done"
STATUS = "status"
IMAGES_PER_S = "images_per_s"
DATA_WAIT = "data_wait_fraction"
CONFIG = "config"  # the knobs as run
FEASIBLE = "feasible"  # true, false or "unknown"
MAP_LOSS = "map_loss"
SHOWN = (STATUS, IMAGES_PER_S, DATA_WAIT, CONFIG, FEASIBLE, MAP_LOSS)  # under their own names (the dashboard lists them)
MEASUREMENT = "measurement"  # the rest of the trial's TrialResult.to_dict, one JSON attr
ACCURACY = "accuracy"  # the rest of its accuracy verdict (Verdict.attrs)
PRUNED = "pruned"  # why the pruner, or the skip, stopped it
PRUNED_CONFIG = "pruned_config"  # the knobs (as asked) of a trial the pruner stopped
DUPLICATE_OF = "duplicate_of"  # the earlier trial that measured the same config
FAILED_BECAUSE = "failed_because"  # why it failed, written before its state becomes FAIL


# -- the version ------------------------------------------------------------------------------------------


def refusal(study: optuna.Study) -> str | None:
    """Why this speedopt does not read ``study`` (its schema version is newer, unknown, or missing), or None."""
    version = study.user_attrs.get(SCHEMA)
    name, rerun = study.study_name, "re-run the search to make it again (speedopt search --study NEW_NAME)"
    if version is None:
        return (
            f"study {name!r} has no speedopt schema version (this speedopt reads schema {SCHEMA_VERSION}): it was not "
            f"made by speedopt search, or by an older speedopt; {rerun}"
        )
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return f"study {name!r} has an unknown schema version {version!r} (this speedopt reads schema {SCHEMA_VERSION}); {rerun}"
    if version > SCHEMA_VERSION:
        return (
            f"study {name!r} was stored with schema version {version}, newer than this speedopt reads "
            f"(schema {SCHEMA_VERSION}); upgrade speedopt (pip install -U speedopt) to open it"
        )
    if version < SCHEMA_VERSION:
        return f"study {name!r} was stored with schema version {version}, older than this speedopt reads (schema {SCHEMA_VERSION}); {rerun}"
    return None


def check(study: optuna.Study) -> None:
    """Refuse (UsageError, one line naming the version and the fix) a study this speedopt does not read."""
    why = refusal(study)
    if why is not None:
        raise UsageError(why)


# -- study records ----------------------------------------------------------------------------------------


def write_protocol(study: optuna.Study, protocol: StudyProtocol) -> None:
    """A new study's first attrs: the schema version, then the protocol (one attr per field)."""
    study.set_user_attr(SCHEMA, SCHEMA_VERSION)
    for key, value in protocol.to_attrs().items():
        study.set_user_attr(key, value)


def read_protocol(study: optuna.Study) -> StudyProtocol:
    """What the study was made with; UsageError for a study speedopt search did not make."""
    return StudyProtocol.from_attrs(study.user_attrs, study.study_name)


def read_labels(study: optuna.Study) -> LabelCaches | None:
    """The study's label caches (None before they were built: its trials then scan their labels)."""
    stored = study.user_attrs.get(LABELS)
    return None if stored is None else LabelCaches.from_attr(stored)


def write_labels(study: optuna.Study, caches: LabelCaches) -> None:
    study.set_user_attr(LABELS, caches.to_attr())


def read_ceilings(study: optuna.Study) -> dict[str, Ceiling]:
    """The ceilings the study holds, by ``kind|key`` (none before the first is measured)."""
    stored = finite(study.user_attrs.get(CEILINGS) or {})
    return {name: Ceiling.from_dict(data) for name, data in stored.items()}


def write_ceiling(study: optuna.Study, name: str, ceiling: Ceiling) -> None:
    """Add one ceiling (``kind|key``) to the study's, at once (a worker or a resume finds it)."""
    stored = dict(study.user_attrs.get(CEILINGS) or {})
    study.set_user_attr(CEILINGS, {**stored, name: ceiling.to_dict()})


def read_ceilings_for(study: optuna.Study) -> dict[str, int | None]:
    """Which trials the report shows ceilings for: ``baseline`` and ``recommended`` (empty before the finals)."""
    return dict(study.user_attrs.get(CEILINGS_FOR) or {})


def write_ceilings_for(study: optuna.Study, baseline: int | None, recommended: int | None) -> None:
    study.set_user_attr(CEILINGS_FOR, {"baseline": baseline, "recommended": recommended})


def read_ranking(study: optuna.Study) -> Ranking | None:
    """How the space was ranked by its ceilings (None before it was, or when it never is)."""
    stored = finite(study.user_attrs.get(RANKING))
    return None if stored is None else Ranking.from_dict(stored)


def write_ranking(study: optuna.Study, ranking: Ranking) -> None:
    study.set_user_attr(RANKING, ranking.to_dict())


def read_memory_fits(study: optuna.Study) -> dict[str, dict[str, Any]]:
    """The memory fits the study holds (``MemoryFit.to_dict`` by memory key; speedopt.search reads them)."""
    return dict(finite(study.user_attrs.get(MEMORY_FITS) or {}))


def write_memory_fits(study: optuna.Study, fits: Mapping[str, Mapping[str, Any]]) -> None:
    study.set_user_attr(MEMORY_FITS, {key: dict(fit) for key, fit in fits.items()})


def read_bill(study: optuna.Study) -> Bill:
    """What the study's searches spent so far, by stage (empty before any)."""
    return Bill.from_attr(finite(study.user_attrs.get(BILL)))


def add_to_bill(study: optuna.Study, seconds: dict[str, float], waited_s: float = 0.0) -> Bill:
    """Add this process's seconds per stage, and its wait for the host lock, to the study's bill (read, add, write:
    workers add up)."""
    bill = read_bill(study).plus(seconds, waited_s)
    study.set_user_attr(BILL, bill.to_attr())
    return bill


def read_finals(study: optuna.Study) -> Finals | None:
    """The finals stored in the study (None before any)."""
    stored = finite(study.user_attrs.get(FINALS))
    return None if stored is None else Finals.from_attr(stored)


def write_finals(study: optuna.Study, finals: Finals) -> None:
    """Store ``finals`` (after each measurement: an interrupted finals round resumes)."""
    study.set_user_attr(FINALS, finals.to_attr())


def set_aside_finals(study: optuna.Study, finals: Finals) -> None:
    """Keep earlier finals of other finalists (the study grew) beside the new ones."""
    study.set_user_attr(FINALS_PREVIOUS, [*study.user_attrs.get(FINALS_PREVIOUS, []), finals.to_attr()])


def read_ablation(study: optuna.Study) -> Ablation | None:
    """The ablation stored in the study (None before any)."""
    stored = finite(study.user_attrs.get(ABLATION))
    return None if stored is None else Ablation.from_attr(stored)


def write_ablation(study: optuna.Study, ablation: Ablation) -> None:
    """Store ``ablation`` (after each measurement: an interrupted ablation resumes)."""
    study.set_user_attr(ABLATION, ablation.to_attr())


def read_compile(study: optuna.Study) -> CompileDecision | None:
    """The compile decision stored in the study (None before any)."""
    stored = finite(study.user_attrs.get(COMPILE))
    return None if stored is None else CompileDecision.from_attr(stored)


def write_compile(study: optuna.Study, decision: CompileDecision) -> None:
    """Store ``decision`` (after each measurement: an interrupted decision resumes)."""
    study.set_user_attr(COMPILE, decision.to_attr())


def read_stopped(study: optuna.Study) -> str | None:
    """Why the search stopped before its target (None: it did not)."""
    stopped = study.user_attrs.get(STOPPED)
    return None if stopped is None else str(stopped)


def write_stopped(study: optuna.Study, why: str | None) -> None:
    """Keep why the search stopped (None: a resumed search samples again)."""
    study.set_user_attr(STOPPED, why)


def read_val_time(study: optuna.Study, digest: str) -> dict[str, Any] | None:
    """The validation pass timed for the inputs ``digest`` names (None: not timed yet, or stored without a number)."""
    stored = finite(study.user_attrs.get(VAL_TIME + digest))
    return dict(stored) if isinstance(stored, dict) and isinstance(stored.get("val_s"), int | float) else None


def write_val_time(study: optuna.Study, digest: str, timed: Mapping[str, Any]) -> None:
    study.set_user_attr(VAL_TIME + digest, dict(timed))


def read_artifacts(study: optuna.Study) -> dict[str, str]:
    """The report's figures uploaded as the study's artifacts: artifact id by file name.

    UsageError, one line, for an id that is none (:data:`ARTIFACT_ID`): a storage another tool wrote may
    hold any text there, and the report removes the file an id names before it uploads a figure again.
    """
    stored = study.user_attrs.get(REPORT_ARTIFACTS) or {}
    why = _figure_ids_refusal(stored)
    if why is not None:
        raise UsageError(
            f"study {study.study_name!r}: {why}; another tool wrote it: clear it (study.set_user_attr("
            f"{REPORT_ARTIFACTS!r}, {{}}) in Optuna) and run the command again"
        )
    return dict(stored)


def write_artifacts(study: optuna.Study, ids: Mapping[str, str]) -> None:
    study.set_user_attr(REPORT_ARTIFACTS, dict(ids))


def _figure_ids_refusal(stored: Any) -> str | None:
    where = f"its user attr {REPORT_ARTIFACTS}"
    if not isinstance(stored, dict):
        return f"{where} is {shown(stored)}, not a map of figure to artifact id"
    bad = [i for i in stored.values() if not (isinstance(i, str) and ARTIFACT_ID.fullmatch(i))]
    return f"{where} holds artifact id {shown(bad[0])}, {_NO_ID}" if bad else None


def artifact_refusal(study: optuna.Study, trials: Iterable[FrozenTrial]) -> str | None:
    """Where ``study`` or one of its ``trials`` stores an artifact id that is none (:data:`ARTIFACT_ID`), or None:
    the report's figures (:data:`REPORT_ARTIFACTS`) and every artifact attr of Optuna and optuna-dashboard."""
    why = _figure_ids_refusal(study.user_attrs.get(REPORT_ARTIFACTS) or {})
    if why is not None:
        return why
    owners = [("its", study._storage.get_study_system_attrs(study._study_id))]
    owners += [(f"trial {t.number}'s", t.system_attrs) for t in trials]
    for owner, attrs in owners:
        for key in attrs:
            named = next((m for p in _ARTIFACT_ATTRS if (m := p.fullmatch(key))), None)
            if named and not ARTIFACT_ID.fullmatch(named["id"]):
                return f"{owner} system attr {shown(key)} holds artifact id {shown(named['id'])}, {_NO_ID}"
    return None


def read_verification(study: optuna.Study) -> dict[str, Any] | None:
    """The last verification (``Verification.to_dict``; speedopt.reporting reads it), None before any."""
    stored = finite(study.user_attrs.get(VERIFY))
    return None if stored is None else dict(stored)


def write_verification(study: optuna.Study, verification: Mapping[str, Any]) -> None:
    study.set_user_attr(VERIFY, dict(verification))


# -- trial records ----------------------------------------------------------------------------------------


def _long(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict)) or (isinstance(value, str) and len(value) > 80)


def _split(values: Mapping[str, Any], rest: str) -> dict[str, Any]:
    """``values`` as stored: the :data:`SHOWN` keys under their names, every other key inside ``rest``,
    its figures before its lists and long texts (the dashboard shows the first 1,024 characters)."""
    inside = sorted(((k, v) for k, v in values.items() if k not in SHOWN), key=lambda kv: _long(kv[1]))
    return {**{k: v for k, v in values.items() if k in SHOWN}, rest: dict(inside)}


def measurement_attrs(measured: Mapping[str, Any]) -> dict[str, Any]:
    """The trial attrs that store a trial's measurement (a :meth:`TrialResult.to_dict`)."""
    return _split(measured, MEASUREMENT)


def verdict_attrs(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The trial attrs that store a trial's accuracy verdict (a :meth:`Verdict.attrs`)."""
    return _split(verdict, ACCURACY)


def write_measurement(trial: optuna.Trial, measured: Mapping[str, Any]) -> None:
    """Store a trial's measurement (a :meth:`TrialResult.to_dict`): :data:`SHOWN` keys, the rest in :data:`MEASUREMENT`."""
    for key, value in measurement_attrs(finite(measured)).items():
        trial.set_user_attr(key, value)


def write_verdict(trial: optuna.Trial, verdict: Mapping[str, Any]) -> None:
    """Store a trial's accuracy verdict (a :meth:`Verdict.attrs`): :data:`SHOWN` keys, the rest in :data:`ACCURACY`."""
    for key, value in verdict_attrs(finite(verdict)).items():
        trial.set_user_attr(key, value)


def flat_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's attrs with :data:`MEASUREMENT` and :data:`ACCURACY` spread into one flat dict (the trial table's form);
    a stored NaN or infinity reads as None (:func:`~speedopt.study._finite.finite`)."""
    attrs = finite(attrs)
    nested = {**(attrs.get(MEASUREMENT) or {}), **(attrs.get(ACCURACY) or {})}
    return {**nested, **{k: v for k, v in attrs.items() if k not in (MEASUREMENT, ACCURACY)}}
