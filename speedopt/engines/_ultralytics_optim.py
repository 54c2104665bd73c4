"""The user's run's optimizer, as the installed Ultralytics resolves ``optimizer=auto`` for it (issue 53).

The trainer picks the optimizer and its learning rate from the run's length: ``build_optimizer(iterations=...)``
with iterations = ceil(train images / max(batch, nbs)) x epochs (Ultralytics 8.4: MuSGD past 10,000 iterations, AdamW
with a fitted lr0 below; older releases: SGD past 10,000). A trial or a probe trains a subset for a few batches, so
its own trainer would count its own iterations and pick otherwise. Two ways to get the run's choice, both the
trainer's own code, never a copy of its rule:

- :func:`run_optimizer` (inside a trial's or a probe's trainer): its ``build_optimizer`` is called with the full
  run's iterations, so everything ``auto`` does (optimizer, lr0, warm-up bias lr) is what the run does;
- :func:`resolve` (anywhere, without a trainer): the same method on a stand-in trainer and a one-layer model, for
  ``verify``'s short run, which must name the run's optimizer on its command line.

The trainer's warm-up (``warmup_epochs``, 3 by default) ramps gradient accumulation from 1 to nbs/batch, so the
optimizer (and the EMA) steps far more often there than in the run's steady state. :func:`steady_cadence` ends the
trainer's warm-up within the trial's own warm-up batches: the measured window runs at the run's nominal cadence.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

NBS = 64  # the trainer's default nominal batch size (nbs): the user's command leaves it alone


def run_iterations(train_images: int, batch: int, epochs: int, nbs: int = NBS) -> int:
    """The iterations the trainer counts for ``optimizer=auto`` (BaseTrainer._setup_train, the same arithmetic)."""
    return math.ceil(train_images / max(batch, nbs)) * epochs


@dataclass(frozen=True)
class RunOptimizer:
    """The optimizer a run trains with, as its trainer resolved it."""

    name: str  # SGD, MuSGD, AdamW, ...
    lr0: float
    warmup_bias_lr: float
    momentum: float | None  # where warm-up never drives it (Adam's beta1): it must be named to be reproduced
    iterations: int  # the full run's iterations it was resolved for (0: not resolved from auto)

    def args(self) -> tuple[str, ...]:
        """The trainer arguments that make a run of any length train this optimizer (what ``auto`` gives the
        full run): name, lr0 and the warm-up bias lr it sets, and beta1 where warm-up does not set it."""
        words = [f"optimizer={self.name}", f"lr0={self.lr0:g}", f"warmup_bias_lr={self.warmup_bias_lr:g}"]
        return (*words, f"momentum={self.momentum:g}") if self.momentum is not None else tuple(words)

    def text(self) -> str:
        """``MuSGD (lr0 0.01)``, and what it was resolved for."""
        basis = f", what optimizer=auto picks for the run's {self.iterations:,} iterations" if self.iterations else ""
        return f"{self.name} (lr0 {self.lr0:g}){basis}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lr0": self.lr0, "warmup_bias_lr": self.warmup_bias_lr, "momentum": self.momentum,
                "iterations": self.iterations}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptimizer:
        momentum = data.get("momentum")
        return cls(str(data["name"]), float(data["lr0"]), float(data["warmup_bias_lr"]),
                   None if momentum is None else float(momentum), int(data.get("iterations") or 0))


def _as_built(args: Any, optimizer: Any, iterations: int) -> RunOptimizer:
    """The choice a trainer's ``build_optimizer`` left in its args, and beta1 where warm-up does not drive it."""
    group = optimizer.param_groups[0]
    momentum = None if "momentum" in group else float(group.get("betas", (args.momentum,))[0])
    return RunOptimizer(str(args.optimizer), float(args.lr0), float(args.warmup_bias_lr), momentum, iterations)


