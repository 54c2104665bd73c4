"""The report's figures as Optuna artifacts of the study, so its note in optuna-dashboard shows them.

A figure lives on disk beside the markdown report; the dashboard serves only what an artifact store
holds (``/artifacts/<study id>/<artifact id>``). The store is a folder beside the storage
(:func:`speedopt.study.artifact_dir`), which ``speedopt dashboard`` serves. A figure uploaded again
(a report written again) replaces the earlier upload, as the dashboard's own delete does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from speedopt.study import schema

if TYPE_CHECKING:
    import optuna


def upload(study: optuna.Study, folder: Path, figures: Sequence[Path]) -> dict[str, str]:
    """Upload ``figures`` (PNG) into the store at ``folder``; their dashboard links, by file name."""
    import optuna
    from optuna.artifacts import FileSystemArtifactStore
    from optuna.artifacts.exceptions import ArtifactNotFound

    folder.mkdir(parents=True, exist_ok=True)
    store = FileSystemArtifactStore(folder)
    earlier = schema.read_artifacts(study)
    ids: dict[str, str] = {}
    for fig in figures:
        old = earlier.get(fig.name)
        if old:
            with contextlib.suppress(ArtifactNotFound):
                store.remove(old)
            study._storage.set_study_system_attr(study._study_id, f"artifacts:{old}", json.dumps(None))
        ids[fig.name] = optuna.artifacts.upload_artifact(
            artifact_store=store, file_path=str(fig), study_or_trial=study, mimetype="image/png"
        )
    schema.write_artifacts(study, {**earlier, **ids})
    return {name: f"/artifacts/{study._study_id}/{artifact_id}" for name, artifact_id in ids.items()}

