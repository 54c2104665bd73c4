"""Decide a search before it runs: every input checked, the study's protocol fixed, no storage touched.

:func:`plan` turns a :class:`SearchConfig` into a :class:`SearchPlan`, so bad input never leaves a
half-made study; :func:`plan_for_worker` rebuilds the plan of an existing study for ``speedopt worker``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedopt import defaults, machine
from speedopt.data import Dataset, PrepareFormat, fingerprint, load
from speedopt.engines import Engine, engine_class
from speedopt.errors import UsageError
from speedopt.isolation import check_lock, socket_fits
from speedopt.knobs import Knobs, validate, value_text
from speedopt.machine import MachineFingerprint
from speedopt.measure import TrialOptions, adjust_to_device, positive, ram_available, ram_cache_need
from speedopt.quality import ACCURACY_KNOBS, Policy, make_policy
from speedopt.search import _rank as rank_mod
from speedopt.search import _space as space_mod
from speedopt.search._config import SearchConfig
from speedopt.search._copies import COPY_FORMATS, find_copies
from speedopt.study import Space, StudyProtocol, find_study, schema
from speedopt.study.names import check_study_name
from speedopt.study.record_types import LOSSLESS, DataCopy, Domain, WarmStart, warm_start


@dataclass(frozen=True)
class SearchPlan:
    """A checked search, ready to run: its storage, its study and the protocol stored in it."""

    storage_url: str
    study_name: str
    protocol: StudyProtocol
    timeout_s: float | None = None
    seed: int = defaults.SEED  # the sampler's seed (each worker's differs)
    notes: tuple[str, ...] = ()
    warm_cache: dict[str, Any] = field(default_factory=dict)  # probe results to copy from a warm-start source
    create: bool = True  # False: join an existing study only (a worker)
    to_prepare: tuple[int, ...] = ()  # imgsz values whose copy --prepare must make before the study runs
    prepare_format: PrepareFormat | None = None
    dataset: Dataset | None = field(default=None, compare=False, repr=False)  # the listing, read once
    warm: bool = True  # jobs fork from one warm worker that imported the trainer once (speedopt.measure._warm)
    ends: bool = True  # after the finals, measure what the report reads (search._ends; no report: no use for them)
    prepare_s: float = 0.0  # wall seconds this run spent making the copies (--prepare), for the study's bill

    @property
    def trial(self) -> TrialOptions:
        """How each trial of the study is measured, as its protocol records it."""
        p = self.protocol
        return TrialOptions(
            steps=p.steps, max_steps=p.max_steps, warmup=p.warmup, timeout_s=p.trial_timeout_s, device=p.device,
            **p.engine_spec.record(),  # its engine checked when the protocol was made (or read)
            ram_limit_gb=p.ram_limit_bytes / 2**30 if p.ram_limit_bytes else None,  # and back to bytes exactly
        )


def _check_numbers(config: SearchConfig) -> None:
    """The search's own numbers, each refused in one line when out of range (a trial's: TrialOptions.check)."""
    if not 0.0 <= config.prune_margin < 1.0:
        raise UsageError(f"--prune-margin must be a fraction in [0, 1), such as 0.5 or 50%, got {config.prune_margin:g}")
    if not 0.0 <= config.stop_at_ceiling <= 1.0:
        raise UsageError(f"--stop-at-ceiling must be a share of min(ceilings) in [0, 1], such as 0.95 or 95%, got {config.stop_at_ceiling:g}")
    if config.ceiling_rank not in rank_mod.MODES:
        raise UsageError(f"--ceiling-rank must be auto, on or off, got {config.ceiling_rank!r}")
    if config.epochs < 1:
        raise UsageError(f"--epochs must be at least 1, got {config.epochs}")
    if config.finalists < 1:
        raise UsageError(f"--finalists must be at least 1, got {config.finalists}")
    if config.repeats < 0 or config.repeats == 1:
        raise UsageError(f"--repeats must be 0 (no finals) or at least 2 (rounds give an interval), got {config.repeats}")
    if not 0.0 <= config.min_gain < 1.0:
        raise UsageError(f"--min-gain must be a fraction in [0, 1), such as 0.05 or 5%, got {config.min_gain:g}")


def _quality(config: SearchConfig, eng: Any, base: Knobs, ds: Any, notes: list[str]) -> tuple[Policy, str]:
    """The quality policy, and what a knob the policy keeps fixed should say turned quality off. An engine
    without probes turns it off; a baseline that is a local checkpoint is what probes start from when no
    --weights is given (both with a note)."""
    mode, off_why = config.quality, "--quality off"
    if mode in ("probe", "all") and not eng.supports_probe:
        notes.append(f"the {config.engine} engine has no quality probe: quality off, accuracy knobs fixed at the baseline")
        mode, off_why = "off", f"the {config.engine} engine has no quality probe, so quality off"
    weights = config.weights
    if weights is None and mode != "off" and base.model.endswith(".pt") and Path(base.model).is_file():
        weights = base.model  # the user's own checkpoint: probes fine-tune it, as their real run does
        notes.append(f"quality probes start from your baseline's checkpoint {base.model} (no --weights given)")
    policy = make_policy(
        mode, config.max_map_loss, config.probe_epochs, config.probe_fraction, weights, ds, config.probe_timeout_s,
        config.probe_seeds, config.probe_grow_s, config.probe_share, config.epochs, config.accuracy_risk,
        config.confirm_seeds,
    )
    return policy, off_why


def plan(config: SearchConfig, dataset: Dataset | None = None) -> SearchPlan:
    """Check the inputs and decide the study; raises UsageError, touches no storage. ``dataset``: the
    dataset already listed from ``config.data`` (planning again after --prepare made the copies)."""
    if config.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {config.trials}")
    if config.study is not None:
        check_study_name(config.study)
    if config.timeout_s is not None:
        positive(config.timeout_s, "--timeout", "seconds")
    check_lock()  # a planted link or someone else's lock folder: one line now, not at the first trial
    options = config.trial
    eng = options.check("--trial-timeout")
    _check_numbers(config)
    ram_limit = options.ram_limit_bytes
    ds = dataset if dataset is not None else load(config.data)
    device = machine.parse_device(config.device)
    fixed = space_mod.parse_fix(list(config.fix))
    listed = space_mod.load_file(config.space_file) if config.space_file else {}
    base, notes = _baseline(config.baseline, {**listed, **fixed}, eng, device)
    policy, off_why = _quality(config, eng, base, ds, notes)
    _check_listed(listed, fixed, eng, device, policy, off_why)
    here = machine.fingerprint(str(ds.yaml_path.parent))
    space, space_notes = _space(listed, fixed, base, eng, device, policy, ds, ram_limit, here)
    data = _data_knob(config, ds, space, policy, base, {**listed, **fixed})
    space, policy, space_notes = data.space, data.policy, space_notes + list(data.notes)
    space, base, compile_modes, at_end = space_mod.decide_at_end(space, base)
    space_notes += at_end
    fp_data = fingerprint(ds)  # how many images the trainer drops: its label check says, before the first trial
    notes += _temp_note(space)
    warm, warm_cache, warm_notes = _warm(config.warm_start, space, base, device, ds, ram_limit, fp_data.id)
    protocol = StudyProtocol(
        data=str(ds.yaml_path),
        dataset=fp_data,
        machine=here,
        **options.engine_spec.resolved().record(),
        engine_version=eng.version(),
        device=device,
        space=space,
        baseline=base,
        quality=policy,
        trials=config.trials,
        epochs=config.epochs,
        steps=config.steps,
        max_steps=options.most_steps,
        warmup=config.warmup,
        finalists=config.finalists,
        repeats=config.repeats,
        min_gain=config.min_gain,
        ablate=config.ablate,
        trial_timeout_s=config.trial_timeout_s,
        ram_limit_bytes=ram_limit,
        seed=config.seed,
        warm_start=warm,
        copies=data.copies,
        stop_at_ceiling=config.stop_at_ceiling,
        ceiling_rank=config.ceiling_rank,
        prune_margin=config.prune_margin,
        compile_modes=compile_modes,
    )
    return SearchPlan(
        storage_url=config.storage or defaults.STORAGE_URL,
        study_name=config.study or default_study_name(ds, protocol),
        protocol=protocol,
        timeout_s=config.timeout_s,
        seed=config.seed,
        notes=tuple(notes + space_notes + warm_notes),
        warm_cache=warm_cache,
        to_prepare=data.to_prepare,
        prepare_format=config.prepare if data.to_prepare else None,
        dataset=ds,
        warm=config.warm,
        ends=config.ends,
    )


@dataclass(frozen=True)
class _DataKnob:
    """The ``data`` knob as a plan decides it: the space and policy with it, the copies, what to prepare."""

    space: Space
    policy: Policy
    copies: tuple[DataCopy, ...] = ()
    to_prepare: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


def _data_knob(
    config: SearchConfig, ds: Dataset, space: Space, policy: Policy, base: Knobs, given: dict[str, Domain]
) -> _DataKnob:
    """Offer ``data: [original, resized]`` where a prepared copy exists (or --prepare makes one) for every
    imgsz in the space. A lossless copy holds the pixels the trainer would compute: accuracy-neutral, so
    it is searched with quality off too; a JPEG copy is an accuracy knob like imgsz (probed, or kept at
    the baseline with quality off)."""
    sizes = space.domains["imgsz"].values()
    if config.prepare is not None and config.prepare not in COPY_FORMATS:
        raise UsageError(f"--prepare must be one of {', '.join(COPY_FORMATS)}, got {config.prepare!r}")
    if config.prepare is not None:
        formats: tuple[PrepareFormat, ...] = (config.prepare,)
    else:
        formats = COPY_FORMATS if policy.probing else (*LOSSLESS, "jpg")
    copies = find_copies(ds, sizes, formats)
    wanted = given.get("data")
    if not copies and config.prepare is None:
        if wanted is not None and "resized" in wanted.values():
            raise UsageError(
                f"data=resized needs a prepared copy at imgsz {', '.join(map(str, sizes))}; run `speedopt prepare "
                f"--data {config.data} --imgsz N` for each, or add --prepare png (or jpg) to this search"
            )
        return _DataKnob(space, policy)
    lossless = config.prepare in LOSSLESS if not copies else all(c.lossless for c in copies)
    if lossless and engine_class(config.engine).lossless_copy_exact:
        policy = dataclasses.replace(policy, neutral=("data",))
    values: tuple[str, ...] = ("original", "resized")
    notes = []
    if not policy.probing and "data" not in policy.neutral:
        values = ("original",)
        notes.append(f"data=resized not searched: {_copy_changes_accuracy(config, lossless)} and quality is off; {_copy_fix(config, lossless)}")
    if wanted is not None:
        if len(wanted.values()) > 1 and not policy.probing and "data" not in policy.neutral:
            raise UsageError(
                f"--space lists data [original, resized] but {_copy_changes_accuracy(config, lossless)} and quality is off, "
                f"which keeps accuracy knobs at the baseline; {_copy_fix(config, lossless)}"
            )
        values = wanted.values()
    domains = {**space.domains, "data": Domain(choices=values)}
    made = ", ".join(f"{c.imgsz} ({c.format}, {c.bytes / 2**20:.0f} MB)" for c in copies)
    if copies:
        notes.append(f"data knob: prepared copies at imgsz {made}")
    missing = () if copies else sizes
    if missing:
        notes.append(f"data knob: --prepare {config.prepare} makes a copy at imgsz {', '.join(map(str, missing))} first")
    return _DataKnob(Space(domains).containing(base), policy, copies, tuple(missing), tuple(notes))


def _copy_changes_accuracy(config: SearchConfig, lossless: bool) -> str:
    """Why a prepared copy is an accuracy knob for this search's trainer (quality off then keeps it at the baseline)."""
    if not lossless:
        return "the prepared copy is JPEG (re-encoded once, it can change accuracy)"
    # Classic LoadImagesAndLabels.load_image sizes a side ceil(side * r) without Ultralytics' min(..., imgsz),
    # so a long side can come out imgsz + 1 (187 px at imgsz 96: 97), and it validates with INTER_AREA: the
    # copy, resized as Ultralytics resizes, is not the pixels classic train.py computes from the original.
    return (
        f"the classic train.py (--engine {config.engine}) does not resize the original as the copy is resized (a long side "
        "can come out 1 px over imgsz, and it validates with INTER_AREA), so even a lossless copy can change accuracy"
    )