def run_optimizer(trainer: Any, iterations: int) -> dict[str, Any]:
    """Make ``trainer`` build the full run's optimizer (``iterations`` of it) and time its steps. Returns a dict the
    trainer fills as it goes: ``chosen`` (the :class:`RunOptimizer`, once built), ``step_s`` (each optimizer step's
    seconds, the device synchronised around it) and ``step_at`` (when each ended, ``time.perf_counter``: the step
    clock's time, so the steps inside its window can be counted)."""
    from speedopt.engines._common import sync

    seen: dict[str, Any] = {"step_s": [], "step_at": []}
    build, step = trainer.build_optimizer, trainer.optimizer_step

    def built(*positional: Any, **named: Any) -> Any:  # the trainer calls build_optimizer(model=..., name=..., ...)
        asked = str(named.get("name", "auto")).lower() == "auto"
        if asked:
            named["iterations"] = iterations
        optimizer = build(*positional, **named)
        seen["chosen"] = _as_built(trainer.args, optimizer, iterations if asked else 0)
        return optimizer

    def timed_step() -> None:
        sync(trainer.device)
        started = time.perf_counter()
        step()
        sync(trainer.device)
        ended = time.perf_counter()
        seen["step_s"].append(ended - started)
        seen["step_at"].append(ended)

    trainer.build_optimizer = built
    trainer.optimizer_step = timed_step
    return seen


def steady_cadence(trainer: Any, batches: int) -> None:
    """End the trainer's warm-up (its accumulation ramp) within ``batches``, the trial's own warm-up: the measured
    window then steps the optimizer and the EMA every nbs/batch batches, as the run does after its warm-up epochs."""
    trainer._get_warmup_iterations = lambda num_batches: min(batches, num_batches) if batches > 0 else 0


def warmup_steps(train_images: int, batch: int, epochs: int, warmup_epochs: float, nbs: int = NBS) -> tuple[int, float]:
    """The optimizer steps of the run's warm-up and what its steady cadence would step in as many batches: the trainer's
    warm-up lasts ``round(min(warmup_epochs, epochs - 1) x batches per epoch)`` batches and ramps accumulation linearly
    from 1 to nbs/batch (rounded), stepping when as many batches gathered (BaseTrainer._do_train's arithmetic)."""
    per_epoch = math.ceil(train_images / batch)
    nominal = max(round(nbs / batch), 1)
    nominal = min(nominal, per_epoch * epochs)
    warm = round(min(warmup_epochs, max(epochs - 1, 0)) * per_epoch) if warmup_epochs > 0 else 0
    steps, last = 0, -1
    for ni in range(warm):
        accumulate = max(1, round(1 + (nominal - 1) * ni / warm))
        if ni - last >= accumulate:
            steps, last = steps + 1, ni
    return steps, warm / nominal


def resolve(train_images: int, batch: int, epochs: int, classes: int) -> RunOptimizer:
    """What ``optimizer=auto`` gives a run of ``epochs`` on ``train_images`` at ``batch`` with ``classes`` classes, by
    calling the installed Ultralytics' own ``build_optimizer`` on a stand-in trainer (its args and data) and a
    one-layer model: no trainer, no dataset, no download."""
    import os
    from types import SimpleNamespace

    omp = os.environ.get("OMP_NUM_THREADS")
    import torch
    from ultralytics.cfg import get_cfg
    from ultralytics.engine.trainer import BaseTrainer

    args = get_cfg()
    stand_in = SimpleNamespace(args=args, data={"nc": classes})
    model = torch.nn.Module()
    model.model = torch.nn.ModuleList([torch.nn.Conv2d(1, 1, 1)])  # the trainer reads model[-1]
    from ultralytics.utils import LOGGER

    iterations = run_iterations(train_images, batch, epochs, int(args.nbs))
    level = LOGGER.level
    LOGGER.setLevel("WARNING")  # its choice is logged by the caller, once
    try:
        optimizer = BaseTrainer.build_optimizer(stand_in, model, name=args.optimizer, lr=args.lr0,
                                                momentum=args.momentum, iterations=iterations)
    finally:
        LOGGER.setLevel(level)
        if omp is None:  # importing ultralytics set it for this process: the jobs it starts set their own
            os.environ.pop("OMP_NUM_THREADS", None)
    return _as_built(args, optimizer, iterations if str(get_cfg().optimizer).lower() == "auto" else 0)
