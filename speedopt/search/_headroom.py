"""What bounded a search and what is left, in one line: the stop line's tail and the report's summary.

"95% of the compute ceiling at batch 16; the GPU at 3.1% of its bf16 peak (estimate: 3 x the forward FLOPs, the
trainer's count): batch and compile are the levers left (drop --quality off to let batch vary)". Three parts: how close the config came to min(its ceilings) and which
binds (:mod:`speedopt.measure._ceilings`); the absolute yardstick, the share of the device's dense peak its
trial reached, or why that is unknown ("peak unknown on a CPU": :mod:`speedopt.measure._peak`); and the levers
left, read from the knob registry and the study's space, never listed by hand: the knobs that act on the binding
ceiling (:attr:`speedopt.knobs.Knob.sides`) that the search did not vary, less those the trainer cannot change on
this device (the engine's fixed knobs; AMP on the CPU) and compile where the search decided it at the end, naming
those ``--quality off`` kept at the baseline.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from speedopt import engines
from speedopt.knobs import KNOBS, Knobs
from speedopt.measure import Ceilings, TrialResult
from speedopt.study import Space, StudyProtocol


def unswitchable(engine: str, device: str) -> frozenset[str]:
    """The knobs the ``engine``'s trainer cannot change on ``device``: its fixed knobs, and AMP on the CPU
    (AMP needs CUDA: the plan leaves it out of a CPU space). No lever, whatever the space says."""
    fixed = set(engines.get(engine).fixed_knobs(device))
    return frozenset(fixed | ({"amp"} if device == "cpu" else set()))


def levers_left(side: str, space: Space, probing: bool, fixed: Collection[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The knobs acting on the ``side`` ceiling that ``space`` did not vary and the trainer can change (not in
    ``fixed``), in registry order; and of those, the accuracy knobs quality off (``probing`` False) kept."""
    sampled = space.sampled()
    left = tuple(k.name for k in KNOBS.values() if side in k.sides and k.name not in sampled and k.name not in fixed)
    return left, tuple(name for name in left if not probing and KNOBS[name].signature)


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def headroom(
    result: TrialResult, config: Knobs, images_per_s: float | None, ceilings: Ceilings | None,
    levers: tuple[str, ...], pinned: tuple[str, ...],
) -> str:
    """The line: ``config``'s share of min(``ceilings``) at ``images_per_s`` and which binds, its trial's (``result``)
    share of the device's peak, and the ``levers`` left (``pinned``: those quality off kept at the baseline)."""
    share = None if ceilings is None else ceilings.share(images_per_s)
    if ceilings is None or share is None or ceilings.binding is None:
        bound, side = "its ceilings not measured", "compute"
    elif ceilings.fault(images_per_s, result.ci_rel) is not None:
        bound, side = "above its ceilings, which therefore do not hold", ceilings.binding
    else:
        bound, side = f"{round(100 * share)}% of the {ceilings.binding} ceiling at batch {config.batch}", ceilings.binding
    peak = f"the GPU at {result.peak_estimate}" if result.peak_estimate else (
        result.peak_unknown or "its share of the device's peak not recorded")
    if not levers:
        left = f"no {side}-side knob is left that the trainer has here"
    else:
        left = f"{_listed(levers)} {'is the lever' if len(levers) == 1 else 'are the levers'} left"
        left += f" (drop --quality off to let {_listed(pinned)} vary)" if pinned else ""
    return f"{bound}; {peak}: {left}"


def headroom_of(protocol: StudyProtocol, result: TrialResult, images_per_s: float | None, ceilings: Ceilings | None) -> str:
    """:func:`headroom` for a study's config (its trial ``result``), the levers read from the study's protocol."""
    side = ceilings.binding if ceilings is not None and ceilings.binding else "compute"
    decided = {"compile"} if protocol.compile_modes else set()  # decided once at the end: no lever left
    fixed = unswitchable(protocol.engine, protocol.device) | decided
    levers, pinned = levers_left(side, protocol.space, protocol.quality.probing, fixed)
    return headroom(result, result.config, images_per_s, ceilings, levers, pinned)
