"""A pre-resized copy of a YOLO dataset: every image resized once to the training size.

Why: a trainer decodes every image at full size each epoch only to shrink it to ``imgsz``; on large
camera images that decode is most of the dataloader's CPU. Practitioners resize once (long side =
imgsz, aspect kept, never upscaled) and train on the copy; JPEG quality 100 is their compromise,
a lossless PNG (``png``) or PNG plus a decoded ``.npy`` array (``npy``) the alternatives.

How the pixels are made: ``cv2.imread`` (IMREAD_COLOR, which applies EXIF orientation, as the trainers
read), then the very resize the Ultralytics trainer applies in ``BaseDataset.load_image``: long side
to imgsz, sizes ``min(ceil(side * r), imgsz)``, ``cv2.INTER_LINEAR``. A trainer that loads the copy at
that imgsz finds ``r == 1`` and does not resize again, so a lossless copy (png, npy) holds exactly the
pixels it would have computed from the original, and a JPEG copy differs only by the re-encoding.
An image already at or below imgsz is re-encoded at its own size (the trainer upscales both alike).

Layout: each image keeps its path relative to the dataset root under the copy (an image outside the
root goes under ``external/<8 hex of its folder>/``), with the format's suffix; its label file is copied
byte for byte to where the trainers look for it (``/images/`` -> ``/labels/``). The copy's data.yaml
keeps the source's keys with ``path`` = the copy.

Atomic and resumable: every file is written to a temporary name in its folder and renamed, stamped
with its source's mtime (so a rerun reuses an output whose source is unchanged and redoes the rest);
``.speedopt-preparing`` marks a copy in progress and :data:`MANIFEST` is written last, once every
output has been decoded and checked. The source dataset is never written to, and in ``--out`` only what
an earlier run recorded as its own is ever removed: a folder holding anything else is refused.

The parts: :mod:`~speedopt.data._manifest` (the spec and the manifest's record), :mod:`~speedopt.data._plan`
(the source stat'ed, every output's path, the checks of ``--out``), :mod:`~speedopt.data._folder` (the
copy's folder taken over, cleaned and given its data.yaml), :mod:`~speedopt.data._record` (which files in
it prepare wrote), :mod:`~speedopt.data._items` (one image
resized, written and checked), :mod:`~speedopt.data._workers` (the worker processes that do that) and
:mod:`~speedopt.data._atomic` (files written whole); here, :func:`prepare` and :func:`find_copy`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from speedopt import machine
from speedopt.data._atomic import _read_json, _write_json
from speedopt.data._dataset import Dataset
from speedopt.data._folder import _begin, _clean, _finish, _locked, _Prior, _state, _write_yaml
from speedopt.data._items import (
    CORRUPT,
    _check_one,
    _copy_label,
    _image_current,
    _label_current,
    _remove_outputs,
    _resize_one,
)
from speedopt.data._manifest import MANIFEST, MARKER, PreparedCopy, PrepareReport, PrepareSpec, check_spec
from speedopt.data._plan import _check_out, _Item, _out_path, _Plan, _plan, source_id
from speedopt.data._workers import _Workers, _workers
from speedopt.errors import UsageError
from speedopt.knobs import max_workers, shown

_SAVE_EVERY_S = 2.0  # how often an unfinished run records its elapsed time in the marker


def _check_jobs(jobs: int | None) -> int | None:
    """``jobs`` as given (None: one per CPU core), refused below 1 or past a sane maximum, as the
    dataloader's ``workers`` are (:func:`speedopt.knobs.max_workers`)."""
    if jobs is None:
        return None
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {shown(jobs)}")
    if jobs > max_workers():
        raise UsageError(
            f"--jobs must be at most {max_workers()} (4 per CPU core, at least 64), got {jobs}; "
            "prepare runs at most one job per CPU core anyway"
        )
    return jobs


def _jobs(jobs: int | None, images: int) -> tuple[int, tuple[str, ...]]:
    """The worker processes this run starts: ``jobs`` (default one per CPU core), at most one per CPU core
    (more only share the cores: 20 workers on 2 cores made a 3.4 s copy of 20 images take 16 s) and per
    image; a note when that is fewer than were asked for."""
    cores = machine.cpu_cores()
    ran = max(1, min(jobs or cores, cores, images))
    if jobs is None or jobs == ran:
        return ran, ()
    return ran, (f"--jobs {jobs} -> {ran}: at most one job per CPU core ({cores}) and per image ({images})",)


