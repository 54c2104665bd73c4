"""The Ultralytics engine: trials of ``ultralytics`` DetectionTrainer on YOLOv5 architectures.

Ultralytics >= 8.3 trains ``yolov5n.yaml`` ... ``yolov5x.yaml`` as YOLOv5u (anchor-free head).
On CPU the trainer forces ``workers=0`` (``yolo detect train`` does the same, whatever the command
says), so on CPU the engine fixes the workers knob at 0 (:meth:`UltralyticsEngine.fixed_knobs`): a
trial runs what the user's real run will. Hooks used: ``on_train_start`` (cache, AMP and imgsz read back:
:mod:`speedopt.engines._silent`), ``on_train_batch_start`` (the batch read back, then the step clock) /
``on_train_batch_end`` (the step clock), ``on_train_epoch_end`` (probe progress).

Patches, all applied inside the job process only, in :func:`_patch_module` (the trainer module)
and :func:`_patch_trainer` (one trainer instance):

- ``ultralytics.engine.trainer.check_amp`` -> always passes: the real one downloads yolo26n.pt to
  compare FP32 and AMP outputs; speedopt measures AMP as asked and judges accuracy with its probes.
- ``trainer.build_dataset`` -> timed (the projection's one-time label scan and cache fill);
- ``trainer.preprocess_batch`` -> counts the images of each batch (the last batch may be short);
- ``trainer.validate`` -> timed (the projection's validation pass);
- ``trainer.final_eval`` -> nothing, in probes (it validates best.pt, the same weights, again);
- ``YOLODataset.get_img_files`` -> a split folder listed by speedopt (:func:`speedopt.data.list_images`, as the
  parent listed it: no link back into the tree followed), handed to the trainer's own code as a list file;
- ``YOLODataset.cache_labels`` (the label scan) -> timed (a trial's ``label_scan_s``), and for a subset
  (a trial's ``fraction=<count>``, a probe's fraction) written in the job's private folder: the trainer
  names the cache after the label folder, so it would overwrite the user's full ``labels/train.cache``;
- ``YOLODataset._load_or_scan_cache`` -> for a subset, first the full split's cache that the study's
  labels job built (:meth:`UltralyticsEngine.build_label_cache`), when the file still holds the
  recorded hash and trainer cache version and has every subset image: the subset's labels are taken
  from it, nothing scanned, nothing written. Otherwise the trainer's own logic.

The optimizer and its cadence (:mod:`speedopt.engines._ultralytics_optim`): ``trainer.build_optimizer`` is handed
the user's whole run's iterations, so ``optimizer=auto`` resolves as in that run (trials and probes); the trainer's
warm-up ramp is ended within the trial's own warm-up batches (``trainer._get_warmup_iterations``), so the window steps
the optimizer and the EMA at the run's steady cadence; ``trainer.optimizer_step`` is timed.

A trial's window crosses an epoch end when the train set holds fewer images than its batches: the
trainer then runs its epoch-end work (scheduler, EMA attributes, a new pass of the loader; with
``val=False`` no validation before the final epoch, with ``save=False`` no checkpoint) and the step
clock counts it in the next step, as waiting for data (see :class:`~speedopt.measure._clock.StepClock`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from speedopt import machine
from speedopt._trainer_args import model_argument
from speedopt.data import write_trainer_yaml
from speedopt.engines import _compile
from speedopt.engines._base import Clock, Engine, EngineReport, LabelCacheBuild, ProbeRun, ProbeScores, SplitLabels, TrainRun
from speedopt.engines._common import (
    SameBatch,
    drain,
    frozen_prefix,
    images_read,
    package_version,
    preload_modules,
    scan_counts,
    sync,
    timed,
    to_device,
    workers_note,
)
from speedopt.engines._flops import forward_gflops
from speedopt.engines._silent import reject, silent_changes
from speedopt.engines._ultralytics_cfg import close_mosaic, compile_modes, miniature, warmup_epochs
from speedopt.engines._ultralytics_labels import patch_labels
from speedopt.engines._ultralytics_optim import resolve, run_iterations, run_optimizer, steady_cadence, warmup_steps
from speedopt.engines._ultralytics_settings import apply_settings, settings_env
from speedopt.knobs import COMPILE_OFF, MODEL_SCALES, ChannelsLast, Knobs, Precision, yolo_args
from speedopt.status import Status, TrialFinished, TrialRejected

CPU_WORKERS_REASON = (
    "on CPU `yolo detect train` runs 0 dataloader workers whatever the command says "
    "(the trainer sets workers=0 on CPU), so the trial runs 0 as the real run will"
)


def _patch_module() -> None:
    """The module-level patch (see the module docstring): no AMP self-check download."""
    import ultralytics.engine.trainer as trainer_module

    trainer_module.check_amp = lambda model: True


def _patch_trainer(
    trainer: Any, images: dict[str, Any] | None = None, eager_reference: bool = False
) -> tuple[dict[str, float], list[float]]:
    """The instance patches (see the module docstring); returns the dataset build times by mode and
    the validation times, both filled as they happen. ``images`` gets each batch's image count, and with
    ``eager_reference`` the eager model's loss on the first batch (``eager_loss``: the compile check)."""
    builds: dict[str, float] = {}
    build = trainer.build_dataset

    def timed_build(img_path: str, mode: str = "train", batch: int | None = None) -> Any:
        started = time.perf_counter()
        dataset = build(img_path, mode=mode, batch=batch)
        builds[mode] = time.perf_counter() - started
        return dataset

    trainer.build_dataset = timed_build
    validations: list[float] = []
    trainer.validate = timed(trainer.validate, validations)
    if images is not None:
        preprocess = trainer.preprocess_batch

        def counted(batch: dict[str, Any]) -> Any:
            images["last"] = int(batch["img"].shape[0])
            ready = preprocess(batch)
            if eager_reference and "eager_loss" not in images:
                images["eager_loss"] = _compile.eager_loss(trainer, ready)
            return ready

        trainer.preprocess_batch = counted
    return builds, validations


