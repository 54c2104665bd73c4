"""Moving studies between storages: export to one self-contained file, import into another storage.

An exported file is itself an Optuna storage (SQLite ``*.db`` or journal ``*.log``) holding the
study (trials, params, user and system attrs, so the dashboard note too) and the probe-cache
entries of its dataset, so accuracy results travel with it.
"""

from __future__ import annotations

from pathlib import Path

from speedopt.errors import UsageError
from speedopt.quality import cache_entries, merge_cache
from speedopt.study._storage import find_study, open_storage, study_names, url_for


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
    if target.suffix not in (".db", ".sqlite", ".sqlite3", ".log", ".journal"):
        raise UsageError(f"export file must end in .db (SQLite) or .log (journal), got {out}")
    study = find_study(storage_url, study_name)
    source = open_storage(storage_url)
    target.parent.mkdir(parents=True, exist_ok=True)
    destination = open_storage(url_for(str(target)))
    optuna.copy_study(from_study_name=study.study_name, from_storage=source, to_storage=destination)
    entries = cache_entries(source, study.user_attrs.get("dataset", {}).get("id"))
    merge_cache(entries, destination)
    return len(study.trials), len(entries)


def import_study(file: str, storage_url: str | None, study_name: str | None = None) -> tuple[str, int, int]:
    """Bring an exported study (and its probe cache) into a storage; returns (name, trials, cache added)."""
    import optuna

    if not Path(file.partition("::")[0]).is_file():
        raise UsageError(f"export file not found: {file}")
    url, name = split_source(file)
    study = find_study(url, name or study_name)
    destination = open_storage(storage_url)
    if study.study_name in study_names(destination):
        raise UsageError(f"study {study.study_name!r} already exists in the target storage; nothing imported")
    optuna.copy_study(from_study_name=study.study_name, from_storage=open_storage(url), to_storage=destination)
    added = merge_cache(cache_entries(open_storage(url), None), destination)
    return study.study_name, len(study.trials), added
