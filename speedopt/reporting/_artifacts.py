"""The report's figures as Optuna artifacts of the study, so its note in optuna-dashboard shows them.

A figure lives on disk beside the markdown report; the dashboard serves only what an artifact store
holds (``/artifacts/<study id>/<artifact id>``). The store is a folder beside the storage
(:func:`speedopt.study.artifact_dir`), which ``speedopt dashboard`` serves. A figure uploaded again
(a report written again) replaces the earlier upload, as the dashboard's own delete does.

A figure is read without following a link (``O_NOFOLLOW``, a regular file only) and uploaded from a private
copy of those bytes: a link swapped in after the report wrote it cannot put another file in the store,
which the dashboard serves.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from speedopt.errors import UsageError
from speedopt.study import schema

if TYPE_CHECKING:
    import optuna


def upload(study: optuna.Study, folder: Path, figures: Sequence[Path]) -> dict[str, str]:
    """Upload ``figures`` (PNG) into the store at ``folder``; their dashboard links, by file name."""
    import optuna
    from optuna.artifacts import FileSystemArtifactStore
    from optuna.artifacts.exceptions import ArtifactNotFound

    contents = {fig.name: _read_plain(fig) for fig in figures}  # every figure read before anything is uploaded
    folder.mkdir(parents=True, exist_ok=True)
    store = FileSystemArtifactStore(folder)
    earlier = schema.read_artifacts(study)
    ids: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="speedopt-figures-") as private:
        for name, content in contents.items():
            copy = Path(private) / name
            copy.write_bytes(content)
            old = earlier.get(name)
            if old:
                with contextlib.suppress(ArtifactNotFound):
                    store.remove(old)
                study._storage.set_study_system_attr(study._study_id, f"artifacts:{old}", json.dumps(None))
            ids[name] = optuna.artifacts.upload_artifact(
                artifact_store=store, file_path=str(copy), study_or_trial=study, mimetype="image/png"
            )
    schema.write_artifacts(study, {**earlier, **ids})
    return {name: f"/artifacts/{study._study_id}/{artifact_id}" for name, artifact_id in ids.items()}


def _read_plain(path: Path) -> bytes:
    """The bytes of the regular file ``path``, opened without following a link; UsageError for anything else
    (a link or a device there is not the figure the report wrote)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        what = "it is a link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise UsageError(f"refusing to upload the figure {path}: {what}; remove it and run speedopt report again") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UsageError(f"refusing to upload the figure {path}: it is not a plain file; remove it and run speedopt report again")
        return handle.read()