class UltralyticsEngine(Engine):
    name = "ultralytics"
    supports_probe = True
    supports_validation_timing = True
    supports_label_cache = True
    supports_ceilings = True
    ddp_devices = ("cuda",)  # device=0,1 under torch.distributed.run: the trainer sets DDP up itself (NCCL)
    prefetch_batches = 4  # ultralytics.data.build: prefetch_factor=4 for the shuffled train loader
    dialect = "yolo"  # yolo detect train ... (and YOLO(...).train(...))
    lossless_copy_exact = True  # its loader resizes as speedopt prepare does (speedopt.data._prepare)

    def version(self) -> str | None:
        return package_version("ultralytics")

    honours = frozenset({"compile", "channels_last", "deterministic"})

    def fixed_knobs(self, device: str) -> dict[str, tuple[Any, str]]:
        fixed = super().fixed_knobs(device)
        if device == "cpu":
            fixed["workers"] = (0, CPU_WORKERS_REASON)
        return fixed

    def accepted(self, device: str) -> dict[str, tuple[tuple[Any, ...], str]]:
        out: dict[str, tuple[tuple[Any, ...], str]] = {"compile": ((COMPILE_OFF, *compile_modes()), f"the modes the installed Ultralytics {self.version()} lists")}
        if device != "cpu" and not machine.bf16_supported(device):
            out["amp"] = ((True, False), "bf16 needs a GPU with bfloat16 (compute capability 8.0 or newer)")
        return out

    def silent_rules(self) -> dict[str, str]:
        return dict(_SILENT_RULES)

    def mosaic_off_epochs(self, epochs: int) -> int:
        return min(epochs, close_mosaic())  # the user's command leaves close_mosaic at the trainer's default

    def optimizer_args(self, train_images: int, batch: int, epochs: int, classes: int) -> tuple[str, ...]:
        return resolve(train_images, batch, epochs, classes).args()

    def warmup_epochs(self, epochs: int, per_epoch: int) -> float:
        return min(warmup_epochs(), max(epochs - 1, 0))  # BaseTrainer._get_warmup_iterations: the last epoch is never in it

    def warmup_steps(self, train_images: int, batch: int, epochs: int) -> tuple[int, float] | None:
        return warmup_steps(train_images, batch, epochs, warmup_epochs())

    def environment(self, cache_dir: Path) -> dict[str, str]:
        return settings_env(cache_dir)  # private, offline settings (shared with the classic engine)

    def torch_threads(self, omp_env: str | None, torch_default: int) -> int:
        # `yolo` and `from ultralytics import YOLO` import ultralytics before torch, and ultralytics sets
        # OMP_NUM_THREADS=1 when it is unset; on the CPU the trainer's select_device() then sets its own
        # NUM_THREADS, in a trial as in the real run.
        return super().torch_threads(omp_env, 1)

    def prepare(self, cache_dir: Path) -> None:
        apply_settings(cache_dir)  # the datasets_dir it sets is never read: trials hand an absolute data.yaml (_trainer_data)

    def preload(self) -> None:
        super().preload()
        import ultralytics.data.build
        import ultralytics.models.yolo.detect  # noqa: F401

        # What every trainer imports once it runs (measured in forked jobs: ~0.9 s each): torchvision (the
        # validator's NMS), thop (the model summary's FLOPs) and matplotlib's font list (check_font, which
        # every dataset check calls), where installed.
        preload_modules("torchvision", "thop", "matplotlib.font_manager")

    def probe(self, run: ProbeRun, progress: Callable[[int, int], None]) -> ProbeScores:
        trainer = _probe_trainer(run, lambda t: progress(t.epoch + 1, t.epochs))
        trainer.train()
        metrics = trainer.metrics or {}
        return ProbeScores(
            map50=float(metrics.get("metrics/mAP50(B)", 0.0)),
            map50_95=float(metrics.get("metrics/mAP50-95(B)", 0.0)),
            images=len(trainer.train_loader.dataset),
            optimizer=str(trainer.args.optimizer),
        )

    def time_validation(self, run: ProbeRun) -> tuple[float, int, float | None]:
        # One epoch on one batch, then the epoch-end validation the trainer runs every epoch, timed; then
        # its epoch-end save_model() (last.pt, and best.pt: the first epoch always improves), timed, in the
        # job's private folder.
        one_batch = dataclasses.replace(run, epochs=1, fraction=run.knobs.batch)
        trainer = _probe_trainer(one_batch, lambda t: None)
        _, spent = _patch_trainer(trainer)
        saves: list[float] = []
        trainer.save_model = timed(trainer.save_model, saves)
        trainer.train()
        return spent[-1], len(trainer.test_loader.dataset), (saves[-1] if saves else None)

    def build_label_cache(self, data_yaml: str, workdir: Path) -> LabelCacheBuild:
        # The trainer's own dataset builder on the full splits, with the data dict its trainer makes from
        # the same resolved data.yaml as a trial's: the cache file and its hash are the real run's.
        from ultralytics.cfg import get_cfg
        from ultralytics.data import build_yolo_dataset
        from ultralytics.data.utils import check_det_dataset, load_dataset_cache_file

        data = check_det_dataset(_trainer_data(data_yaml, workdir))
        cfg = get_cfg(overrides={"task": "detect"})
        scans: list[float] = []
        patch_labels(workdir, (), scans)
        splits = []
        for split in ("train", "val"):
            before, started = len(scans), time.perf_counter()
            dataset = build_yolo_dataset(cfg, data[split], 16, data, mode=split, stride=32)
            seconds = time.perf_counter() - started
            cache = Path(dataset.label_files[0]).parent.with_suffix(".cache")
            try:
                stored = load_dataset_cache_file(cache)
            except Exception:
                raise RuntimeError(f"the trainer wrote no label cache at {cache} (is {cache.parent} writable?)") from None
            splits.append(SplitLabels(
                split, str(cache.resolve()), len(dataset.labels), seconds, len(scans) == before, str(stored["hash"]),
                str(stored["version"]), **scan_counts(stored),
            ))
        return LabelCacheBuild(data_yaml, tuple(splits))

    def train(self, run: TrainRun, clock: Clock) -> EngineReport:
        from ultralytics.models.yolo.detect import DetectionTrainer
        from ultralytics.utils import callbacks
        from ultralytics.utils.torch_utils import get_flops

        knobs = run.knobs
        _patch_module()
        scans: list[float] = []
        patch_labels(run.workdir, run.label_caches, scans)
        seen: dict[str, Any] = {}  # filled by the hooks below
        images = {"last": knobs.batch}

        def check_setup(trainer: Any) -> None:
            dataset = trainer.train_loader.dataset
            seen["im_files"] = list(dataset.im_files)
            seen["as_run"] = as_run = _knobs_as_run(trainer, knobs)
            seen["images_used"] = len(dataset)
            seen["accumulate"] = int(trainer.accumulate)  # the nominal cadence: the window steps the optimizer at it
            clock.cycle(seen["accumulate"])
            reject(silent_changes(knobs, as_run, _SILENT_RULES, ("cache", "amp", "imgsz", "compile", "channels_last",
                                                                 "deterministic")))
            _ceiling_mode(trainer, run.mode, clock)

        def batch_start(trainer: Any) -> None:  # the batch is read again at every step: OOM halving comes later
            reject(silent_changes(knobs, dataclasses.replace(knobs, batch=int(trainer.batch_size)), _SILENT_RULES, ("batch",)))
            seen["stepped"] = True
            clock.batch_start()

        def batch_end(trainer: Any) -> None:
            sync(trainer.device)
            if "eager_loss" in images and "compiled_loss" not in seen:  # the first step's loss, before the clock ends it
                seen["compiled_loss"] = float(trainer.loss) / max(1, int(getattr(trainer, "world_size", 1) or 1))
                seen["loss_gap"] = _compile.check_loss(float(images["eager_loss"]), seen["compiled_loss"], knobs.compile)
            clock.batch_end(images["last"])

        hooks = callbacks.get_default_callbacks()
        hooks["on_train_start"].append(check_setup)
        hooks["on_train_batch_start"].append(batch_start)
        hooks["on_train_batch_end"].append(batch_end)
        trainer = DetectionTrainer(overrides=_train_overrides(run), _callbacks=hooks)
        builds, _ = _patch_trainer(trainer, images, eager_reference=knobs.compile != COMPILE_OFF and run.mode == "train")
        optimizer = run_optimizer(trainer, run_iterations(run.images_total, knobs.batch, run.epochs))
        steady_cadence(trainer, clock.warmup)
        _guard_mosaic(trainer, seen)
        try:
            trainer.train()
        except TrialFinished:
            pass
        except Exception as exc:
            if knobs.compile != COMPILE_OFF and _compile.is_compile_error(exc):
                raise _compile.failure(exc, knobs.compile) from None
            raise
        finally:
            for name in ("train_loader", "test_loader"):
                close = getattr(getattr(trainer, name, None), "close", None)
                if close is not None:
                    close()
        as_run: Knobs = seen["as_run"]
        chosen = optimizer.get("chosen")
        why = "the trainer runs 0 on CPU and caps workers at the CPU cores and at the batches per epoch"
        gflops, how = forward_gflops(trainer.model, as_run.imgsz, ("Ultralytics' get_flops", get_flops))
        return EngineReport(
            knobs=as_run,
            images_used=int(seen["images_used"]),
            notes=workers_note(knobs.workers, as_run.workers, why),
            train_build_s=builds.get("train"),
            val_build_s=builds.get("val"),
            val_images=len(trainer.test_loader.dataset),
            label_scan_s=float(sum(scans)),
            compile_loss_gap=seen.get("loss_gap"),
            forward_gflops=gflops,
            flops_how=how,
            optimizer=chosen.name if chosen else "",
            optimizer_args=chosen.args() if chosen else (),
            optimizer_step_s=_median(optimizer["step_s"]),
            accumulate=seen.get("accumulate"),
            optimizer_step_at=tuple(optimizer["step_at"]),
            **_images_read(seen),
        )