class _Clock:
    """Elapsed time of this run, saved in the marker every few seconds (a killed run's time still counts)."""

    def __init__(self, ds: Dataset, spec: PrepareSpec, out: Path, prior: _Prior, started: float):
        self.ds, self.spec, self.out, self.prior = ds, spec, out, prior
        self.carried = prior.seconds
        self.started = started  # when this run began (its checks and the stat pass count too)
        self.saved = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.saved >= _SAVE_EVERY_S:
            self.saved = now
            _write_json(self.out / MARKER, _state(self.ds, self.spec, self.carried + self.elapsed()))


def _resize(
    workers: _Workers, todo: list[_Item], clock: _Clock, progress: Callable[[int, int], None] | None
) -> tuple[set[int], dict[int, str]]:
    """Resize every item in ``todo``; returns the indices of the corrupt sources, and of those the trainers
    drop unread (a decompression bomb) with why."""
    corrupt: set[int] = set()
    dropped: dict[int, str] = {}
    if progress:
        progress(0, len(todo))
    for done, (index, problem) in enumerate(workers.map(_resize_one, todo), 1):
        if problem == CORRUPT:
            corrupt.add(index)
        elif problem is not None:
            dropped[index] = problem
        if progress:
            progress(done, len(todo))
        clock.tick()
    return corrupt, dropped


def _dropped_note(dropped: dict[int, str]) -> tuple[str, ...]:
    """One line naming the images left out as the trainers drop them (none: no line)."""
    if not dropped:
        return ()
    first = dropped[min(dropped)]
    return (f"skipped {len(dropped)} image(s) the trainers drop unread as decompression bombs, e.g. {first}",)


def _verify(
    workers: _Workers, plan: _Plan, corrupt: set[int], progress: Callable[[int, int], None] | None
) -> None:
    """Decode every output in full and check its size (and .npy, and label): UsageError on the first bad one,
    which is removed so that a rerun redoes it."""
    items = [item for item in plan.items if item.index not in corrupt]
    problems: dict[int, str] = {}
    for done, (index, problem) in enumerate(workers.map(_check_one, items), 1):
        if problem is not None:
            problems[index] = problem
        if progress:
            progress(done, len(items))
    if problems:
        first = plan.items[min(problems)]
        _remove_outputs(first)
        raise UsageError(
            f"prepared copy failed verification: {first.output} {problems[min(problems)]} ({len(problems)} bad file(s)); "
            "it was removed, run the same command again to redo it"
        )


def _bytes(items: Iterable[_Item]) -> int:
    total = 0
    for item in items:
        for path in (item.output, item.npy):
            if path is not None:
                total += os.stat(path).st_size
    return total


def prepare(
    ds: Dataset,
    spec: PrepareSpec,
    out: Path | None = None,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    verify_progress: Callable[[int, int], None] | None = None,
) -> PrepareReport:
    """Make, finish or update the resized copy of ``ds`` at ``out`` (default :func:`default_out`).

    Formats: ``jpg`` (JPEG at ``spec.quality``), ``png`` (lossless), ``npy`` (lossless PNG plus a ``.npy``
    beside it with the decoded BGR uint8 array, same stem and mtime: both trainers read that array in place
    of the image whenever it exists, Ultralytics ``BaseDataset.load_image`` when it is not older than the
    image, classic yolov5 ``LoadImagesAndLabels.load_image`` always; no decode at all, many times the disk).

    ``jobs`` worker processes (default: one per CPU core; at most one per core and per image) resize;
    ``progress(done, total)`` is called in this process as images are written (``total``: the images this
    run writes, not those it reuses), and ``verify_progress(done, total)`` as the copy is decoded and
    checked. Outputs a previous run wrote
    from an unchanged source are reused; outputs whose source is gone are removed. Corrupt sources are
    skipped and listed. The manifest is written last, once every output has decoded at the right size.
    With more than one job the workers are spawned processes: a script that calls this needs the usual
    ``if __name__ == "__main__":`` guard.
    """
    started = time.monotonic()
    spec = check_spec(spec)
    asked = _check_jobs(jobs)
    out = _out_path(ds, spec, out)
    _check_out(ds, out)
    plan = _plan(ds, spec, out)
    jobs, notes = _jobs(asked, len(plan.items))
    notes += (ds.left_out_note,) if ds.left_out else ()
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out):
        clock = _Clock(ds, spec, out, _begin(ds, spec, out, plan), started)
        try:
            return _run(ds, spec, out, plan, jobs, clock, progress, verify_progress, notes)
        finally:
            if (out / MARKER).exists():  # unfinished: record the time spent so far
                with contextlib.suppress(OSError):
                    clock.tick(force=True)


