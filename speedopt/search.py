"""`speedopt search`: an Optuna study of short, real training trials over the speed knobs.

:func:`plan` checks every input and decides the study (name, space, baseline, fingerprints)
without touching storage, so bad input never leaves a half-made study. :func:`run` creates or
resumes the study, enqueues the baseline as trial 0, and optimises steady-state images/s. Every
trial ends in a closed status (ok, oom, timeout, infeasible, error): a non-ok trial is recorded
with its status and message, scores 0 images/s and violates the ``measured`` constraint, so the
sampler learns to avoid it and it can never be chosen as best.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from speedopt import __version__, dataset as dataset_mod, engines, hostlock, knobs as knobs_mod, machine
from speedopt import quality as quality_mod
from speedopt import space as space_mod
from speedopt import trial as trial_mod
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.measurement import Status, TrialResult
from speedopt.storage import DEFAULT_URL, open_storage, retry_callback

OBJECTIVE = "images/s"
# Study attrs that define the measurement protocol: a resumed or joined study must match them.
PROTOCOL_KEYS = ("data", "engine", "yolov5_dir", "device", "space", "baseline", "steps", "warmup", "quality")


@dataclass(frozen=True)
class SearchPlan:
    """A checked search, ready to run: everything a later worker or report needs is in ``attrs``."""

    storage_url: str
    study_name: str
    trials: int
    timeout_s: float | None
    seed: int
    space: space_mod.Space
    baseline: Knobs
    notes: tuple[str, ...]
    attrs: dict[str, Any]
    ram_limit_bytes: int | None = None
    trial_timeout_s: float = 900.0
    warm_cache: dict[str, Any] = dataclasses.field(default_factory=dict)  # probe results to reuse


@dataclass(frozen=True)
class SearchOutcome:
    """What a finished (or resumed-to-finish) search found, from the stored trials."""

    study_name: str
    complete: int
    by_status: dict[str, int]
    baseline: TrialResult | None
    best: TrialResult | None
    best_number: int | None
    probes_run: int = 0
    probe_cache_hits: int = 0
    unprobed: int = 0  # trials measured ok but never probed: they could not have been the best
    probed: tuple[dict[str, Any], ...] = ()  # one entry per probed signature: mAP and loss
    rejected: int = 0  # trials measured ok whose accuracy was judged too low

    @property
    def speedup(self) -> float | None:
        """Best feasible images/s over the baseline's, both measured in this study."""
        if not self.best or not self.baseline or self.baseline.status is not Status.OK:
            return None
        return self.best.images_per_s / self.baseline.images_per_s


def _ram_available(limit: int | None) -> int:
    free = psutil.virtual_memory().available
    return min(free, limit) if limit else free