def _guard_mosaic(trainer: Any, seen: dict[str, Any]) -> None:
    """A trial never measures a window in which mosaic is already off (issue 31). The trainer turns mosaic off
    for the run's last ``close_mosaic`` epochs, and a mosaic sample loads four images: a window that crosses into
    them measures another loader. Closing before the first step is the real run's own start (its epochs are
    ``close_mosaic`` or fewer): that is measured as it runs. Closing after a step has run ends the trial as
    infeasible, with the fix."""
    close = trainer._close_dataloader_mosaic

    def closing() -> None:
        if seen.get("stepped"):
            n, epochs = trainer.args.close_mosaic, trainer.epochs
            raise TrialRejected(
                Status.INFEASIBLE,
                f"the trial reached the last close_mosaic={n} epochs of its {epochs}-epoch schedule, where the trainer "
                "turns mosaic off, so its window would measure another loader; give more train images, fewer --steps, "
                f"or --epochs well above {n}",
            )
        close()

    trainer._close_dataloader_mosaic = closing


#: Why the Ultralytics trainer runs a watched knob otherwise than asked (:mod:`speedopt.engines._silent`).
_SILENT_RULES = {
        "batch": "out of memory in the first epoch: the trainer halves the batch and goes on",
        "cache": "its space check found too little free RAM or disk, or an image folder not writable: it caches nothing",
        "amp": "its AMP check failed, so it trains in FP32",
        "imgsz": "it rounds imgsz to the model's stride",
        "compile": "its attempt_compile found no working inductor backend (a C++ compiler on the CPU, Triton on CUDA) "
        "and trains the eager model",
        "channels_last": "channels_last is CUDA-only: the trainer ignores it on other devices",
        "deterministic": "its init_seeds sets torch's deterministic algorithms only on torch 2.0 or newer",
}


