"""The classic engine: trials of ultralytics/yolov5 ``train.py`` (the anchor-based original YOLOv5).

The code comes from a user's checkout (``--yolov5-dir PATH``, imported from there) or from the
``yolov5`` package (``pip install 'speedopt[yolov5]'``). A trial hands ``train.py``'s own
``parse_opt()`` the very flags speedopt prints for the config (:func:`speedopt.command.train_py_args`)
plus trial-only ones (a private project folder, no validation, no checkpoints, no plots) and runs
``main(opt, callbacks)``.

Hooks, all in the trainer's own :class:`Callbacks`: ``on_train_batch_start`` (fired as soon as the
loader yielded a batch) and ``on_train_batch_end`` (after the optimizer step; it gets the model and
the images; rank 0 only under DDP) drive the step clock; ``on_train_start`` checks the set-up.
train.py keeps its loader in a local variable, so its ``create_dataloader`` is wrapped (not replaced)
to read back what the loader really runs: workers (capped at the CPU cores and the batch), batch
(capped at the dataset size), image size (floored at twice the stride) and cache (``cache=ram``
silently dropped when RAM looks short).

AMP has no switch in train.py: ``check_amp()`` turns it on for CUDA after a self-check that
downloads ``yolov5n.pt`` and off on CPU. The engine keeps that rule and skips the download, so the
``amp`` knob is fixed for this engine (see :meth:`Yolov5Engine.fixed_knobs`).

Patches, all applied inside the job process only, to train.py's own namespace in
:func:`_patch_module` (nothing of the user's checkout is written):

- ``check_amp`` -> AMP exactly on CUDA, without the self-check download (and records what it chose);
- ``check_git_status``, ``check_requirements`` -> nothing (a git fetch; a pip install of what looks missing);
- ``Loggers`` -> :class:`_NoLoggers` (wandb, comet, clearml and neptune log in over the network);
- ``attempt_download_from_hub`` (the yolov5 package) -> nothing (asks the Hugging Face hub for --weights);
- ``create_dataloader`` -> wrapped, to read back the train loader and dataset it built;
- ``LoadImagesAndLabels.cache_labels`` (the label scan) -> timed (a trial's ``label_scan_s``);
- ``validate.run`` -> timed, in validation-timing jobs; instant with zero scores in speed trials, whose
  window may cross an epoch end (see :func:`_no_validation`): the rest of train.py's epoch-end work
  (scheduler, EMA attributes, the loader's next pass) then lands in the next step, counted as waiting
  for data (see :class:`~speedopt.measure.StepClock`);

- ``numpy.trapz`` -> ``numpy.trapezoid`` where NumPy 2.4 removed it (the classic metrics call it).

Label caches: a trial's subset is a list file in its private folder (``train-subset.txt``), so train.py
names the subset's label cache after it (``train-subset.cache``) and the user's ``labels/train.cache``
is never written by a subset. Before train.py runs, that file is written from the full split's cache
which the study's labels job built (:meth:`Yolov5Engine.build_label_cache`), when the file still
holds the recorded hash and cache version and has every subset image: train.py then finds a valid
cache for the subset and scans nothing. The subset's image paths come with the trial
(``TrainRun.train_subset``): a trial lists no image folder itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from speedopt.command import train_py_args
from speedopt.data import load, write_trainer_yaml
from speedopt.engines._base import Clock, Engine, EngineReport, LabelCacheBuild, ProbeRun, ProbeScores, SplitLabels, TrainRun
from speedopt.engines._common import (
    SameBatch,
    built_split,
    ddp_rank,
    drain,
    frozen_prefix,
    images_read,
    package_version,
    subset_entries,
    sync,
    timed,
    to_device,
    trainer_paths,
    workers_note,
)
from speedopt.engines.ultralytics import UltralyticsEngine
from speedopt.errors import UsageError
from speedopt.knobs import MODEL_SCALES, Knobs
from speedopt.offline import place_font
from speedopt.status import Status, TrialFinished, TrialRejected

# Text every YOLOv5 train.py has (v6.x, v7.0, the yolov5 package, today's master).
_TRAIN_PY_MARKERS = ("def parse_opt", "def main(opt", "Callbacks", "create_dataloader", "--batch-size", "on_train_batch_end")
_AMP_REASON = (
    "the classic train.py has no AMP switch: it runs AMP exactly on CUDA "
    "(its AMP self-check, which downloads yolov5n.pt, is skipped offline)"
)


def checkout_root(path: str) -> Path:
    """The absolute folder of a YOLOv5 checkout; UsageError (one line) when ``path`` is not one."""
    root = Path(path).expanduser()
    hint = "give the folder of a clone of ultralytics/yolov5 (the one holding train.py)"
    if not root.is_dir():
        raise UsageError(f"--yolov5-dir {path}: no such folder; {hint}")
    train = root / "train.py"
    if not train.is_file():
        raise UsageError(f"--yolov5-dir {path} has no train.py; {hint}")
    text = train.read_text(errors="replace")
    missing = [m for m in _TRAIN_PY_MARKERS if m not in text]
    if missing or not (root / "utils" / "callbacks.py").is_file() or not (root / "models" / "yolo.py").is_file():
        raise UsageError(f"--yolov5-dir {path}: its train.py is not the YOLOv5 one; {hint}")
    return root.resolve()


def checkout_version(root: Path) -> str:
    """``git <commit>`` of a checkout, read from ``.git`` without running git; ``checkout`` otherwise."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return f"git {head[:12]}"
        ref = head[5:]
        loose = git / ref
        if loose.is_file():
            return f"git {loose.read_text().strip()[:12]}"
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return f"git {line.split()[0][:12]}"
    except OSError:
        pass
    return "checkout"