def plan(
    data: str,
    *,
    trials: int = 20,
    timeout_s: float | None = None,
    storage: str | None = None,
    study: str | None = None,
    space_file: str | None = None,
    fix: list[str] | None = None,
    baseline: str | None = None,
    steps: int = 20,
    warmup: int = 5,
    seed: int = 0,
    device: str | None = None,
    engine: str = "ultralytics",
    yolov5_dir: str | None = None,
    trial_timeout_s: float = 900.0,
    ram_limit_gb: float | None = None,
    quality: str = "probe",
    max_map_loss: str = "0.01",
    probe_epochs: int = 10,
    probe_fraction: float = 0.25,
    weights: str | None = None,
    probe_timeout_s: float = 3600.0,
    warm_start: str | None = None,
) -> SearchPlan:
    """Check the inputs and decide the study; raises UsageError, touches no storage."""
    if trials < 1:
        raise UsageError(f"--trials must be at least 1, got {trials}")
    if timeout_s is not None and timeout_s <= 0:
        raise UsageError(f"--timeout must be positive seconds, got {timeout_s}")
    if ram_limit_gb is not None and ram_limit_gb <= 0:
        raise UsageError(f"--ram-limit must be positive GiB, got {ram_limit_gb}")
    if steps < 2 or warmup < 1:
        raise UsageError(f"need --steps >= 2 and --warmup >= 1, got {steps} and {warmup}")
    eng = engines.get(engine, yolov5_dir=yolov5_dir)
    if eng.version() is None:
        raise UsageError(f"the {engine} trainer is not installed; {eng.install_hint or f'pip install {engine}'}")
    yolov5_dir = str(Path(yolov5_dir).expanduser().resolve()) if yolov5_dir else None
    ds = dataset_mod.load(data)
    dev = machine.parse_device(device)
    cuda = dev != "cpu"
    base, notes = knobs_mod.validate(space_mod.parse_baseline(baseline))
    engine_fixed = eng.fixed_knobs(dev)
    for knob, (value, why) in engine_fixed.items():
        base = dataclasses.replace(base, **{knob: value})
        notes.append(f"{knob} is not searched: {why}")
    if base.amp and not cuda:
        base = dataclasses.replace(base, amp=False)
        notes.append("baseline amp=off: AMP needs CUDA and this search runs on the CPU")
    if quality == "probe" and type(eng).probe is engines.Engine.probe:
        notes.append(f"the {engine} engine has no quality probe yet: quality off, accuracy knobs fixed at the baseline")
        quality = "off"
    policy = quality_mod.make_policy(quality, max_map_loss, probe_epochs, probe_fraction, weights, ds, probe_timeout_s)
    ram_limit = int(ram_limit_gb * 2**30) if ram_limit_gb else None
    fp_machine = machine.fingerprint(str(ds.yaml_path.parent))
    gpu_mb = fp_machine["gpus"][0]["memory_mb"] if cuda and fp_machine["gpus"] else None
    file_domains = space_mod.load_file(space_file) if space_file else {}
    fixed = space_mod.parse_fix(fix or [])
    space = space_mod.default(base, machine.cpu_cores(), cuda, gpu_mb)
    domains = {**space.domains, **file_domains, **fixed}
    domains.update({knob: space_mod.Domain(choices=(value,)) for knob, (value, _) in engine_fixed.items()})
    if policy.mode == "off":  # speed with zero accuracy risk: accuracy knobs stay at the baseline's values
        base_values = base.to_dict()  # (a knob pinned with --fix keeps the user's explicit value)
        domains.update({k: space_mod.Domain(choices=(base_values[k],)) for k in quality_mod.ACCURACY_KNOBS if k not in fixed})
        notes.append(f"quality off: {', '.join(k for k in quality_mod.ACCURACY_KNOBS if k not in fixed)} fixed at the baseline; no probes")
    if not cuda and True in domains["amp"].values():
        domains["amp"] = space_mod.Domain(choices=(False,))
        notes.append("amp=on dropped from the space: AMP needs CUDA")
    cache_values = domains["cache"].values()
    if "ram" in cache_values and len(cache_values) > 1:
        smallest = min(domains["imgsz"].values())
        need = dataset_mod.estimate_ram_cache_bytes(ds.train_images, smallest) * (1 + trial_mod.RAM_CACHE_MARGIN)
        if need > _ram_available(ram_limit):
            domains["cache"] = space_mod.Domain(choices=tuple(v for v in cache_values if v != "ram"))
            notes.append(
                f"cache=ram left out of the space: even at imgsz={smallest} the train images need about "
                f"{need / 2**30:.1f} GiB with the trainer's margin; {_ram_available(ram_limit) / 2**30:.1f} GiB available"
            )
    space = space_mod.Space(domains).containing(base)
    fp_data = dataset_mod.fingerprint(ds)
    warm, warm_cache = None, {}
    if warm_start:
        from speedopt import warmstart

        def ram_fits(k: Knobs) -> bool:
            need = dataset_mod.estimate_ram_cache_bytes(ds.train_images, k.imgsz) * (1 + trial_mod.RAM_CACHE_MARGIN)
            return need <= _ram_available(ram_limit)

        warm, warm_cache = warmstart.plan(warm_start, space, base, machine.cpu_cores(), cuda, ram_fits, fp_data["id"])
        notes.append(
            f"warm start from study {warm.study!r}: {len(warm.configs)} config(s) enqueued after the baseline"
            + (f", {len(warm_cache)} probe result(s) reused (same dataset)" if warm.same_dataset else ", dataset differs: probes not reused")
        )
    attrs = {
        "speedopt_version": __version__,
        "objective": OBJECTIVE,
        "data": str(ds.yaml_path),
        "dataset": fp_data,
        "machine": fp_machine,
        "engine": engine,
        "engine_version": eng.version(),
        "yolov5_dir": yolov5_dir,
        "device": dev,
        "space": space.to_dict(),
        "baseline": base.to_dict(),
        "steps": steps,
        "warmup": warmup,
        "epochs": trial_mod.DEFAULT_EPOCHS,
        "trial_timeout_s": trial_timeout_s,
        "ram_limit_bytes": ram_limit,
        "quality": policy.to_dict(),
        "trials": trials,
        "seed": seed,
    }
    if warm:
        attrs["warm_start"] = warm.to_dict()
    key = json.dumps([fp_data["id"], fp_machine["key"], engine, dev] + ([yolov5_dir] if yolov5_dir else []), sort_keys=True)
    name = study or f"{ds.name}-{machine.short_name(fp_machine)}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    return SearchPlan(
        storage_url=storage or DEFAULT_URL,
        study_name=name,
        trials=trials,
        timeout_s=timeout_s,
        seed=seed,
        space=space,
        baseline=base,
        notes=tuple(notes),
        attrs=attrs,
        ram_limit_bytes=ram_limit,
        trial_timeout_s=trial_timeout_s,
        warm_cache=warm_cache,
    )