def _ceiling_mode(trainer: Any, mode: str, clock: Clock) -> None:
    """After the trainer's set-up: drain its train loader (``data``, or ``data-no-mosaic`` with mosaic turned off
    first as the trainer does for its last epochs: returns only through the clock's
    TrialFinished), or hand its loop one batch kept on the device (``compute``); ``train``: nothing."""
    if mode == "data-no-mosaic":  # the loader of the run's last close_mosaic epochs: the trainer's own switch
        trainer._close_dataloader_mosaic()  # before any step: the mosaic guard lets it through
    if mode in ("data", "data-no-mosaic"):
        drain(trainer.train_loader, clock, lambda batch: int(batch["img"].shape[0]))
    elif mode == "compute":
        trainer.train_loader = SameBatch(trainer.train_loader, lambda batch: to_device(batch, trainer.device))


def _trainer_data(data_yaml: str, workdir: Path) -> str:
    """The data.yaml the trainer reads: the user's, resolved as their own `yolo` run resolves it (working
    directory, then datasets_dir: see speedopt.data), with every path absolute and no ``download:``,
    written in the trial's private folder. The trial's temporary working directory and private
    settings then cannot send the trainer elsewhere, or to a download."""
    return str(write_trainer_yaml(data_yaml, workdir))


def _train_overrides(run: TrainRun) -> dict[str, Any]:
    """The trainer's arguments for a speed trial: the knobs, the full run's schedule, nothing saved."""
    knobs = run.knobs
    return {
        "model": model_argument(knobs.model),
        "data": _trainer_data(run.data_yaml, run.workdir),
        **yolo_args(knobs, newer="all"),  # the registry's keys and values, as the printed command spells them
        "device": run.device,
        "epochs": run.epochs,
        "optimizer": run.optimizer,  # auto: resolved for the full run (engines._ultralytics_optim.run_optimizer)
        "fraction": run.images if run.images < run.images_total else 1.0,
        "project": str(run.workdir),
        "name": "train",
        "exist_ok": True,
        "plots": False,
        "val": False,
        "save": False,
        "seed": run.seed,
    }