class _NoLoggers:
    """Stands in for train.py's ``Loggers`` in a trial.

    The real one starts every installed integration (wandb and comet log in over the network, clearml,
    neptune) and writes TensorBoard/CSV files; a speed trial needs none of it. It has no public methods,
    so train.py registers no logger callbacks; ``remote_dataset`` is the one attribute train.py reads.
    """

    remote_dataset = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class Yolov5Engine(Engine):
    name = "yolov5"
    install_hint = "pip install 'speedopt[yolov5]', or give --yolov5-dir PATH (a clone of ultralytics/yolov5)"
    supports_probe = True
    supports_validation_timing = True
    supports_label_cache = True
    supports_ceilings = True
    ddp_devices = ("cuda",)  # train.py main() sets DDP up under torch.distributed.run (NCCL)

    def __init__(self, yolov5_dir: str | None = None):
        self.root = checkout_root(yolov5_dir) if yolov5_dir else None

    def version(self) -> str | None:
        if self.root is not None:
            return checkout_version(self.root)
        return package_version("yolov5")

    def fixed_knobs(self, device: str) -> dict[str, tuple[Any, str]]:
        return {"amp": (device != "cpu", _AMP_REASON)}

    def command_problems(self) -> tuple[str, ...]:
        import numpy as np

        problems = []
        if not hasattr(np, "trapz"):
            problems.append(
                f"numpy {np.__version__} has no numpy.trapz, which the classic metrics call: the printed command fails "
                "at its first validation (speedopt's trials patch it); install numpy<2.4 in the environment that trains"
            )
        if self.root is None and _torch_loads_weights_only():
            problems.append(
                "the yolov5 package's train.py ends with torch.load of its own checkpoint, which torch >= 2.6 refuses "
                "(weights_only): training completes, then the command exits with an error; a current clone of "
                "ultralytics/yolov5 (--yolov5-dir) or torch<2.6 avoids it"
            )
        return tuple(problems)

    def environment(self, cache_dir: Path) -> dict[str, str]:
        return {
            # The classic code imports ultralytics (today's master builds on it): same private, offline settings.
            **UltralyticsEngine().environment(cache_dir),
            # check_font() looks for Arial.ttf here before downloading it; a private folder, speedopt's font.
            "YOLOV5_CONFIG_DIR": str(cache_dir / "yolov5-config"),
            # check_requirements() would pip-install missing packages (a subprocess our network guard cannot see).
            "YOLOv5_AUTOINSTALL": "false",
            "YOLO_AUTOINSTALL": "false",
        }

    def prepare(self, cache_dir: Path) -> None:
        UltralyticsEngine().prepare(cache_dir)
        place_font(cache_dir / "yolov5-config")

    def _import_train(self) -> ModuleType:
        """train.py as a module: from the checkout (its own utils/, models/ first on sys.path) or the package."""
        try:
            if self.root is None:
                return importlib.import_module("yolov5.train")
            sys.path.insert(0, str(self.root))
            return importlib.import_module("train")
        except ImportError as exc:
            raise RuntimeError(
                f"the classic YOLOv5 code could not be imported ({exc}); {self.install_hint} "
                "(the extra pins setuptools<81: the old code imports pkg_resources)"
            ) from exc

    def _run_train_py(self, module: ModuleType, run: TrainRun, callbacks: Any, trial_only: list[str], seen: dict[str, Any]) -> None:
        """train.py's own parser on the flags speedopt prints (plus ``trial_only``), then its main()."""
        argv = train_py_args(_trial_data(run, seen["dataloaders"]), run.knobs, device=run.device, epochs=run.epochs)
        argv += ["--project", str(run.workdir), "--exist-ok", "--noplots", "--seed", str(run.seed), *trial_only]
        saved, sys.argv = sys.argv, ["train.py", *argv]
        try:
            opt = module.parse_opt()  # train.py's own parser reads the command speedopt prints
        finally:
            sys.argv = saved
        module.main(opt, callbacks)

    def _patched(self, seen: dict[str, Any]) -> ModuleType:
        module = self._import_train()
        _patch_module(module, seen)
        return module

    @contextlib.contextmanager
    def _training(self, seen: dict[str, Any]) -> Iterator[None]:
        """train.py runs in the block; its stop (TrialFinished) ends it, and its loaders' workers are shut down."""
        try:
            with contextlib.suppress(TrialFinished):
                yield
        finally:
            _close_loaders(seen)

    def preload(self) -> None:
        # torch only: train.py makes its default paths (--hyp, --cfg) relative to the working directory at
        # import, which is the job's own folder only in the job's process
        super().preload()

    def probe(self, run: ProbeRun, progress: Callable[[int, int], None]) -> ProbeScores:
        seen: dict[str, Any] = {}
        module = self._patched(seen)
        scores: dict[str, float] = {}

        def epoch_end(epoch: int) -> None:
            progress(epoch + 1, run.epochs)

        def fit_epoch_end(log_vals: list[float], epoch: int, *_: Any) -> None:
            # log_vals = 3 train losses, then P, R, mAP50, mAP50-95, 3 val losses, then learning rates
            scores["map50"], scores["map50_95"] = float(log_vals[5]), float(log_vals[6])
            if epoch + 1 >= run.epochs:  # the last epoch's validation is the score;
                raise TrialFinished  # stop before train.py re-validates best.pt (the same weights, and broken on new torch)

        callbacks = module.Callbacks()
        callbacks.register_action("on_train_epoch_end", name="speedopt", callback=epoch_end)
        callbacks.register_action("on_fit_epoch_end", name="speedopt", callback=fit_epoch_end)
        train_run = _probe_train_run(run)
        with self._training(seen):
            # No --noval: the yolov5 package's train.py fails after a non-final epoch without validation
            # (an unset local), so probes validate every epoch, as a user's own run does by default.
            self._run_train_py(module, train_run, callbacks, ["--name", "probe", "--nosave"], seen)
        return ProbeScores(map50=scores.get("map50", 0.0), map50_95=scores.get("map50_95", 0.0), images=train_run.images)

    def time_validation(self, run: ProbeRun) -> tuple[float, int, float | None]:
        # One epoch on one batch, then the validation train.py runs at each epoch's end, timed; then its
        # checkpoint save (the ckpt dict, torch.save of last.pt, and of best.pt: the first epoch always
        # improves), timed from on_fit_epoch_end to on_model_save, in the job's private folder. The one
        # epoch is the final one, so train.py validates and saves despite --noval --nosave.
        seen: dict[str, Any] = {}
        module = self._patched(seen)
        spent: list[float] = []
        saves: list[float] = []
        fit_end: list[float] = []

        def fitted(*_: Any) -> None:
            fit_end.append(time.perf_counter())

        def saved(*_: Any) -> None:
            if fit_end:
                saves.append(time.perf_counter() - fit_end[-1])
            raise TrialFinished  # validation and save are timed; nothing after them is needed

        module.validate.run = timed(module.validate.run, spent)
        callbacks = module.Callbacks()
        callbacks.register_action("on_fit_epoch_end", name="speedopt", callback=fitted)
        callbacks.register_action("on_model_save", name="speedopt", callback=saved)
        one_batch = _probe_train_run(dataclasses.replace(run, epochs=1), images=run.knobs.batch)
        with self._training(seen):
            self._run_train_py(module, one_batch, callbacks, ["--name", "val", "--noval", "--nosave"], seen)
        return spent[0], len(seen["val_dataset"]), (saves[0] if saves else None)

    def build_label_cache(self, data_yaml: str, workdir: Path) -> LabelCacheBuild:
        # train.py's own check_dataset on the resolved data.yaml a trial reads, then its dataset class on
        # each full split with the arguments that decide the cache (path; no image cache): the cache file
        # and hash are those of the user's own `python train.py` run.
        import numpy as np

        seen: dict[str, Any] = {}
        module = self._patched(seen)
        data = module.check_dataset(str(write_trainer_yaml(data_yaml, workdir)))
        dataset_class = seen["dataloaders"].LoadImagesAndLabels
        splits = []
        for split in ("train", "val"):
            before, started = len(seen["scans"]), time.perf_counter()
            dataset = dataset_class(data[split], img_size=640, batch_size=16, augment=False, cache_images=False, stride=32,
                                    prefix=f"{split}: ", workers=8)
            seconds = time.perf_counter() - started
            cache = _cache_file(data[split], dataset.label_files[0])
            try:
                stored = np.load(cache, allow_pickle=True).item()
            except Exception:
                raise RuntimeError(f"train.py wrote no label cache at {cache} (is {cache.parent} writable?)") from None
            splits.append(
                SplitLabels(split, str(cache.resolve()), len(dataset.im_files), seconds, len(seen["scans"]) == before,
                            str(stored["hash"]), str(stored["version"]))
            )
        return LabelCacheBuild(data_yaml, tuple(splits))

    def train(self, run: TrainRun, clock: Clock) -> EngineReport:
        knobs = run.knobs
        seen: dict[str, Any] = {"mode": run.mode, "device": run.device}
        module = self._patched(seen)
        rank, world = ddp_rank()  # under DDP each rank's loader takes batch // WORLD_SIZE (train.py)

        def check_setup() -> None:
            loader, dataset = seen["loader"], seen["dataset"]
            if loader.batch_size != knobs.batch // world:
                raise TrialRejected(
                    Status.INFEASIBLE,
                    f"batch={knobs.batch} is more than the {len(dataset)} training images: train.py would run batch={loader.batch_size * world}",
                )
            if dataset.img_size != knobs.imgsz:  # check_img_size() floors imgsz at twice the stride
                raise TrialRejected(Status.INFEASIBLE, f"imgsz={knobs.imgsz}: train.py would train at imgsz={dataset.img_size}")
            if knobs.cache == "ram" and any(im is None for im in dataset.ims):
                raise TrialRejected(
                    Status.INFEASIBLE, "cache=ram does not fit here: train.py dropped it (its RAM check found too little free RAM)"
                )
            if run.mode == "data":  # the data ceiling: train.py's own train loader, drained; no model step
                seen["as_run"] = _loader_knobs(knobs, loader, dataset)
                drain(loader, clock, lambda batch: int(batch[0].shape[0]))

        def batch_start() -> None:
            clock.batch_start()

        def batch_end(model: Any, ni: int, imgs: Any, *_: Any) -> None:
            if "as_run" not in seen:  # the first (warm-up) batch: the model is built and frozen as it will train
                seen["as_run"] = _knobs_as_run(knobs, model, seen["loader"], seen["dataset"], seen.get("amp", False))
            sync(imgs.device)
            clock.batch_end(int(imgs.shape[0]))

        callbacks = module.Callbacks()
        callbacks.register_action("on_train_start", name="speedopt", callback=check_setup)
        if rank == 0:  # train.py runs on_train_batch_end on rank 0 only: the other ranks train until the runner ends them
            callbacks.register_action("on_train_batch_start", name="speedopt", callback=batch_start)
            callbacks.register_action("on_train_batch_end", name="speedopt", callback=batch_end)
        module.validate.run = _no_validation(module.validate.run)
        with self._training(seen):
            self._run_train_py(module, run, callbacks, ["--name", "train", "--nosave"], seen)
        as_run: Knobs = seen["as_run"]
        notes = workers_note(knobs.workers, as_run.workers, "train.py caps workers at the CPU cores and at the batch size")
        mean_bytes, long_side = images_read(list(seen["dataset"].im_files))
        return EngineReport(
            knobs=as_run, images_used=len(seen["dataset"]), notes=notes, label_scan_s=float(sum(seen["scans"])),
            image_bytes_mean=mean_bytes, image_long_side=long_side,
        )


