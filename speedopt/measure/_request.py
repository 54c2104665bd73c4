"""One trial, checked and decided before anything runs: :func:`make_request` -> :class:`TrialRequest`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from speedopt import defaults, machine
from speedopt import knobs as knobs_mod
from speedopt.data import Dataset, load
from speedopt.engines import EngineName, RecordsEngine, SplitLabels
from speedopt.isolation import check_lock, manifest_dir
from speedopt.knobs import Knobs
from speedopt.measure._checks import adjust_to_device, disk_cache_refusal, gpus_refusal, ram_cache_refusal
from speedopt.measure._options import TrialOptions
from speedopt.offline import cache_dir


@dataclass(frozen=True)
class TrialRequest(RecordsEngine):
    """A checked, ready-to-run speed trial: the job that crosses into the child process as JSON."""

    kind: ClassVar[str] = "trial"
    timeout_flag: ClassVar[str] = "--timeout"

    data_yaml: str
    knobs: Knobs  # as they will run (normalised, adjusted to this machine)
    requested: Knobs  # as the user asked
    device: str
    engine: EngineName = "ultralytics"
    yolov5_dir: str | None = None  # the classic engine's checkout (absolute); None: the yolov5 package
    steps: int = defaults.STEPS  # the minimum measured steps
    warmup: int = defaults.WARMUP
    timeout_s: float = defaults.TRIAL_TIMEOUT_S
    max_steps: int = 0  # the adaptive window's maximum (0: the minimum)
    queued: int = 0  # batches the dataloader workers prefetch: warm-up consumes them first
    epochs: int = defaults.EPOCHS
    images: int = 0  # train images the trial uses
    images_total: int = 0  # train images listed
    images_trained: int = 0  # of those, what the trainer trains on after its label check (0: not known)
    seed: int = defaults.SEED
    cache_dir: str = ""
    notes: tuple[str, ...] = ()
    infeasible: str | None = None  # reason, when the request must not run at all
    train_subset: tuple[str, ...] = ()  # the subset's image paths when images < images_total (the child lists nothing)
    label_caches: tuple[SplitLabels, ...] = ()  # the full splits' label caches the study built for data_yaml
    mode: str = "train"  # what is clocked: the trainer's steps, or one of its ceilings (speedopt.engines.MODES)
    optimizer: str = "auto"  # the user's run's optimizer argument: auto (the trainer's choice for the run), or one named

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def trained_images(label_caches: Sequence[SplitLabels], listed: int) -> int:
    """The train images the trainer trains on, from the label cache the study built of the split (the
    listing less what its label check drops); 0 when not known, or when the cache listed other files."""
    train = next((s for s in label_caches if s.split == "train"), None)
    return train.images if train is not None and train.listed == listed else 0


def make_request(
    data: str | Dataset,
    requested: Knobs,
    options: TrialOptions | None = None,
    *,
    epochs: int = defaults.EPOCHS,
    seed: int = defaults.SEED,
    label_caches: Sequence[SplitLabels] = (),
) -> TrialRequest:
    """Check every input (raising UsageError) and decide how the trial runs on this machine.

    ``data``: a data.yaml path, or the :class:`~speedopt.data.Dataset` already loaded from one (a study
    lists its image folders once, not per trial). ``options``: how it is measured and where (default:
    the CLI's defaults). ``label_caches``: the full splits' label caches built for this data.yaml (a
    study's labels job); the trial takes its subset's labels from them.
    """
    options = options or TrialOptions()
    eng = options.check()
    check_lock()
    steps, warmup, most = options.steps, options.warmup, options.most_steps
    ds = data if isinstance(data, Dataset) else load(data)
    knobs, notes = knobs_mod.validate(requested)
    notes += [ds.left_out_note] if ds.left_out else []
    knobs, adjusted, dev = adjust_to_device(knobs, eng, machine.parse_device(options.device))
    notes += adjusted.values()
    if knobs.gpus > 1:  # every rank stops on its own clock: they must stop at the same step, so no adaptive window
        most = steps
        notes.append(
            f"gpus={knobs.gpus}: {knobs.gpus} DDP processes under torch.distributed.run; batch={knobs.batch} is the total "
            f"({knobs.batch // knobs.gpus} per process); a fixed window of {steps} steps, so every rank stops at the same step"
        )
    queued = knobs.workers * eng.prefetch_batches
    total = len(ds.train_images)
    batches = warmup + 3 * queued + most  # the longest warm-up and window the clock may run
    images = min(total, batches * knobs.batch)
    if images < total:
        notes.append(f"trains on {images} of {total} images: enough for {batches} batches of {knobs.batch}")
    infeasible = gpus_refusal(knobs)
    if infeasible:
        pass
    elif knobs.cache == "ram":
        infeasible = ram_cache_refusal(ds, knobs.imgsz, options.ram_limit_bytes)
    elif knobs.cache == "disk":
        manifest_dir()  # where the .npy files it may add are recorded: checked now, not after the set-up
        infeasible = disk_cache_refusal([*ds.train_images[:images], *ds.val_images])
    return TrialRequest(
        data_yaml=str(ds.yaml_path),
        knobs=knobs,
        requested=requested,
        device=dev,
        **options.engine_spec.resolved().record(),
        steps=steps,
        warmup=warmup,
        timeout_s=options.timeout_s,
        max_steps=most,
        queued=queued,
        epochs=epochs,
        images=images,
        images_total=total,
        seed=seed,
        cache_dir=str(cache_dir()),
        notes=tuple(notes),
        infeasible=infeasible,
        train_subset=tuple(map(str, ds.train_images[:images])) if images < total else (),
        images_trained=trained_images(label_caches, total),
        label_caches=tuple(label_caches),
    )