def _probe_trainer(run: ProbeRun, on_epoch_end: Callable[[Any], None]) -> Any:
    """A trainer for a quality probe: fixed budget and seed, deterministic, plots off."""
    from ultralytics.models.yolo.detect import DetectionTrainer
    from ultralytics.utils import callbacks

    knobs = run.knobs
    _patch_module()
    patch_labels(run.workdir, (), [])  # a probe's subset never overwrites the user's label cache
    overrides = {
        "model": model_argument(knobs.model),
        "pretrained": run.weights or False,
        "data": _trainer_data(run.data_yaml, run.workdir),
        **yolo_args(knobs, newer="none"),  # the registry's keys (a cache caches the val split too); no newer knob:
        "device": run.device,  # compile and channels_last change no model, deterministic is set below
        "epochs": run.epochs,
        "fraction": run.fraction,
        **miniature(run.epochs, run.run_epochs),  # the user's run in miniature: its closing no-mosaic share

        "seed": run.seed,
        # Always on in a probe, whatever the knob: the judge compares candidate and baseline seed by seed, and a
        # paired difference means something only when each run is reproducible; the knob is outside the accuracy
        # signature, so no probe is ever asked for it.
        "deterministic": True,
        "project": str(run.workdir),
        "name": "probe",
        "exist_ok": True,
        "plots": False,
        "val": False,  # the last epoch still validates: that is the probe's score
    }
    hooks = callbacks.get_default_callbacks()
    hooks["on_train_epoch_end"].append(on_epoch_end)
    trainer = DetectionTrainer(overrides=overrides, _callbacks=hooks)
    trainer.final_eval = lambda: None  # would validate best.pt, the same weights, a second time
    if run.run_epochs and run.run_images:  # the optimizer optimizer=auto gives the user's whole run, not the probe's
        run_optimizer(trainer, run_iterations(run.run_images, knobs.batch, run.run_epochs))
    return trainer