def machine_mismatch(made_on: dict[str, Any], here: dict[str, Any]) -> str | None:
    """Why measurements of these two machines must not share a study (None if they may)."""
    for key, what in (("gpus", "GPU models/count"), ("cpu_cores", "CPU core count"), ("cpu_model", "CPU model")):
        if made_on.get(key) != here.get(key):
            return f"{what} differ: study made on {made_on.get(key)!r}, this machine has {here.get(key)!r}"
    return None


def plan_for_worker(storage_url: str, study_name: str) -> SearchPlan:
    """A plan rebuilt from an existing study's attrs, for `speedopt worker` on an identical machine."""
    study = find_study(storage_url, study_name)
    attrs = dict(study.user_attrs)
    if "space" not in attrs or "trials" not in attrs:
        raise UsageError(f"study {study_name!r} was not made by speedopt search; nothing to join")
    here = machine.fingerprint(str(Path(attrs["data"]).parent) if Path(attrs["data"]).exists() else ".")
    why = machine_mismatch(attrs["machine"]["key"], here["key"])
    if why:
        raise UsageError(f"refusing to join {study_name!r}: {why}; mixing machines in one study corrupts its numbers")
    dataset_mod.load(attrs["data"])  # the data must be here too, at the same path
    if attrs["device"] != "cpu":
        machine.parse_device(attrs["device"])
    return SearchPlan(
        storage_url=storage_url,
        study_name=study.study_name,
        trials=attrs["trials"],
        timeout_s=None,
        seed=attrs.get("seed", 0) + os.getpid(),  # workers must not all sample the same sequence
        space=space_mod.Space.from_dict(attrs["space"]),
        baseline=Knobs(**attrs["baseline"]),
        notes=(f"joined study {study.study_name!r} as a worker",),
        attrs=attrs,
        ram_limit_bytes=attrs.get("ram_limit_bytes"),
        trial_timeout_s=attrs.get("trial_timeout_s", 900.0),
    )


def _check_protocol(existing: dict[str, Any], planned: dict[str, Any], name: str) -> None:
    for key in PROTOCOL_KEYS:
        old, new = existing.get(key, planned[key]), planned[key]
        if old != new:
            if isinstance(old, dict) and isinstance(new, dict):
                diff = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
                old, new = {k: old.get(k) for k in diff}, {k: new.get(k) for k in diff}
            raise UsageError(
                f"study {name!r} was made with {key} {old} but this command gives {new}; "
                f"rerun with the same settings to resume it, or give --study NEW_NAME"
            )


