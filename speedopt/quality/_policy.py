"""How accuracy is judged in a study: the accuracy signature, the allowed mAP loss, the probe budget.

Only some knobs can change the trained model: its *accuracy signature* (model, imgsz, freeze, batch,
amp). Workers and cache never change it and never trigger a probe.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from speedopt import defaults
from speedopt.checkpoint import check_weights_file
from speedopt.data import Dataset, label_path
from speedopt.errors import UsageError
from speedopt.knobs import KNOBS, Knobs, amp_text
from speedopt.measure import positive
from speedopt.quality._budget import ProbeBudget, cap_text

#: The accuracy signature: the registry's knobs that can change the trained model, in their printed order.
ACCURACY_KNOBS = tuple(sorted((k.name for k in KNOBS.values() if k.signature), key=lambda name: KNOBS[name].signature))
#: ``--quality``: probe a signature only when it could be the best (lazy), probe every one, or keep accuracy knobs
QualityMode = Literal["probe", "all", "off"]
_MODES: tuple[QualityMode, ...] = get_args(QualityMode)


class Feasibility(str, enum.Enum):
    """What the mAP-loss constraint decided for a trial."""

    FEASIBLE = "feasible"  # accuracy kept (probed within the allowed loss, or the baseline's own signature)
    REJECTED = "rejected"  # probed, and the loss exceeds the allowed loss by more than the probe's spread
    UNPROBED = "unprobed"  # measured ok but never judged: it could not have been the best feasible trial
    NOT_MEASURED = "not measured"  # the trial did not end ok: there is nothing to judge
    UNKNOWN = "unknown"  # its accuracy knobs differ, and the probe budget cannot tell signatures apart: never recommended

    @property
    def word(self) -> str:
        """The verdict as every output names it: kept, lost, unknown, or not judged."""
        return {"feasible": "kept", "rejected": "lost", "unknown": "unknown"}.get(self.value, "not judged")


def signature(knobs: Knobs) -> dict[str, Any]:
    """The knob values that can change the trained model. ``data`` appears only for a prepared copy, so
    a signature on the original images (and every probe cached before the knob existed) is unchanged."""
    values = {k: getattr(knobs, k) for k in ACCURACY_KNOBS}  # flat scalars: what to_dict() gives, without its deep copy
    return {k: v for k, v in values.items() if k != "data" or v != "original"}


def unchecked_knobs(policy: Policy, baseline: Knobs, config: Knobs) -> tuple[str, ...]:
    """The accuracy knobs of ``config`` that differ from the baseline's while nothing judges accuracy.

    Empty when the policy probes (the mAP-loss constraint judges every difference) or when the
    signatures are identical (the same trained model as the baseline, so accuracy is kept). A
    non-empty answer means any speedup claim for ``config`` is made without an accuracy check.
    """
    if policy.probing:
        return ()
    ours, theirs = signature(config), signature(baseline)
    return tuple(k for k in ACCURACY_KNOBS if ours.get(k) != theirs.get(k) and k not in policy.neutral)


def unchecked_text(knobs: tuple[str, ...]) -> str:
    """``accuracy not checked: model, imgsz differ from the baseline`` (empty when nothing is unchecked)."""
    if not knobs:
        return ""
    return f"accuracy not checked: {', '.join(knobs)} {'differs' if len(knobs) == 1 else 'differ'} from the baseline"


def signature_text(sig: dict[str, Any]) -> str:
    """A signature in one line: model imgsz batch amp freeze (and the prepared copy, when one)."""
    amp = amp_text(sig["amp"])
    data = f" data={sig['data']}" if "data" in sig else ""
    return f"{sig['model']} {sig['imgsz']}px b{sig['batch']} amp={amp} freeze={sig['freeze']}{data}"


@dataclass(frozen=True)
class MaxLoss:
    """The allowed mAP50-95 loss: absolute (0.01) or relative to the baseline (2%)."""

    value: float
    relative: bool = False

    def allowed(self, reference: float) -> float:
        return self.value * reference if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


#: Sane maxima of the probe options (the CLI refuses more at parse time; the Python API here).
MOST_PROBE_EPOCHS = 100_000
MOST_PROBE_SEEDS = 64
MOST_GROW_S = 366 * 86400.0


def parse_max_loss(text: str) -> MaxLoss:
    """``0.01`` (absolute mAP50-95) or ``2%`` (relative to the baseline's)."""
    raw = text.strip()
    relative = raw.endswith("%")
    try:
        value = float(raw.removesuffix("%"))
    except ValueError:
        raise UsageError(f"--max-map-loss must be a number like 0.01 or a percentage like 2%, got {text!r}") from None
    if not 0 <= value <= (100 if relative else 1):  # nan compares false: refused too, as inf and 1e308 are
        raise UsageError(f"--max-map-loss must be a loss in [0, 1] or a percentage in [0%, 100%], got {text!r}")
    return MaxLoss(value / 100 if relative else value, relative)


@dataclass(frozen=True)
class Policy:
    """How accuracy is judged in a study; stored in its attrs so workers judge alike."""

    mode: QualityMode = "probe"
    max_loss: str = defaults.MAX_MAP_LOSS
    epochs: int = defaults.PROBE_EPOCHS
    fraction: float = defaults.PROBE_FRACTION
    weights: str | None = None
    weights_id: str | None = None
    timeout_s: float = defaults.PROBE_TIMEOUT_S
    #: Seeds each probed signature trains with, paired with the baseline's (at least 2: a spread needs two).
    seeds: int = defaults.PROBE_SEEDS
    #: Seconds the baseline's probes may spend growing an uninformative budget (0: never grow).
    grow_s: float = defaults.PROBE_GROW_S
    #: Accuracy knobs this study shows cannot change the model (``data`` on a lossless copy: same pixels).
    neutral: tuple[str, ...] = ()
    #: The most one probe may train, as a share of the user's run (``--epochs`` x train images).
    share: float = defaults.PROBE_SHARE
    #: The chance the search may take that a recommended accuracy change loses more than allowed (over every look
    #: and candidate; spent over the confirmations: :mod:`speedopt.quality._rule`).
    risk: float = defaults.ACCURACY_RISK
    #: Fresh seeds the confirmation of a screened candidate probes at each of its two lengths.
    confirm_seeds: int = defaults.CONFIRM_SEEDS

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["neutral"] = list(self.neutral)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policy:
        return cls(**{**data, "neutral": tuple(data["neutral"])})

    @property
    def probing(self) -> bool:
        return self.mode in ("probe", "all")

    @property
    def lazy(self) -> bool:
        """Probe only signatures fast enough to become the best feasible trial (mode ``probe``)."""
        return self.mode == "probe"

    @property
    def budget(self) -> ProbeBudget:
        """The probe budget as asked (it may grow: :meth:`ProbeBudget.grown`)."""
        return ProbeBudget(self.epochs, self.fraction)

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.seeds))

    @property
    def max_seeds(self) -> int:
        """The seeds a candidate's look may grow to while its interval straddles the allowed loss."""
        return max(defaults.PROBE_MAX_SEEDS, self.seeds)

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
    path = check_weights_file(text)
    return str(path.resolve()), _weights_id(path)