def _median(values: list[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def _knobs_as_run(trainer: Any, asked: Knobs) -> Knobs:
    """Read every knob back from the set-up trainer, so a knob the trainer ignored shows up as such."""
    from ultralytics.utils.torch_utils import unwrap_model

    model = unwrap_model(trainer.model)
    freeze = frozen_prefix(model.named_parameters(), skip=lambda name: ".dfl" in name)  # DFL never trains
    scale = (getattr(model, "yaml", None) or {}).get("scale")
    name = f"yolov5{scale}" if asked.model in MODEL_SCALES and scale else asked.model
    dataset = trainer.train_loader.dataset
    return Knobs(
        model=name,
        imgsz=int(trainer.args.imgsz),
        batch=int(trainer.batch_size),
        workers=int(trainer.train_loader.num_workers),
        cache=dataset.cache or "none",
        amp=_amp_as_run(trainer),
        freeze=freeze,
        data=asked.data,  # which data.yaml the trainer got; images_read() reports what it read
        compile=asked.compile if hasattr(trainer.model, "_orig_mod") else COMPILE_OFF,  # torch.compile's wrapper
        channels_last=_channels_last(trainer, model, asked),
        deterministic=_deterministic_as_run(),
    )


def _deterministic_as_run() -> bool:
    """Whether torch runs deterministic algorithms, as the trainer's init_seeds left it (its own global state:
    the trainer sets it in its constructor and unsets it when its train() ends, so this is read in between)."""
    import torch

    return bool(torch.are_deterministic_algorithms_enabled())


def _channels_last(trainer: Any, model: Any, asked: Knobs) -> ChannelsLast:
    """The memory format as run: on CUDA what the model holds ("default" asked: the trainer's own choice, recorded
    as it ran, so a run on another trainer version compares fairly); off CUDA "default" stays (it means nothing
    there), and an explicit value is read back (the trainer ignores it: a silent change)."""
    cuda = getattr(getattr(trainer, "device", None), "type", "") == "cuda"
    return _memory_format(model) if cuda or asked.channels_last != "default" else "default"


def _amp_as_run(trainer: Any) -> Precision:
    """AMP as the trainer runs it: off after a failed check, bf16 where it was asked and kept."""
    if not bool(trainer.amp):
        return False
    return "bf16" if trainer.args.amp == "bf16" else True


def _memory_format(model: Any) -> ChannelsLast:
    """on when the model's convolution weights are laid out channels_last (NHWC), else off."""
    import torch

    weight = next((p for p in model.parameters() if p.dim() == 4), None)
    nhwc = weight is not None and weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    return "on" if nhwc else "off"


def _images_read(seen: dict[str, Any]) -> dict[str, Any]:
    """The EngineReport figures of the train images the trainer listed (see :func:`images_read`)."""
    mean_bytes, long_side = images_read(seen.get("im_files") or [])
    return {"image_bytes_mean": mean_bytes, "image_long_side": long_side}