def _worker_id() -> dict[str, Any]:
    me = psutil.Process()
    return {"host": platform.node(), "pid": me.pid, "started": me.create_time()}


def _alive(worker: dict[str, Any]) -> bool:
    try:
        return abs(psutil.Process(worker["pid"]).create_time() - worker["started"]) < 1.0
    except (psutil.NoSuchProcess, KeyError, TypeError):
        return False


def recover_interrupted(study, storage) -> list[int]:
    """Fail and re-enqueue RUNNING trials whose process on this host is gone (a killed search).

    Trials of other hosts are left to the storage heartbeat. Returns the failed trial numbers.
    """
    from optuna.trial import TrialState

    recovered = []
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = frozen.user_attrs.get("worker") or {}
        if worker.get("host") == platform.node() and not _alive(worker):
            storage.set_trial_state_values(frozen._trial_id, TrialState.FAIL)
            retry_callback()(study, storage.get_trial(frozen._trial_id))
            recovered.append(frozen.number)
    return recovered


def suggest(trial, space: space_mod.Space) -> Knobs:
    """Ask the trial for each sampled knob; fixed knobs take their one value."""
    values = dict(space.fixed())
    for name, domain in space.sampled().items():
        if domain.choices is not None:
            values[name] = trial.suggest_categorical(name, list(domain.choices))
        else:
            values[name] = trial.suggest_int(name, domain.low, domain.high, step=domain.step)
    return Knobs(**values)


class View:
    """What a search reports while it runs. The CLI supplies a live or plain implementation."""

    def start(self, plan: SearchPlan, so_far: SearchOutcome, notes: list[str]) -> None: ...
    def trial_started(self, number: int, knobs: Knobs) -> None: ...
    def trial_progress(self, update: dict[str, Any]) -> None: ...
    def trial_finished(self, number: int, result: TrialResult, baseline: bool, verdict: quality_mod.Verdict) -> None: ...
    def waiting(self, message: str) -> None: ...
    def stop(self) -> None: ...


def _store(trial, result: TrialResult) -> None:
    data = result.to_dict()
    data["log_tail"] = data["log_tail"][-2000:]
    for key, value in data.items():
        trial.set_user_attr(key, value)


def best_feasible(study) -> float | None:
    """Images/s of the fastest trial measured ok and judged feasible so far (None if none yet)."""
    from optuna.trial import TrialState

    speeds = [
        t.user_attrs["images_per_s"]
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get("status") == "ok" and t.user_attrs.get("feasible") is True
    ]
    return max(speeds) if speeds else None


def _measure(plan: SearchPlan, trial, knobs: Knobs, view: View) -> TrialResult:
    try:
        request = trial_mod.prepare(
            plan.attrs["data"],
            knobs,
            device=plan.attrs["device"],
            engine=plan.attrs["engine"],
            yolov5_dir=plan.attrs.get("yolov5_dir"),
            steps=plan.attrs["steps"],
            warmup=plan.attrs["warmup"],
            timeout_s=plan.trial_timeout_s,
            seed=plan.seed,
            ram_limit_bytes=plan.ram_limit_bytes,
        )
    except UsageError as exc:  # e.g. the dataset vanished mid-search: record, don't crash
        return TrialResult(Status.ERROR, str(exc), knobs.to_dict(), knobs.to_dict(), plan.attrs["device"], plan.attrs["engine"])
    if request.infeasible:
        return trial_mod.run(request)
    with hostlock.measuring(plan.study_name, on_wait=view.waiting):
        trial.set_user_attr("measure_started_at", time.time())
        result = trial_mod.run(request, progress=view.trial_progress)
        trial.set_user_attr("measure_ended_at", time.time())
    return result