def _copy_fix(config: SearchConfig, lossless: bool) -> str:
    """What makes a prepared copy searchable."""
    if not lossless:
        return "search with --prepare png for a lossless copy, or use --quality probe"
    return "use --quality probe to search it as an accuracy knob, or the Ultralytics engine, for which a lossless copy is exact"


def _temp_note(space: Space) -> list[str]:
    """A note where the user's ``TMPDIR`` is too long for dataloader workers' sockets and workers are searched."""
    tmp = tempfile.gettempdir()
    if socket_fits(tmp) or not any(w > 0 for w in space.domains["workers"].values()):
        return []
    return [
        f"your temp folder {tmp} ({len(os.fsencode(tmp))} bytes) is too long for the sockets PyTorch's dataloader workers "
        "use: trials run with a short private one, but your own training run with workers > 0 would wait forever for "
        "its first batch; set TMPDIR to a path under 76 bytes (such as /tmp) before you train"
    ]


def default_study_name(ds: Dataset, protocol: StudyProtocol) -> str:
    """``<dataset>-<gpu-or-cpu>-<hash of dataset and machine fingerprints, engine, device>``."""
    parts: list[Any] = [protocol.dataset.id, protocol.machine.key.to_dict(), protocol.engine, protocol.device]
    if protocol.engine_spec.checkout:
        parts.append(protocol.engine_spec.checkout)
    key = json.dumps(parts, sort_keys=True)
    return f"{ds.name}-{protocol.machine.short_name}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _baseline(text: str | None, given: dict[str, Domain], eng: Engine, device: str) -> tuple[Knobs, list[str]]:
    """The user's settings (trial 0) as they can run here, and what was adjusted.

    Without ``--baseline`` the values the user pinned (``given``: --space entries, then --fix) are
    part of their setup, so the baseline takes them instead of the trainer's defaults.
    """
    pinned = Space(given).fixed()
    base, notes = validate(space_mod.parse_baseline(text, pinned))
    if not text and pinned:
        shown = " ".join(f"{k}={value_text(v)}" for k, v in pinned.items())
        notes.append(f"baseline: the trainer's defaults with your pinned {shown} (no --baseline given)")
    fixed = eng.fixed_knobs(device)
    notes += [f"{knob} is not searched: {why}" for knob, (_, why) in fixed.items()]
    base, adjusted, _ = adjust_to_device(base, eng, device)  # UsageError when its gpus cannot run here
    return base, notes + [f"baseline {note}" for knob, note in adjusted.items() if knob not in fixed]