def _run(
    ds: Dataset,
    spec: PrepareSpec,
    out: Path,
    plan: _Plan,
    jobs: int,
    clock: _Clock,
    progress: Callable[[int, int], None] | None,
    verify_progress: Callable[[int, int], None] | None,
    notes: tuple[str, ...],
) -> PrepareReport:
    """The body of :func:`prepare` once the folder is ours and locked."""
    _clean(out, plan)
    todo = [item for item in plan.items if not _image_current(item)]
    reused = len(plan.items) - len(todo)
    redo = {item.index for item in todo}
    for item in plan.items:
        if item.index not in redo and not _label_current(item):
            _copy_label(item)
    with _workers(jobs, len(plan.items)) as workers:
        started = time.monotonic()
        corrupt, dropped = _resize(workers, todo, clock, progress)
        resize_seconds = time.monotonic() - started
        skipped = corrupt | set(dropped)  # neither is in the copy; only the corrupt are listed as such
        for index in skipped:
            _remove_outputs(plan.items[index])
        _verify(workers, plan, skipped, verify_progress)
    notes += _dropped_note(dropped)
    yaml_path = _write_yaml(ds, out, plan, skipped)
    _finish(out, plan, skipped)
    kept = [item for item in plan.items if item.index not in skipped]
    written = len(todo) - len(skipped)
    seconds = clock.elapsed()
    kept_prior = written == 0 and clock.prior.jobs is not None  # a rerun that changed nothing: the copy's cost stands
    copy = PreparedCopy(
        yaml_path=yaml_path,
        root=out,
        spec=spec,
        source_yaml=ds.yaml_path,
        source_id=plan.source_id,
        images=sum(1 for i in plan.train + plan.val if i not in skipped),
        train_images=sum(1 for i in plan.train if i not in skipped),
        bytes=_bytes(kept),
        source_bytes=plan.source_bytes,
        seconds=round(clock.carried + (0.0 if kept_prior else seconds), 3),
        jobs=clock.prior.jobs if kept_prior and clock.prior.jobs else jobs,
        corrupt=tuple(plan.items[i].source for i in sorted(corrupt)),
    )
    _write_json(out / MANIFEST, copy.to_manifest())
    (out / MARKER).unlink(missing_ok=True)
    return PrepareReport(
        copy=copy,
        written=written,
        reused=reused,
        seconds=seconds,
        images_per_s=written / resize_seconds if written and resize_seconds > 0 else 0.0,
        jobs=jobs,
        notes=notes,
    )


def _command(ds: Dataset, spec: PrepareSpec, root: Path, out: Path | None) -> str:
    """The prepare command that (re)makes this copy."""
    parts = [f"speedopt prepare --data {ds.yaml_path} --imgsz {spec.imgsz}"]
    if spec.format != "jpg":
        parts.append(f"--format {spec.format}")
    elif spec.quality != 100:
        parts.append(f"--quality {spec.quality}")
    if out is not None:
        parts.append(f"--out {root}")
    return " ".join(parts)


def find_copy(ds: Dataset, spec: PrepareSpec, out: Path | None = None, source: str | None = None) -> PreparedCopy | None:
    """The complete copy of ``ds`` at ``spec`` in ``out`` (default :func:`default_out`), or None when there is
    none (missing, unfinished, or a copy of another dataset or spec). A complete copy made before the source
    changed is a UsageError: training on it would silently use old images or labels. ``source``: the
    source's :func:`source_id` when the caller already has it (it stats every image and label file)."""
    spec = check_spec(spec)
    root = _out_path(ds, spec, out)
    manifest = _read_json(root / MANIFEST)
    if manifest is None:
        return None
    try:
        copy = PreparedCopy.from_manifest(manifest, root)
    except (KeyError, TypeError, ValueError):
        return None
    if copy.spec != spec or copy.source_yaml != ds.yaml_path or not copy.yaml_path.is_file():
        return None
    if manifest.get("yaml_path") != str(copy.yaml_path):  # moved since: its data.yaml names the old folder
        return None
    if copy.source_id != (source or source_id(ds)):
        raise UsageError(
            f"prepared copy {root} is stale: {ds.yaml_path} changed since it was made; "
            f"run `{_command(ds, spec, root, out)}` again to update it"
        )
    return copy