def _objective(plan: SearchPlan, view: View, judge: quality_mod.Judge) -> Callable:
    def objective(trial) -> float:
        trial.set_user_attr("worker", _worker_id())
        knobs = suggest(trial, plan.space)
        if trial.user_attrs.get("role") == "baseline":
            knobs = plan.baseline  # knobs fixed at one value still run the user's own setting
        view.trial_started(trial.number, knobs)
        result = _measure(plan, trial, knobs, view)
        _store(trial, result)
        ok = result.status is Status.OK
        if ok:
            verdict = judge.verdict(Knobs.from_dict(result.config), result.images_per_s, best_feasible(trial.study))
        else:
            verdict = quality_mod.Verdict(quality_mod.signature(knobs), None, reason=f"not measured: {result.status.value}")
        for key, value in verdict.attrs().items():
            trial.set_user_attr(key, value)
        trial.set_constraint("measured", 0.0 if ok else 1.0)
        trial.set_constraint("map_loss", verdict.constraint())
        view.trial_finished(trial.number, result, baseline=trial.user_attrs.get("role") == "baseline", verdict=verdict)
        return float(result.images_per_s) if ok else 0.0

    return objective


def _open_study(plan: SearchPlan, storage):
    import optuna

    # constant_liar: trials still running on other workers count as pessimistic, so workers spread out
    sampler = optuna.samplers.TPESampler(seed=plan.seed, constant_liar=True)
    return optuna.create_study(
        study_name=plan.study_name, storage=storage, sampler=sampler, direction="maximize", load_if_exists=True
    )


def _counts(study) -> tuple[int, int, int]:
    """(complete, running, waiting) trials of the study."""
    from optuna.trial import TrialState

    states = [t.state for t in study.get_trials(deepcopy=False)]
    return states.count(TrialState.COMPLETE), states.count(TrialState.RUNNING), states.count(TrialState.WAITING)


def _guarded(objective: Callable, target: int) -> Callable:
    """Prune a trial that would exceed the target: another worker took the last slot meanwhile."""
    import optuna
    from optuna.trial import TrialState

    def run_one(trial) -> float:
        others = [t for t in trial.study.get_trials(deepcopy=False) if t.number != trial.number]
        busy = sum(t.state in (TrialState.COMPLETE, TrialState.RUNNING) for t in others)
        if busy >= target:
            raise optuna.TrialPruned(f"the study already has {target} trials complete or running")
        return objective(trial)

    return run_one


def _create(plan: SearchPlan, study, storage) -> list[str]:
    """First run of a study: attrs, baseline as trial 0, warm-start configs, reused probes."""
    from speedopt.transfer import merge_cache

    notes = []
    study.set_metric_names([OBJECTIVE])
    for key, value in plan.attrs.items():
        study.set_user_attr(key, value)
    sampled = plan.space.sampled()
    study.enqueue_trial({k: v for k, v in plan.baseline.to_dict().items() if k in sampled}, user_attrs={"role": "baseline"})
    for config in plan.attrs.get("warm_start", {}).get("configs", []):
        study.enqueue_trial(
            {k: v for k, v in config["knobs"].items() if k in sampled},
            user_attrs={"role": "warm-start", "source_trial": config["source_trial"]},
            skip_if_exists=True,
        )
    if plan.warm_cache:
        notes.append(f"{merge_cache(plan.warm_cache, storage)} probe result(s) copied from the warm-start source")
    return notes