def _check_listed(
    listed: dict[str, Domain], fixed: dict[str, Domain], eng: Engine, device: str, policy: Policy, off_why: str
) -> None:
    """Refuse a --space entry the search would drop or replace: a knob the user listed is searched as listed.

    A knob the trainer cannot vary here (its fixed knobs, AMP without CUDA) may list only the value
    that runs; with quality off an accuracy knob may list one value (a pin, like --fix), never several.
    Knobs also pinned by --fix are left to --fix (and noted by the caller).
    """
    own = {k: d for k, d in listed.items() if k not in fixed}
    for knob, (value, why) in eng.fixed_knobs(device).items():
        if knob in own and own[knob].values() != (value,):
            raise UsageError(
                f"--space lists {knob} {own[knob].text()} but the {eng.name} engine runs {knob}={value_text(value)} "
                f"here ({why}); remove {knob} from the space file"
            )
    space_mod.refuse_unaccepted(own, eng.accepted(device), eng.name)
    space_mod.refuse_unaccepted(fixed, eng.accepted(device), eng.name, "--fix")  # never dropped with a note
    if "amp" in own and device == "cpu" and any(own["amp"].values()):
        raise UsageError(
            f"--space lists amp {own['amp'].text()} but AMP needs CUDA and this search runs on the CPU; "
            "remove amp from the space file or list amp: [off]"
        )
    if policy.probing:
        return
    searched = [k for k in ACCURACY_KNOBS if k in own and len(own[k].values()) > 1 and k != "data"]  # data: _data_knob
    if searched:
        what = " and ".join(f"{k} {own[k].text()}" for k in searched)
        names = ", ".join(searched)
        raise UsageError(
            f"--space lists {what} but {off_why} keeps the accuracy knobs ({', '.join(ACCURACY_KNOBS)}) at the "
            f"baseline's values; remove {names} from the space file or use --quality probe"
        )


