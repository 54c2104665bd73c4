"""The mAP-loss constraint: quality probes that keep accuracy honest.

Only some knobs can change the trained model: its *accuracy signature* (model, imgsz, freeze,
batch, amp). A quality probe trains one signature for a fixed budget (epochs x fraction of the
training set, fixed seed) and validates mAP50 and mAP50-95 on the val split. The baseline signature
is probed with two seeds: their mean is the reference, their difference the spread (the noise of
the probe itself). mAP loss = reference - candidate. A candidate is feasible when its loss is at
most the allowed loss plus the spread; it is rejected only when the loss exceeds the allowed loss
by more than the noise could explain.

Probes are lazy (a signature is probed only when its measured throughput could make it the best
feasible trial so far) and cached in the study storage, in a study of their own keyed by (dataset
fingerprint, signature, budget, weights, seed, engine), so every worker and every later study on
the same dataset reuses them, on any machine: accuracy does not depend on the machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from speedopt import engines, hostlock, isolation, machine
from speedopt.dataset import Dataset, label_path
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.offline import cache_dir

ACCURACY_KNOBS = ("model", "imgsz", "freeze", "batch", "amp")
CACHE_STUDY = "speedopt-probe-cache"
BASELINE_SEEDS = (0, 1)
LOW_MAP = 0.05  # below this baseline mAP50-95 a probe cannot tell signatures apart


def signature(knobs: Knobs) -> dict[str, Any]:
    """The knob values that can change the trained model."""
    values = knobs.to_dict()
    return {k: values[k] for k in ACCURACY_KNOBS}


@dataclass(frozen=True)
class MaxLoss:
    """The allowed mAP50-95 loss: absolute (0.01) or relative to the baseline (2%)."""

    value: float
    relative: bool = False

    def allowed(self, reference: float) -> float:
        return self.value * reference if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


def parse_max_loss(text: str) -> MaxLoss:
    """``0.01`` (absolute mAP50-95) or ``2%`` (relative to the baseline's)."""
    raw = text.strip()
    relative = raw.endswith("%")
    try:
        value = float(raw.removesuffix("%"))
    except ValueError:
        raise UsageError(f"--max-map-loss must be a number like 0.01 or a percentage like 2%, got {text!r}") from None
    if value < 0 or value != value:
        raise UsageError(f"--max-map-loss must not be negative, got {text!r}")
    return MaxLoss(value / 100 if relative else value, relative)


@dataclass(frozen=True)
class Policy:
    """How accuracy is judged in a study; stored in its attrs so workers judge alike."""

    mode: str = "probe"  # probe | off
    max_loss: str = "0.01"
    epochs: int = 10
    fraction: float = 0.25
    weights: str | None = None
    weights_id: str | None = None
    timeout_s: float = 3600.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def limit(self) -> MaxLoss:
        return parse_max_loss(self.max_loss)


def _weights_id(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def check_weights(text: str) -> tuple[str, str]:
    """A local YOLO checkpoint: (absolute path, content hash). Raises UsageError otherwise."""
    path = Path(text).expanduser()
    if not path.is_file():
        raise UsageError(f"--weights file not found: {text}; give a local .pt checkpoint (speedopt never downloads)")
    try:
        import torch

        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:
        ckpt = None
    if not isinstance(ckpt, dict) or not ({"model", "ema"} & set(ckpt)):
        raise UsageError(f"--weights {text} is not a YOLO checkpoint (a torch file with a 'model' entry)")
    return str(path.resolve()), _weights_id(path)


def make_policy(
    mode: str, max_loss: str, epochs: int, fraction: float, weights: str | None, ds: Dataset, timeout_s: float = 3600.0
) -> Policy:
    """Check the quality options against the dataset; raises UsageError with one line."""
    if mode not in ("probe", "off"):
        raise UsageError(f"--quality must be probe or off, got {mode!r}")
    parse_max_loss(max_loss)
    if mode == "off":
        return Policy(mode="off", max_loss=max_loss)
    if epochs < 1:
        raise UsageError(f"--probe-epochs must be at least 1, got {epochs}")
    if not 0 < fraction <= 1:
        raise UsageError(f"--probe-fraction must be in (0, 1], got {fraction}")
    if not ds.val_images:
        raise UsageError("the val split is empty; quality probes validate on it (add val images or use --quality off)")
    if not any(label_path(p).is_file() and label_path(p).stat().st_size for p in ds.val_images):
        raise UsageError("the val split has no labels; quality probes need labelled val images (or use --quality off)")
    path, wid = check_weights(weights) if weights else (None, None)
    return Policy(mode="probe", max_loss=max_loss, epochs=epochs, fraction=fraction, weights=path, weights_id=wid, timeout_s=timeout_s)


class ProbeCache:
    """Probe results in the storage, as user attrs of one dedicated study, shared by all studies."""

    def __init__(self, storage):
        import optuna

        self.study = optuna.create_study(study_name=CACHE_STUDY, storage=storage, load_if_exists=True)

    @staticmethod
    def key(dataset_id: str, sig: dict[str, Any], policy: Policy, seed: int, engine: str) -> str:
        material = json.dumps(
            [dataset_id, sig, policy.epochs, policy.fraction, policy.weights_id, seed, engine], sort_keys=True
        )
        return "probe:" + hashlib.sha256(material.encode()).hexdigest()[:20]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.study._storage.get_study_user_attrs(self.study._study_id).get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.study.set_user_attr(key, value)


@dataclass(frozen=True)
class Verdict:
    """What the quality gate decided for one measured config."""

    signature: dict[str, Any]
    feasible: bool | None  # None: not probed (it could not have been the best feasible trial)
    map50: float | None = None
    map50_95: float | None = None
    map_loss: float | None = None
    allowed: float | None = None
    spread: float | None = None
    reference: float | None = None
    probes_run: int = 0
    cache_hits: int = 0
    reason: str = ""

    def constraint(self) -> float:
        """Optuna constraint value (<= 0 feasible): loss minus (allowed loss + spread) when probed."""
        if self.map_loss is None or self.allowed is None:
            return 1.0 if self.feasible is False else 0.0
        return self.map_loss - self.allowed - (self.spread or 0.0)

    def attrs(self) -> dict[str, Any]:
        """The trial user attrs recording this verdict."""
        return {
            "signature": self.signature,
            "feasible": "unknown" if self.feasible is None else self.feasible,
            "probe_map50": self.map50,
            "probe_map50_95": self.map50_95,
            "map_loss": self.map_loss,
            "allowed_map_loss": self.allowed,
            "map_spread": self.spread,
            "baseline_map50_95": self.reference,
            "probes_run": self.probes_run,
            "probe_cache_hits": self.cache_hits,
            "quality_reason": self.reason,
        }


@dataclass
class Judge:
    """Decides whether a measured config keeps accuracy, probing lazily through the cache."""

    policy: Policy
    attrs: dict[str, Any]  # the study attrs: data, dataset fingerprint, engine, device, baseline
    storage: Any
    owner: str  # who holds the host lock while probing (the study name)
    on_wait: Callable[[str], None] | None = None
    progress: Callable[[dict[str, Any]], None] | None = None
    _cache: ProbeCache | None = field(default=None, init=False)
    ran: int = field(default=0, init=False)
    hits: int = field(default=0, init=False)
    _reference: tuple | None = field(default=None, init=False)  # once per process, success or failure

    @property
    def baseline(self) -> Knobs:
        return Knobs(**self.attrs["baseline"])

    def _probe_knobs(self, knobs: Knobs) -> Knobs:
        # System knobs do not change accuracy: probes load data as fast as this machine allows.
        return Knobs(**signature(knobs), workers=min(8, machine.cpu_cores()), cache="none")

    def score(self, knobs: Knobs, seed: int) -> dict[str, Any]:
        """Val mAP of this signature for one seed: from the cache, else from a probe run now."""
        if self._cache is None:
            self._cache = ProbeCache(self.storage)
        sig = signature(knobs)
        key = ProbeCache.key(self.attrs["dataset"]["id"], sig, self.policy, seed, self.attrs["engine"])
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        request = {
            "kind": "probe",
            "engine": self.attrs["engine"],
            "yolov5_dir": self.attrs.get("yolov5_dir"),
            "data_yaml": self.attrs["data"],
            "knobs": self._probe_knobs(knobs).to_dict(),
            "device": self.attrs["device"],
            "epochs": self.policy.epochs,
            "fraction": self.policy.fraction,
            "seed": seed,
            "weights": self.policy.weights,
            "cache_dir": str(cache_dir()),
        }
        engine = engines.get(self.attrs["engine"], yolov5_dir=self.attrs.get("yolov5_dir"))
        label = f"probe {sig['model']} {sig['imgsz']}px b{sig['batch']} freeze={sig['freeze']} seed {seed}"

        def show(update: dict[str, Any]) -> None:
            if self.progress:
                self.progress({**update, "phase": f"{label}: {update['phase']}"})

        with hostlock.measuring(self.owner, on_wait=self.on_wait):
            done = isolation.run_isolated(
                "speedopt.job_process",
                json.dumps(request),
                engine.environment(Path(request["cache_dir"])),
                self.policy.timeout_s,
                show,
            )
        self.ran += 1
        if done.timed_out:
            result = {"status": "timeout", "message": f"probe exceeded {self.policy.timeout_s:g} s"}
        elif done.result is None:
            status, message = done.failure()
            result = {"status": status.value, "message": message}
        else:
            result = done.result
        result = {
            **result,
            "signature": sig,
            "seed": seed,
            "epochs": self.policy.epochs,
            "fraction": self.policy.fraction,
            "dataset": self.attrs["dataset"]["id"],
        }
        if result["status"] == "ok":
            self._cache.put(key, result)  # failures are not cached: a later run may have more memory or time
        return result

    def reference(self) -> tuple[float | None, float | None, list[dict[str, Any]], str]:
        """Baseline mAP50-95 (mean of two seeds), their spread, the runs, and why not if unavailable."""
        if self._reference is None:
            self._reference = self._probe_reference()
        return self._reference

    def _probe_reference(self) -> tuple[float | None, float | None, list[dict[str, Any]], str]:
        runs = [self.score(self.baseline, seed) for seed in BASELINE_SEEDS]
        failed = [r for r in runs if r["status"] != "ok"]
        if failed:
            return None, None, runs, f"baseline probe ended {failed[0]['status']}: {failed[0]['message']}"
        values = [r["map50_95"] for r in runs]
        return sum(values) / len(values), max(values) - min(values), runs, ""

    def verdict(self, knobs: Knobs, images_per_s: float, best_feasible: float | None) -> Verdict:
        """Feasibility of a config measured ok at ``images_per_s``, given the best feasible so far."""
        sig = signature(knobs)
        ran0, hits0 = self.ran, self.hits
        if self.policy.mode == "off":
            return Verdict(sig, True, reason="quality off: accuracy knobs fixed at the baseline")
        if sig == signature(self.baseline):
            return Verdict(sig, True, map_loss=0.0, reason="the baseline's own signature")
        if best_feasible is not None and images_per_s <= best_feasible:
            return Verdict(sig, None, reason=f"not probed: {images_per_s:.1f} images/s cannot beat the best feasible {best_feasible:.1f}")
        ref, spread, _, why = self.reference()
        if ref is None:
            return Verdict(sig, None, reason=f"cannot judge: {why}", probes_run=self.ran - ran0, cache_hits=self.hits - hits0)
        allowed = self.policy.limit.allowed(ref)
        run = self.score(knobs, BASELINE_SEEDS[0])
        if run["status"] != "ok":
            return Verdict(
                sig, False, allowed=allowed, spread=spread, reference=ref,
                reason=f"probe ended {run['status']}: {run['message']}",
                probes_run=self.ran - ran0, cache_hits=self.hits - hits0,
            )
        loss = ref - run["map50_95"]
        feasible = loss <= allowed + spread
        reason = (
            f"mAP50-95 {run['map50_95']:.4f} vs baseline {ref:.4f} (spread {spread:.4f}): loss {loss:.4f} "
            + ("within" if feasible else "exceeds")
            + f" the allowed {allowed:.4f} + spread"
        )
        return Verdict(
            sig, feasible, run["map50"], run["map50_95"], loss, allowed, spread, ref,
            self.ran - ran0, self.hits - hits0, reason,
        )