def run(plan: SearchPlan, view: View, create: bool = True) -> SearchOutcome:
    """Create (or resume, or join) the study and run trials until it holds ``plan.trials`` complete ones.

    Several processes may run on one study: a trial that would exceed the target because another
    worker took the last slot is pruned, and a process stops when the remaining slots are taken.
    """
    import optuna

    storage = open_storage(plan.storage_url)
    if plan.study_name == quality_mod.CACHE_STUDY:
        raise UsageError(f"{quality_mod.CACHE_STUDY} is speedopt's probe cache; choose another --study name")
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    exists = plan.study_name in names
    if exists and create:
        existing = optuna.load_study(study_name=plan.study_name, storage=storage).user_attrs
        _check_protocol(existing, plan.attrs, plan.study_name)
    study = _open_study(plan, storage)
    notes = list(plan.notes)
    if not exists:
        notes += _create(plan, study, storage)
    else:
        if create and study.user_attrs.get("trials") != plan.trials:
            study.set_user_attr("trials", plan.trials)
        recovered = recover_interrupted(study, storage)
        if recovered:
            notes.append(f"trial(s) {', '.join(map(str, recovered))} were interrupted (process gone): marked failed and re-queued")
    view.start(plan, outcome(study), notes)
    started = time.monotonic()
    try:
        judge = quality_mod.Judge(
            quality_mod.Policy(**plan.attrs["quality"]),
            plan.attrs,
            storage,
            plan.study_name,
            on_wait=view.waiting,
            progress=view.trial_progress,
        )
        objective = _guarded(_objective(plan, view, judge), plan.trials)
        while True:
            complete, running, waiting = _counts(study)
            if complete >= plan.trials or (complete + running >= plan.trials and not waiting):
                break
            if plan.timeout_s is not None and time.monotonic() - started > plan.timeout_s:
                break
            study.optimize(objective, n_trials=1, gc_after_trial=False)
    finally:
        view.stop()
    return outcome(study)


def outcome(study) -> SearchOutcome:
    """Summarise a study from its stored trials: baseline, best feasible trial, statuses, probes."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    by_status: dict[str, int] = {}
    baseline = best = None
    best_number = None
    ran = hits = unprobed = rejected = 0
    probed: dict[str, dict[str, Any]] = {}
    for t in complete:
        attrs = t.user_attrs
        status = attrs.get("status", "error")
        by_status[status] = by_status.get(status, 0) + 1
        ran += attrs.get("probes_run", 0)
        hits += attrs.get("probe_cache_hits", 0)
        result = TrialResult.from_dict(attrs) if "status" in attrs else None
        if attrs.get("role") == "baseline" and baseline is None:
            baseline = result
        if status != "ok":
            continue
        feasible = attrs.get("feasible", True)
        unprobed += feasible == "unknown"
        rejected += feasible is False
        if attrs.get("probe_map50_95") is not None:
            probed[json.dumps(attrs["signature"], sort_keys=True)] = {
                "signature": attrs["signature"],
                "map50_95": attrs["probe_map50_95"],
                "map_loss": attrs["map_loss"],
                "feasible": feasible,
                "baseline_map50_95": attrs["baseline_map50_95"],
                "spread": attrs["map_spread"],
            }
        if feasible is True and (best is None or result.images_per_s > best.images_per_s):
            best, best_number = result, t.number
    return SearchOutcome(
        study.study_name, len(complete), by_status, baseline, best, best_number,
        ran, hits, unprobed, tuple(probed.values()), rejected,
    )


def list_studies(storage_url: str | None) -> list[dict[str, Any]]:
    """Every study in the storage with its trial counts and best measured throughput."""
    import optuna

    storage = open_storage(storage_url)
    rows = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if summary.study_name == quality_mod.CACHE_STUDY:
            continue
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        result = outcome(study)
        rows.append(
            {
                "study": summary.study_name,
                "trials": summary.n_trials,
                "complete": result.complete,
                "ok": result.by_status.get("ok", 0),
                "best_images_per_s": result.best.images_per_s if result.best else None,
                "speedup": result.speedup,
                "data": study.user_attrs.get("data"),
            }
        )
    return rows


def find_study(storage_url: str | None, name: str | None):
    """Load a study by name, or the only one in the storage; UsageError when that is ambiguous or absent."""
    import optuna

    storage = open_storage(storage_url)
    names = [
        s.study_name
        for s in optuna.get_all_study_summaries(storage, include_best_trial=False)
        if s.study_name != quality_mod.CACHE_STUDY
    ]
    where = storage_url or DEFAULT_URL
    if name is None:
        if len(names) != 1:
            listed = f": {', '.join(names)}" if names else ""
            raise UsageError(f"{len(names)} studies in {where}{listed}; name one with --study")
        name = names[0]
    if name not in names:
        raise UsageError(f"no study {name!r} in {where}; `speedopt studies` lists them")
    return optuna.load_study(study_name=name, storage=storage)
