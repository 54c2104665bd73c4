"""Start a search from what another machine's study learned.

The source study's best feasible configs are adapted to this machine (workers clipped to the cores
here, cache=ram dropped where it does not fit here, batch bounded by this machine's space, AMP
dropped without CUDA, every value brought inside this study's space) and enqueued right after the
baseline. Its quality probes are reused when the dataset fingerprint matches: accuracy does not
depend on the machine, throughput does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from speedopt.knobs import Knobs
from speedopt.space import Space

TOP = 3


def _inside(values: tuple, value: Any, fallback: Any) -> Any:
    """``value`` if the domain holds it, else the largest domain value below it (numbers), else ``fallback``."""
    if value in values:
        return value
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if isinstance(value, int) and not isinstance(value, bool) and numbers:
        below = [v for v in numbers if v <= value]
        return max(below) if below else min(numbers)
    return fallback if fallback in values else values[0]


def adapt(
    knobs: Knobs, space: Space, baseline: Knobs, cores: int, cuda: bool, ram_fits: Callable[[Knobs], bool]
) -> tuple[Knobs, list[str]]:
    """The config as it can run here, and what changed and why."""
    changes: list[str] = []
    values = knobs.to_dict()
    if values["workers"] > cores:
        changes.append(f"workers {values['workers']} -> {cores}: this machine has {cores} cores")
        values["workers"] = cores
    if values["amp"] and not cuda:
        changes.append("amp on -> off: no CUDA here")
        values["amp"] = False
    if values["cache"] == "ram" and not ram_fits(Knobs(**values)):
        changes.append("cache=ram -> none: the decoded images do not fit in this machine's RAM")
        values["cache"] = "none"
    base = baseline.to_dict()
    for name, domain in space.domains.items():
        inside = _inside(domain.values(), values[name], base[name])
        if inside != values[name]:
            why = "this machine's batch range" if name == "batch" else "this study's space"
            changes.append(f"{name} {values[name]} -> {inside}: outside {why}")
            values[name] = inside
    return Knobs(**values), changes


@dataclass(frozen=True)
class WarmStart:
    """What was taken from the source study and how it was adapted."""

    source: str
    study: str
    machine: dict[str, Any]
    same_dataset: bool
    configs: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def top_configs(study, k: int = TOP) -> list[tuple[int, float, Knobs]]:
    """The source's fastest distinct configs that were measured ok and judged feasible."""
    from optuna.trial import TrialState

    ranked = sorted(
        (
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("status") == "ok" and t.user_attrs.get("feasible", True) is True
        ),
        key=lambda t: -t.user_attrs["images_per_s"],
    )
    seen, out = set(), []
    for t in ranked:
        knobs = Knobs(**t.user_attrs["config"])
        if knobs not in seen:
            seen.add(knobs)
            out.append((t.number, t.user_attrs["images_per_s"], knobs))
        if len(out) == k:
            break
    return out


def plan(
    source: str, space: Space, baseline: Knobs, cores: int, cuda: bool, ram_fits: Callable[[Knobs], bool], dataset_id: str
) -> tuple[WarmStart, dict[str, Any]]:
    """Read the source study; return the adapted configs and the probe-cache entries to reuse."""
    from speedopt.search import find_study
    from speedopt.storage import open_storage
    from speedopt.transfer import cache_entries, split_source

    url, name = split_source(source)
    study = find_study(url, name)
    same = study.user_attrs.get("dataset", {}).get("id") == dataset_id
    configs, taken = [], {baseline}
    for number, ips, knobs in top_configs(study, TOP + 2):
        adapted, changes = adapt(knobs, space, baseline, cores, cuda, ram_fits)
        if adapted in taken:  # two source configs may become one here: measure it once
            continue
        taken.add(adapted)
        configs.append(
            {"source_trial": number, "source_images_per_s": ips, "source_config": knobs.to_dict(),
             "knobs": adapted.to_dict(), "changes": changes}
        )
        if len(configs) == TOP:
            break
    entries = cache_entries(open_storage(url), dataset_id) if same else {}
    warm = WarmStart(source, study.study_name, study.user_attrs.get("machine", {}).get("key", {}), same, tuple(configs))
    return warm, entries