def make_policy(
    mode: QualityMode,
    max_loss: str,
    epochs: int,
    fraction: float,
    weights: str | None,
    ds: Dataset,
    timeout_s: float = defaults.PROBE_TIMEOUT_S,
    seeds: int = defaults.PROBE_SEEDS,
    grow_s: float = defaults.PROBE_GROW_S,
    share: float = defaults.PROBE_SHARE,
    run_epochs: int = defaults.EPOCHS,
    risk: float = defaults.ACCURACY_RISK,
    confirm_seeds: int = defaults.CONFIRM_SEEDS,
) -> Policy:
    """Check the quality options against the dataset and the user's run (``run_epochs``: a probe trains at most
    ``share`` of it); raises UsageError with one line."""
    if mode not in _MODES:  # the Python API takes any string
        raise UsageError(f"--quality must be probe, all or off, got {mode!r}")
    parse_max_loss(max_loss)
    if mode == "off":
        return Policy(mode="off", max_loss=max_loss)
    if not 1 <= epochs <= MOST_PROBE_EPOCHS:
        raise UsageError(f"--probe-epochs must be an integer in [1, {MOST_PROBE_EPOCHS}], got {epochs}")
    if not 0 < fraction <= 1:
        raise UsageError(f"--probe-fraction must be in (0, 1], got {fraction}")
    positive(timeout_s, "--probe-timeout", "seconds")
    if not 2 <= seeds <= MOST_PROBE_SEEDS:  # a probe per seed: 10**9 seeds once grew the plan to 22 GB
        raise UsageError(f"--probe-seeds must be at least 2 (a spread needs two seeds) and at most {MOST_PROBE_SEEDS}, got {seeds}")
    if not 0 <= grow_s <= MOST_GROW_S:
        raise UsageError(f"--probe-grow must be 0 to {MOST_GROW_S:.0f} seconds, got {grow_s}")
    if not 2 <= confirm_seeds <= MOST_PROBE_SEEDS:
        raise UsageError(f"--confirm-seeds must be at least 2 (a spread needs two seeds) and at most {MOST_PROBE_SEEDS}, got {confirm_seeds}")
    if not 0 < risk < 1:
        raise UsageError(f"--risk must be a chance in (0, 1), like 0.1 or 10%, got {risk:g}")
    if not 0 < share <= 1:
        raise UsageError(f"--probe-share must be a share of the run in (0, 1], like 0.05 or 5%, got {share:g}")
    if not ProbeBudget(epochs, fraction).within(share, run_epochs):
        raise UsageError(
            f"a probe of {epochs} epochs on {fraction:g} of the train set trains more than {cap_text(share, run_epochs)}; "
            "lower --probe-epochs or --probe-fraction, or raise --probe-share"
        )
    if not ds.val_images:
        raise UsageError("the val split is empty; quality probes validate on it (add val images or use --quality off)")
    if not any(label_path(p).is_file() and label_path(p).stat().st_size for p in ds.val_images):
        raise UsageError("the val split has no labels; quality probes need labelled val images (or use --quality off)")
    path, wid = check_weights(weights) if weights else (None, None)
    return Policy(
        mode=mode, max_loss=max_loss, epochs=epochs, fraction=fraction, weights=path, weights_id=wid, timeout_s=timeout_s,
        seeds=seeds, grow_s=grow_s, share=share, risk=risk, confirm_seeds=confirm_seeds,
    )
