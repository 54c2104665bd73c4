"""Moving studies between storages: export to one self-contained file, import into another storage.

An exported file is itself an Optuna storage (SQLite ``*.db`` or journal ``*.log``) holding the
study (trials, params, user and system attrs, so the dashboard note too) and the probe-cache
entries of its dataset, so accuracy results travel with it. A source is only read: an import opens
its file read-only, so a file that turns out not to be an export is left exactly as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from speedopt.errors import UsageError
from speedopt.knobs import shown
from speedopt.quality import cache_entries, merge_cache
from speedopt.study._constraints import with_constraint_lists
from speedopt.study._finite import nonfinite_refusal
from speedopt.study._schema import IMPORTED_YOLOV5_DIR, YOLOV5_DIR, artifact_refusal, read_protocol
from speedopt.study._storage import Need, find_study, open_storage, redact, storage_errors, url_for
from speedopt.study._valid import import_problem
from speedopt.study.names import study_names

if TYPE_CHECKING:
    import optuna

SUFFIXES = (".db", ".sqlite", ".sqlite3", ".log", ".journal")


def split_source(source: str) -> tuple[str, str | None]:
    """``STORAGE[::STUDY]`` -> (storage URL, study name or None)."""
    location, _, study = source.partition("::")
    return url_for(location), (study or None)


def export(study_name: str, storage_url: str | None, out: str) -> tuple[int, int]:
    """Write the study and its dataset's probe cache to a new file; returns (trials, cache entries)."""
    import optuna

    target = Path(out)
    if target.exists():
        raise UsageError(f"{out} already exists; choose a new file name (export never overwrites)")
    if target.suffix not in SUFFIXES:
        raise UsageError(f"export file must end in .db (SQLite) or .log (journal), got {out}")
    with storage_errors(storage_url):
        study = find_study(storage_url, study_name)
        source = study._storage
        destination = open_storage(url_for(str(target)), Need.CREATE)
        # copied with each trial's constraints in both forms (an older study's migrated: schema.with_constraint_lists)
        optuna.copy_study(from_study_name=study.study_name, from_storage=with_constraint_lists(source), to_storage=destination)
        entries = cache_entries(source, read_protocol(study).dataset.id)
        merge_cache(entries, destination)
    return len(study.trials), len(entries)


def import_study(file: str, storage_url: str | None, study_name: str | None = None) -> tuple[str, int, int, tuple[str, ...]]:
    """Bring an exported study (and its probe cache) into a storage; returns (name, trials, cache added, notes).

    The exported file is opened read-only: it must already be an Optuna storage, and is never changed. What it
    holds is data from outside: a study storing an artifact id that is none (:func:`artifact_refusal`), or a NaN
    or an infinity where a number belongs (:func:`nonfinite_refusal`), or a record that does not fit its types and
    bounds (:func:`import_problem`), is refused before the target storage is opened.
    """
    import optuna

    location = file.partition("::")[0]
    if not Path(location).is_file():
        raise UsageError(f"export file not found: {redact(file)}")
    url, name = split_source(file)
    with storage_errors(url):
        study = find_study(url, name or study_name, Need.READ_ONLY)
        source = study._storage
        entries = cache_entries(source, None)
        trials = study.get_trials(deepcopy=False)
        why = artifact_refusal(study, trials) or nonfinite_refusal(study, trials, entries) or import_problem(study, trials)
    if why is not None:
        raise UsageError(
            f"refusing to import study {study.study_name!r}: {why}; nothing was imported: export the study again "
            "from the storage it came from"
        )
    with storage_errors(storage_url):
        destination = open_storage(storage_url, Need.CREATE)
        if study.study_name in study_names(destination):
            raise UsageError(f"study {study.study_name!r} already exists in the target storage; nothing imported")
        optuna.copy_study(from_study_name=study.study_name, from_storage=with_constraint_lists(source), to_storage=destination)
        notes = _forget_checkout(optuna.load_study(study_name=study.study_name, storage=destination))
        added = merge_cache(entries, destination)
    return study.study_name, len(study.trials), added, notes


def _forget_checkout(study: optuna.Study) -> tuple[str, ...]:
    """An imported classic study names the yolov5 checkout it ran (``yolov5_dir``): a folder of code on the machine
    it came from. It is never run from an export: the imported copy names none (the one it named is kept under
    ``imported_yolov5_dir``, for reading), and the user names their own with ``--yolov5-dir``."""
    named = study.user_attrs.get(YOLOV5_DIR)
    if not named:
        return ()
    study.set_user_attr(YOLOV5_DIR, None)
    study.set_user_attr(IMPORTED_YOLOV5_DIR, str(named))
    return (
        f"the study names the yolov5 checkout {shown(str(named), 120)} it ran on its own machine: an export's checkout is "
        "never run; verify and report use the one you name with --yolov5-dir (else the installed yolov5 package)",
    )