def _space(
    listed: dict[str, Domain],
    fixed: dict[str, Domain],
    base: Knobs,
    eng: Engine,
    device: str,
    policy: Policy,
    ds: Dataset,
    ram_limit: int | None,
    here: MachineFingerprint,
) -> tuple[Space, list[str]]:
    """The search space on this machine: defaults, then --space, --fix, the engine, quality and RAM.

    What the user listed in --space was checked by :func:`_check_listed`; what changes a default
    knob or a --fix pin here is said in a note.
    """
    cuda = device != "cpu"
    notes: list[str] = []
    gpu_mb = here.gpus[0].memory_mb if cuda and here.gpus else None
    notes += [
        f"--fix {k}={value_text(d.values()[0])} overrides the space file's {k} {listed[k].text()}"
        for k, d in fixed.items()
        if k in listed and listed[k] != d
    ]
    pool = len(device.split(",")) if cuda else 1
    domains = {**space_mod.default_space(base, machine.cpu_cores(), cuda, gpu_mb, pool).domains, **listed, **fixed}
    gpus = domains["gpus"].values()
    if max(gpus) > 1:  # the engine runs DDP on this device and --device lists enough GPUs, or one line why not
        adjust_to_device(dataclasses.replace(base, gpus=max(gpus)), eng, device)
        notes.append(f"gpus {domains['gpus'].text()}: batch is the total across the GPUs (each takes batch / gpus), as in both trainers")
    domains.update({knob: Domain(choices=(value,)) for knob, (value, _) in eng.fixed_knobs(device).items()})
    notes += space_mod.narrow(domains, eng.accepted(device))
    if not cuda and any(domains["amp"].values()):
        domains["amp"] = Domain(choices=(False,))
        notes.append("amp=on dropped from the space: AMP needs CUDA")
    if not policy.probing:  # speed with zero accuracy risk: accuracy knobs stay at the baseline's values
        values = base.to_dict()  # (a knob the user pinned, by --fix or one --space value, keeps that value)
        pinned = [k for k in ACCURACY_KNOBS if k in domains and k not in fixed and k not in listed]
        domains.update({k: Domain(choices=(values[k],)) for k in pinned})
        notes.append(f"quality off: {', '.join(pinned) or 'no accuracy knob'} fixed at the baseline; no probes")
        differ = [k for k in ACCURACY_KNOBS if k in domains and domains[k].values() != (values[k],)]
        if differ:
            ours = ", ".join(f"{k}={value_text(domains[k].values()[0])}" for k in differ)
            theirs = ", ".join(f"{k}={value_text(values[k])}" for k in differ)
            notes.append(
                f"quality off: accuracy not checked for your pinned {ours}: the baseline has {theirs} "
                "(--quality probe checks it)"
            )
    cache_values = domains["cache"].values()
    if "ram" in cache_values and len(cache_values) > 1:
        smallest = min(domains["imgsz"].values())
        need, free = ram_cache_need(ds, smallest), ram_available(ram_limit)
        if need > free:
            domains["cache"] = Domain(choices=tuple(v for v in cache_values if v != "ram"))
            notes.append(
                f"cache=ram left out of the space: even at imgsz={smallest} the train images need about "
                f"{need / 2**30:.1f} GiB with the trainer's margin; {free / 2**30:.1f} GiB available"
            )
    return Space(domains).containing(base), notes


