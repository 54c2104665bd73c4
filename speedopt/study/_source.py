"""Warm-start sources: start a search from what another machine's study learned.

The source study's best feasible configs are adapted to this machine (workers clipped to the cores
here, cache=ram dropped where it does not fit here, batch bounded by this machine's space, AMP
dropped without CUDA, every value brought inside this study's space) and enqueued right after the
baseline. Its quality probes are reused when the dataset fingerprint matches: accuracy does not
depend on the machine, throughput does. The search asks for them while it plans
(:mod:`speedopt.search._plan`); the study stores what was taken (:class:`~speedopt.study._warmstart.WarmStart`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speedopt.knobs import Knobs
from speedopt.machine import MachineKey
from speedopt.quality import cache_entries
from speedopt.study._record import ranked, records
from speedopt.study._schema import DATASET, MACHINE
from speedopt.study._space import Space
from speedopt.study._storage import Need, find_study, redact, storage_errors
from speedopt.study._transfer import split_source
from speedopt.study._warmstart import WarmConfig, WarmStart

TOP = 3


def _inside(values: tuple[Any, ...], value: Any, fallback: Any) -> Any:
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


def warm_start(
    source: str, space: Space, baseline: Knobs, cores: int, cuda: bool, ram_fits: Callable[[Knobs], bool], dataset_id: str
) -> tuple[WarmStart, dict[str, Any]]:
    """Read the source study (read-only); return the adapted configs and the probe-cache entries to reuse.

    The source is kept with its password hidden: it is stored in the new study and printed in its report.
    """
    url, name = split_source(source)
    with storage_errors(url):
        study = find_study(url, name, Need.READ_ONLY)
        same = study.user_attrs[DATASET]["id"] == dataset_id  # find_study refused a study of another schema
        configs: list[WarmConfig] = []
        taken, seen = {baseline}, set()
        for record in ranked(records(study)):
            if record.config in seen:  # the same config measured twice there: take it once
                continue
            seen.add(record.config)
            adapted, changes = adapt(record.config, space, baseline, cores, cuda, ram_fits)
            if adapted in taken:  # two source configs may become one here: measure it once
                continue
            taken.add(adapted)
            configs.append(WarmConfig(record.number, record.images_per_s or 0.0, record.config, adapted, tuple(changes)))
            if len(configs) == TOP:
                break
        entries = cache_entries(study._storage, dataset_id) if same else {}
        machine = MachineKey.from_dict(study.user_attrs[MACHINE]["key"])
    return WarmStart(redact(source), study.study_name, machine, same, tuple(configs)), entries
