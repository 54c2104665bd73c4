"""torch.compile in a trial: the modes the installed trainer accepts, the one-time cost, and the loss check.

Ultralytics (8.4 on) has a ``compile`` option: False, True (``"default"``) or a torch.compile mode, applied
to the model once before training (``attempt_compile``). Compilation is lazy: the first forward and backward
build and compile the graphs, which takes from seconds (a warm inductor cache) to minutes (a cold one, on a
CPU). That time is a one-time cost per run, like the dataset build: a trial measures it apart from its steady
images/s (:func:`speedopt.measure._clock.one_time_s`, from its warm-up steps) and the projection counts it once. ``attempt_compile``
falls back to the eager model, with a warning only, where the inductor backend is missing: the trial then
reads the model back and ends ``infeasible`` (:mod:`speedopt.engines._silent`), never crediting compile with
the speed of eager. A compile that fails at its first step is ``infeasible`` with the compiler's message
(:func:`failure`). Compile is taken as accuracy-neutral, and checked: a compiled and an eager forward on the
trial's first batch must give the same loss within :data:`LOSS_TOLERANCE` (:func:`loss_gap`).
"""

from __future__ import annotations

from typing import Any

from speedopt.status import Status, TrialRejected

#: The largest relative gap between the compiled and the eager loss on the same batch: float reassociation
#: in fused kernels moves the loss by about 1e-6 in FP32; a gap of 1% is a compiled model that computes otherwise.
LOSS_TOLERANCE = 0.01


def loss_gap(eager: float, compiled: float) -> float:
    """The relative gap between the eager and the compiled loss on the same batch."""
    return abs(compiled - eager) / max(abs(eager), 1e-12)


def check_loss(eager: float, compiled: float, mode: str) -> float:
    """The gap (:func:`loss_gap`); TrialRejected (infeasible) when it exceeds :data:`LOSS_TOLERANCE`."""
    gap = loss_gap(eager, compiled)
    if gap > LOSS_TOLERANCE:
        raise TrialRejected(
            Status.INFEASIBLE,
            f"compile={mode} is not accuracy-neutral here: on the same batch the compiled loss {compiled:.6g} differs "
            f"from the eager loss {eager:.6g} by {100 * gap:.2f}% (more than {100 * LOSS_TOLERANCE:.0f}%); keep compile=off",
        )
    return gap


def is_compile_error(exc: BaseException) -> bool:
    """An exception raised by torch.compile's machinery (dynamo, inductor, the C++ or Triton compiler)."""
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor")) or "BackendCompilerFailed" in type(exc).__name__


def failure(exc: BaseException, mode: str) -> TrialRejected:
    """A compile that failed at its first step, as an infeasible trial with the compiler's first line."""
    inner: BaseException = exc
    while (nested := getattr(inner, "inner_exception", None) or inner.__cause__) is not None:  # dynamo wraps the compiler's
        inner = nested
    lines = [t.strip() for t in str(inner).splitlines() if t.strip()]
    first = f"{type(inner).__name__}: {lines[0]}" if lines else type(inner).__name__
    return TrialRejected(Status.INFEASIBLE, f"torch.compile (compile={mode}) failed on this machine: {first[:300]}; keep compile=off")


def eager_loss(trainer: Any, batch: dict[str, Any]) -> float:
    """The loss of the trainer's eager model (the compiled module's original) on ``batch``, without gradients: the
    reference for :func:`check_loss`. Called from ``preprocess_batch``, which the trainer runs inside its own autocast
    (bf16 or fp16 as asked), so the eager forward runs at the compiled step's precision; no autocast of its own."""
    import torch
    from ultralytics.utils.torch_utils import unwrap_model

    model = unwrap_model(trainer.model)
    with torch.no_grad():
        loss, _ = model.loss(batch)
    return float(loss.sum())
