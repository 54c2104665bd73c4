"""The classic engine: trials of ultralytics/yolov5 ``train.py`` (the anchor-based original YOLOv5).

The code comes from a user's checkout (``--yolov5-dir PATH``, imported from there) or from the
``yolov5`` package (``pip install 'speedopt[yolov5]'``): see :mod:`speedopt.engines._yolov5_checkout`.
A trial hands ``train.py``'s own ``parse_opt()`` the very flags speedopt prints for the config
(:func:`speedopt._trainer_args.train_py_args`, below both this engine and :mod:`speedopt.command`) plus
trial-only ones (a private project folder, no validation, no checkpoints, no plots) and runs
``main(opt, callbacks)``.

Hooks, all in the trainer's own :class:`Callbacks`: ``on_train_batch_start`` (fired as soon as the
loader yielded a batch) and ``on_train_batch_end`` (after the optimizer step; it gets the model and
the images; rank 0 only under DDP) drive the step clock; ``on_train_start`` checks the set-up.
train.py keeps its loader in a local variable, so its ``create_dataloader`` is wrapped (not replaced)
to read back what the loader really runs (:mod:`speedopt.engines._yolov5_readback`): workers (capped at
the CPU cores and the batch), batch (capped at the dataset size), image size (floored at twice the
stride) and cache (``cache=ram`` silently dropped when RAM looks short).

AMP has no switch in train.py: ``check_amp()`` turns it on for CUDA after a self-check that
downloads ``yolov5n.pt`` and off on CPU. The engine keeps that rule and skips the download, so the
``amp`` knob is fixed for this engine (see :meth:`Yolov5Engine.fixed_knobs`).

Every patch, applied inside the job process only, to train.py's own namespace (nothing of the user's
checkout is written), is listed in :mod:`speedopt.engines._yolov5_patches`; the data.yaml a trial hands
train.py, its training subset and the subset's label cache (seeded from the full split's, so a subset
scans nothing) in :mod:`speedopt.engines._yolov5_data`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from speedopt._trainer_args import train_py_args
from speedopt.data import write_trainer_yaml
from speedopt.engines._base import Clock, Engine, EngineReport, LabelCacheBuild, ProbeRun, ProbeScores, SplitLabels, TrainRun
from speedopt.engines._common import ddp_rank, drain, images_read, package_version, preload_modules, scan_counts, sync, timed, workers_note
from speedopt.engines._flops import forward_gflops
from speedopt.engines._ultralytics_settings import apply_settings, settings_env
from speedopt.engines._yolov5_checkout import checkout_root, checkout_version, import_train
from speedopt.engines._yolov5_data import cache_file, label_dataset, probe_train_run, trial_data
from speedopt.engines._yolov5_patches import close_loaders, no_validation, patch_module
from speedopt.engines._yolov5_readback import knobs_as_run, loader_knobs
from speedopt.knobs import Knobs
from speedopt.offline import place_font
from speedopt.status import Status, TrialFinished, TrialRejected

_AMP_REASON = (
    "the classic train.py has no AMP switch: it runs AMP exactly on CUDA "
    "(its AMP self-check, which downloads yolov5n.pt, is skipped offline)"
)


WARMUP_FLOOR = 100  # train.py's least warm-up iterations: a trial's window lies inside them (docs/trial.md)


class Yolov5Engine(Engine):
    name = "yolov5"
    install_hint = "pip install 'speedopt[yolov5]', or give --yolov5-dir PATH (a clone of ultralytics/yolov5)"
    supports_probe = True
    supports_validation_timing = True
    supports_label_cache = True
    supports_ceilings = True
    ddp_devices = ("cuda",)  # train.py main() sets DDP up under torch.distributed.run (NCCL)
    dialect = "train.py"  # python train.py --flag ... in the checkout (or python -m yolov5.train)

    def __init__(self, yolov5_dir: str | None = None):
        self.root = checkout_root(yolov5_dir) if yolov5_dir else None

    def version(self) -> str | None:
        if self.root is not None:
            return checkout_version(self.root)
        return package_version("yolov5")

    def fixed_knobs(self, device: str) -> dict[str, tuple[Any, str]]:
        return {**super().fixed_knobs(device), "amp": (device != "cpu", _AMP_REASON)}

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
            # The classic code imports ultralytics (today's master builds on it): the same private, offline settings.
            **settings_env(cache_dir),
            # check_font() looks for Arial.ttf here before downloading it; a private folder, speedopt's font.
            "YOLOV5_CONFIG_DIR": str(cache_dir / "yolov5-config"),
            # check_requirements() would pip-install missing packages (a subprocess our network guard cannot see).
            "YOLOv5_AUTOINSTALL": "false",
            "YOLO_AUTOINSTALL": "false",
        }

    def prepare(self, cache_dir: Path) -> None:
        apply_settings(cache_dir)
        place_font(cache_dir / "yolov5-config")

    # torch_threads: the base rule. train.py imports torch before its utils/general.py sets OMP_NUM_THREADS.

    def _import_train(self) -> ModuleType:
        """train.py as a module: from the checkout (its own utils/, models/ first on sys.path) or the package."""
        return import_train(self.root, self.install_hint)

    def _run_train_py(self, module: ModuleType, run: TrainRun, callbacks: Any, trial_only: list[str], seen: dict[str, Any]) -> None:
        """train.py's own parser on the flags speedopt prints (plus ``trial_only``), then its main()."""
        argv = train_py_args(trial_data(run, seen["dataloaders"]), run.knobs, device=run.device, epochs=run.epochs, weights=run.weights)
        argv += ["--project", str(run.workdir), "--exist-ok", "--noplots", "--seed", str(run.seed), *trial_only]
        saved, sys.argv = sys.argv, ["train.py", *argv]
        try:
            opt = module.parse_opt()  # train.py's own parser reads the command speedopt prints
        finally:
            sys.argv = saved
        module.main(opt, callbacks)

    def _patched(self, seen: dict[str, Any]) -> ModuleType:
        module = self._import_train()
        patch_module(module, seen)
        return module

    @contextlib.contextmanager
    def _training(self, seen: dict[str, Any]) -> Iterator[None]:
        """train.py runs in the block; its stop (TrialFinished) ends it, and its loaders' workers are shut down."""
        try:
            with contextlib.suppress(TrialFinished):
                yield
        finally:
            close_loaders(seen)

    @property
    def checkout(self) -> Path | None:
        return self.root

    def warmup_epochs(self, epochs: int, per_epoch: int) -> float:
        # train.py warms up max(round(warmup_epochs x batches per epoch), 100) iterations (hyp warmup_epochs 3.0)
        return min(float(epochs), max(3.0 * per_epoch, WARMUP_FLOOR) / max(per_epoch, 1))

    def preload(self) -> None:
        # Not train.py nor any yolov5 module: train.py makes its default paths (--hyp, --cfg) relative to the
        # working directory at import, which is the job's own folder only in the job's process. Only the
        # libraries they import that hold no such state (measured: ~3.8 s of each forked job's set-up here);
        # matplotlib reads a matplotlibrc in the working directory, so preload_modules imports from an empty one.
        super().preload()
        preload_modules("scipy.stats", "pandas", "torchvision", "cv2", "matplotlib.pyplot", "seaborn")

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
        train_run = probe_train_run(run)
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
        one_batch = probe_train_run(dataclasses.replace(run, epochs=1), images=run.knobs.batch)
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
            dataset = label_dataset(dataset_class, data[split], f"{split}: ")
            seconds = time.perf_counter() - started
            cache = cache_file(data[split], dataset.label_files[0])
            try:
                stored = np.load(cache, allow_pickle=True).item()
            except Exception:
                raise RuntimeError(f"train.py wrote no label cache at {cache} (is {cache.parent} writable?)") from None
            splits.append(
                SplitLabels(split, str(cache.resolve()), len(dataset.im_files), seconds, len(seen["scans"]) == before,
                            str(stored["hash"]), str(stored["version"]), **scan_counts(stored))
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
                seen["as_run"] = loader_knobs(knobs, loader, dataset)
                drain(loader, clock, lambda batch: int(batch[0].shape[0]))

        def batch_start() -> None:
            clock.batch_start()

        def batch_end(model: Any, ni: int, imgs: Any, *_: Any) -> None:
            if "as_run" not in seen:  # the first (warm-up) batch: the model is built and frozen as it will train
                seen["as_run"] = knobs_as_run(knobs, model, seen["loader"], seen["dataset"], seen.get("amp", False))
                seen["model"] = model  # its FLOPs are counted after the window
            sync(imgs.device)
            clock.batch_end(int(imgs.shape[0]))

        callbacks = module.Callbacks()
        callbacks.register_action("on_train_start", name="speedopt", callback=check_setup)
        if rank == 0:  # train.py runs on_train_batch_end on rank 0 only: the other ranks train until the runner ends them
            callbacks.register_action("on_train_batch_start", name="speedopt", callback=batch_start)
            callbacks.register_action("on_train_batch_end", name="speedopt", callback=batch_end)
        module.validate.run = no_validation(module.validate.run)
        with self._training(seen):
            self._run_train_py(module, run, callbacks, ["--name", "train", "--nosave"], seen)
        as_run: Knobs = seen["as_run"]
        notes = workers_note(knobs.workers, as_run.workers, "train.py caps workers at the CPU cores and at the batch size")
        mean_bytes, long_side = images_read(list(seen["dataset"].im_files))
        gflops, how = forward_gflops(seen["model"], as_run.imgsz) if "model" in seen else (None, "no model step in this job")
        return EngineReport(
            knobs=as_run, images_used=len(seen["dataset"]), notes=notes, label_scan_s=float(sum(seen["scans"])),
            image_bytes_mean=mean_bytes, image_long_side=long_side, forward_gflops=gflops, flops_how=how,
            optimizer="SGD",  # train.py's own default (--optimizer SGD), whatever the run's length
        )


def _torch_loads_weights_only() -> bool:
    """torch >= 2.6: torch.load defaults to weights_only=True (read from the installed version, torch not imported)."""
    version = package_version("torch") or "0"
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    return (major, minor) >= (2, 6)
