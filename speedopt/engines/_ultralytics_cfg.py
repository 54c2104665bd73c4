"""The installed Ultralytics' own defaults, read from its ``cfg/default.yaml`` without importing it.

Importing ultralytics in the parent would set its OMP_NUM_THREADS and load torch; the defaults a search
needs in the parent (the compile modes the trainer lists, its ``close_mosaic`` epochs) are lines of that file.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path


def default_line(key: str) -> str:
    """The ``key:`` line of the installed Ultralytics' default.yaml, comment included ("" where there is none)."""
    spec = importlib.util.find_spec("ultralytics")
    if spec is None or not spec.submodule_search_locations:
        return ""
    cfg = Path(next(iter(spec.submodule_search_locations))) / "cfg" / "default.yaml"
    try:
        return next((t for t in cfg.read_text().splitlines() if t.startswith(f"{key}:")), "")
    except OSError:
        return ""


def compile_modes() -> tuple[str, ...]:
    """The torch.compile modes the installed Ultralytics lists for its ``compile`` option (the double-quoted
    names in its comment: ``"default|reduce-overhead|max-autotune-no-cudagraphs"``); () without the option."""
    modes: list[str] = []
    for quoted in re.findall(r'"([a-z0-9|-]+)"', default_line("compile")):
        modes += [m for m in quoted.split("|") if m and m not in modes]
    return tuple(modes)


def close_mosaic() -> int:
    """The trainer's default ``close_mosaic``: the last epochs it trains with mosaic off (0 where it has none)."""
    match = re.match(r"close_mosaic:\s*(\d+)", default_line("close_mosaic"))
    return int(match.group(1)) if match else 0


def warmup_epochs() -> float:
    """The trainer's default ``warmup_epochs`` (its accumulation and learning-rate ramp); 0 where it has none."""
    match = re.match(r"warmup_epochs:\s*([0-9.]+)", default_line("warmup_epochs"))
    return float(match.group(1)) if match else 0.0


def miniature(epochs: int, run_epochs: int) -> dict[str, int]:
    """A probe of ``epochs`` as the user's run of ``run_epochs`` in miniature: its closing no-mosaic epochs take the
    same share of the probe as of the run (at least one where the run has any), so a probe ends as the run ends (the
    learning rate already anneals to ``lrf`` over the probe's epochs). Warm-up keeps the trainer's own epochs: it
    protects a checkpoint from the learning rate's peak, a matter of iterations, not of share (warm-up scaled to the
    run's share left a fine-tune's 8-epoch probe at mAP50-95 0.20 against 0.41 with the trainer's own; issue 52).
    Empty when the run is no longer than the probe (its own schedule is the run's)."""
    close = close_mosaic()
    if run_epochs <= epochs or not close:
        return {}
    return {"close_mosaic": min(epochs, max(1, round(min(close, run_epochs) * epochs / run_epochs)))}