def _torch_loads_weights_only() -> bool:
    """torch >= 2.6: torch.load defaults to weights_only=True (read from the installed version, torch not imported)."""
    version = package_version("torch") or "0"
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    return (major, minor) >= (2, 6)


def _close_loaders(seen: dict[str, Any]) -> None:
    """Shut down the workers of every loader train.py built (its loaders start them at creation).

    A worker that is shut down exits cleanly and removes its temp files (multiprocessing's ``pymp-*``
    folder, made for passing tensors); one killed with the job's process group would leave them.
    """
    for loader in seen.get("loaders", ()):
        shutdown = getattr(getattr(loader, "iterator", None), "_shutdown_workers", None)
        if shutdown is not None:
            with contextlib.suppress(Exception):
                shutdown()


def _no_validation(real: Callable[..., Any]) -> Callable[..., Any]:

    """A validation pass that returns at once with zero scores, in the shape ``real`` returns.

    A trial's window may cross an epoch end (a small train set, a long window). ``--noval`` cannot
    keep validation out of it: the yolov5 package's train.py then fails at the first non-final epoch
    end (its ``map50s`` is only set by validation). So trials validate every epoch, instantly; the
    projection times the real validation pass separately. The package's val.run returns
    (results, maps, map50s, times), upstream's (results, maps, times).
    """
    import numpy as np

    with_map50s = "map50s" in inspect.getsource(real)

    def instant(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        nc = int(getattr(kwargs.get("model"), "nc", 1))
        results = (0.0,) * 7
        return (results, np.zeros(nc), np.zeros(nc), (0.0, 0.0, 0.0)) if with_map50s else (results, np.zeros(nc), (0.0, 0.0, 0.0))

    return instant


def _probe_train_run(run: ProbeRun, images: int | None = None) -> TrainRun:
    """A probe as a training run on a leading subset: ``images``, else its fraction of the train set (a count
    when above 1), at least one batch. The train set is listed once, here: a probe job carries no listing."""
    train = load(run.data_yaml).train_images
    if images is None:
        count = int(run.fraction) if run.fraction > 1 else round(len(train) * run.fraction)
        images = max(count, run.knobs.batch)
    images = min(len(train), images)
    subset = tuple(map(str, train[:images])) if images < len(train) else ()
    return TrainRun(run.data_yaml, run.knobs, run.device, images, len(train), run.epochs, run.workdir, run.seed, train_subset=subset)


def _patch_module(module: Any, seen: dict[str, Any]) -> None:
    """Every patch of this engine (see the module docstring), applied to train.py's own namespace.

    ``seen`` gets what the patched functions observe: ``amp`` (what check_amp chose), ``loader`` and
    ``dataset`` (the train loader train.py built), ``loaders`` (every loader, for :func:`_close_loaders`).
    """
    import numpy as np

    if not hasattr(np, "trapz"):
        np.trapz = np.trapezoid  # type: ignore[attr-defined]
    module.check_git_status = lambda *args, **kwargs: None
    module.check_requirements = lambda *args, **kwargs: None
    module.Loggers = _NoLoggers
    if hasattr(module, "attempt_download_from_hub"):
        module.attempt_download_from_hub = lambda *args, **kwargs: None

    def amp_rule(model: Any) -> bool:
        # check_amp() minus its self-check: AMP on exactly on CUDA, as train.py decides when the check passes.
        seen["amp"] = next(model.parameters()).device.type == "cuda"
        return bool(seen["amp"])

    module.check_amp = amp_rule
    create_dataloader = module.create_dataloader
    dataloaders = sys.modules[create_dataloader.__module__]
    dataset_class = dataloaders.LoadImagesAndLabels
    if "_speedopt_scan" not in dataset_class.__dict__:  # once per process: the original stays on the class
        dataset_class._speedopt_scan = dataset_class.cache_labels
    seen["dataloaders"], seen["scans"] = dataloaders, []
    dataset_class.cache_labels = timed(dataset_class._speedopt_scan, seen["scans"])

    def recorded(*args: Any, **kwargs: Any) -> Any:
        loader, dataset = create_dataloader(*args, **kwargs)
        seen.setdefault("loaders", []).append(loader)
        if kwargs.get("augment") and "loader" not in seen:  # the train loader (validation's has no augment)
            seen["loader"], seen["dataset"] = loader, dataset
            if seen.get("mode") == "compute":  # the compute ceiling: train.py's loop gets one batch, kept on the device
                return SameBatch(loader, lambda batch: to_device(batch, _torch_device(seen["device"]))), dataset
        elif not kwargs.get("augment"):
            seen.setdefault("val_dataset", dataset)
        return loader, dataset

    module.create_dataloader = recorded


def _trial_data(run: TrainRun, dataloaders: Any) -> str:
    """The data.yaml train.py reads: the user's with every path absolute (:func:`speedopt.data.write_trainer_yaml`:
    train.py resolves a relative ``path`` against its own folder, speedopt as Ultralytics does) and, for a
    subset, ``train`` a list of the subset's images in the trial folder, with its label cache seeded from
    the full split's where the study built one (see the module docstring)."""
    out = write_trainer_yaml(run.data_yaml, run.workdir)
    if not run.train_subset:
        return str(out)
    data = yaml.safe_load(out.read_text())
    subset = run.workdir / "train-subset.txt"
    subset.write_text("".join(f"{p}\n" for p in trainer_paths(run.train_subset)))
    data["train"] = str(subset)
    full = built_split(run.label_caches, "train")
    if full is not None:
        _seed_subset_cache(subset, full, dataloaders)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


def _cache_file(split: str | list[str], first_label: str) -> Path:
    """Where LoadImagesAndLabels keeps a split's label cache: beside a list file, else beside the label folder."""
    last = Path(split[-1] if isinstance(split, list) else split)
    return (last if last.is_file() else Path(first_label).parent).with_suffix(".cache")


def _seed_subset_cache(subset: Path, full: SplitLabels, dataloaders: Any) -> bool:
    """Write the subset list's label cache from the full split's (a file train.py then finds valid); False,
    writing nothing, when the full file is not the one the study built or lacks a subset image."""
    import numpy as np

    version = dataloaders.LoadImagesAndLabels.cache_version
    try:
        cache = np.load(full.cache, allow_pickle=True).item()
    except Exception:  # missing, truncated, not a cache
        return False
    if cache.get("version") != version or str(cache.get("version")) != full.version or cache.get("hash") != full.hash:
        return False
    # The subset's files as LoadImagesAndLabels lists a list file: its lines, sorted, images only.
    lines = subset.read_text().strip().splitlines()
    images = sorted(x.replace("/", os.sep) for x in lines if x.split(".")[-1].lower() in dataloaders.IMG_FORMATS)
    entries = {k: v for k, v in cache.items() if k not in ("hash", "results", "msgs", "version")}
    picked = subset_entries(entries, images, cache.get("msgs") or ())
    if picked is None:
        return False
    found, corrupt = picked
    seeded: dict[str, Any] = dict(found)
    labelled = sum(len(entry[0]) > 0 for _, entry in found)
    seeded["hash"] = dataloaders.get_hash(dataloaders.img2label_paths(images) + images)
    seeded["results"] = (labelled, 0, len(found) - labelled, corrupt, len(images))  # found, missing, empty, corrupt, total
    seeded["msgs"] = []
    seeded["version"] = version
    with open(subset.with_suffix(".cache"), "wb") as file:
        np.save(file, np.array(seeded, dtype=object), allow_pickle=True)
    return True


def _torch_device(device: str) -> Any:
    """train.py's device for ``--device``: the CPU, or the first GPU listed (a ceiling runs on one)."""
    import torch

    return torch.device("cpu") if device == "cpu" else torch.device("cuda", int(device.split(",")[0]))


def _knobs_as_run(asked: Knobs, model: Any, loader: Any, dataset: Any, amp: bool) -> Knobs:
    """Every knob read back from the running trainer: loader, dataset and the model as it trains."""
    model = getattr(model, "module", model)  # DataParallel / DDP
    name = asked.model
    if asked.model in MODEL_SCALES:
        name = Path(getattr(model, "yaml_file", "") or asked.model).stem
    return dataclasses.replace(
        _loader_knobs(asked, loader, dataset), model=name, amp=bool(amp), freeze=frozen_prefix(model.named_parameters())
    )


def _loader_knobs(asked: Knobs, loader: Any, dataset: Any) -> Knobs:
    """The data knobs read back from train.py's train loader and dataset (the model's as asked)."""
    if all(im is not None for im in dataset.ims):
        cache = "ram"
    elif asked.cache == "disk" and all(Path(f).exists() for f in dataset.npy_files):
        cache = "disk"
    else:
        cache = "none"
    return Knobs(
        model=asked.model,
        imgsz=int(dataset.img_size),
        batch=int(loader.batch_size),
        workers=int(loader.num_workers),
        cache=cache,
        amp=asked.amp,
        freeze=asked.freeze,
        data=asked.data,  # which data.yaml train.py got; images_read() reports what it read
    )