def _warm(
    source: str | None, space: Space, base: Knobs, device: str, ds: Dataset, ram_limit: int | None, dataset_id: str
) -> tuple[WarmStart | None, dict[str, Any], list[str]]:
    """The warm-start configs adapted to this machine, the probes to reuse, and a note."""
    if not source:
        return None, {}, []

    def ram_fits(k: Knobs) -> bool:
        return ram_cache_need(ds, k.imgsz) <= ram_available(ram_limit)

    warm, cache = warm_start(source, space, base, machine.cpu_cores(), device != "cpu", ram_fits, dataset_id)
    reused = f", {len(cache)} probe result(s) reused (same dataset)" if warm.same_dataset else ", dataset differs: probes not reused"
    return warm, cache, [f"warm start from study {warm.study!r}: {len(warm.configs)} config(s) enqueued after the baseline{reused}"]


def plan_for_worker(storage_url: str, study_name: str) -> SearchPlan:
    """A plan rebuilt from an existing study's attrs, for `speedopt worker` on an identical machine."""
    study = find_study(storage_url, check_study_name(study_name))
    protocol = schema.read_protocol(study)  # find_study refused a study of another schema
    protocol.check_loads()  # the stored space, not this command's options: inspected before a trainer loads a file it names
    here = machine.fingerprint(str(Path(protocol.data).parent) if Path(protocol.data).exists() else ".")
    why = protocol.machine.key.mismatch(here.key)
    if why:
        raise UsageError(f"refusing to join {study_name!r}: {why}; mixing machines in one study corrupts its numbers")
    listed = load(protocol.data)  # the data must be here too, at the same path (listed once for the run)
    if protocol.device != "cpu":
        machine.parse_device(protocol.device)
    return SearchPlan(
        storage_url=storage_url,
        study_name=study.study_name,
        protocol=protocol,
        seed=protocol.seed + os.getpid(),  # workers must not all sample the same sequence
        notes=(f"joined study {study.study_name!r} as a worker",),
        create=False,
        dataset=listed,
    )
