"""``speedopt verify``: run the recommended command for real and compare its epochs with the prediction.

The study predicts an epoch of the recommended config as ``train images / measured images/s + one
validation pass`` (the projection's arithmetic). Verification runs the very command the study
prints, through the trainer's own entry point (see :mod:`speedopt.reporting._trainer_run`), for a
few epochs, optionally on a leading fraction of the train set, under the host measurement lock (it
never runs beside a trial), in a temporary run folder that is removed. The result is stored in the
study (:func:`speedopt.study.schema.write_verification`) and shown by :func:`verified_section` in the report.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import shutil
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from speedopt.engines import EngineSpec
from speedopt.errors import UsageError
from speedopt.isolation import measuring, private_folder
from speedopt.knobs import check_loads
from speedopt.measure import ValidationTime
from speedopt.reporting._recommend import Recommendation, recommend
from speedopt.reporting._trainer_run import (
    Note,
    default_timeout,
    ending,
    epoch_seconds,
    finished_at,
    launch,
    offline_env,
    run_trainer,
)
from speedopt.search import validation_time
from speedopt.status import Status
from speedopt.study import schema

if TYPE_CHECKING:
    import optuna

@dataclass(frozen=True)
class Verification:
    """One real run of the recommended command, its epoch times and the study's prediction for them."""

    study: str
    status: Status
    message: str
    command: str  # the printed command as run: epochs (and fraction) added, run folder private
    engine: str
    trial: int  # the recommended trial whose throughput makes the prediction
    epochs: int
    fraction: float | None  # None: the whole train set
    train_images: int  # per epoch, in this run
    epoch_s: tuple[float, ...]  # each epoch as the trainer timed it (training + its validation pass)
    predicted_images_per_s: float
    val_s: float | None  # one validation pass, timed once (None: could not be timed)
    timing: str  # where the epoch times come from
    started: str  # ISO 8601, UTC
    wall_s: float
    images_per_s_source: str = ""  # "trial 4" or "the median of trial 4's finals rounds"
    warmup_epochs: int = 0  # the leading epochs in the trainer's warm-up (its optimizer steps more often): not compared
    notes: tuple[str, ...] = ()
    log_tail: str = dataclasses.field(default="", repr=False)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def predicted_epoch_s(self) -> float:
        """train images / measured images/s, plus the validation pass when it was timed."""
        return self.train_images / self.predicted_images_per_s + (self.val_s or 0.0)

    @property
    def steady_epoch_s(self) -> tuple[float, ...]:
        """The epochs after the trainer's warm-up, the run's steady state the trials measured (all of them where
        none ran after it)."""
        return self.epoch_s[self.warmup_epochs :] or self.epoch_s

    @property
    def measured_epoch_s(self) -> float | None:
        """The median steady epoch (None: none finished)."""
        return statistics.median(self.steady_epoch_s) if self.epoch_s else None

    @property
    def measured_images_per_s(self) -> float | None:
        """train images / (median epoch - the timed validation pass); None where that is not positive."""
        epoch = self.measured_epoch_s
        if epoch is None:
            return None
        train_s = epoch - (self.val_s or 0.0)
        return self.train_images / train_s if train_s > 0 else None

    @property
    def epoch_error(self) -> float | None:
        """measured / predicted - 1 for the epoch time (+0.10: the epoch took 10 % longer than predicted)."""
        return _error(self.measured_epoch_s, self.predicted_epoch_s)

    @property
    def images_per_s_error(self) -> float | None:
        """measured / predicted - 1 for the throughput (-0.10: 10 % fewer images/s than predicted)."""
        return _error(self.measured_images_per_s, self.predicted_images_per_s)

    @property
    def images_per_s_basis(self) -> str:
        """How the measured images/s was derived (it is not measured directly)."""
        if self.val_s is None:
            return "train images / median epoch time (validation pass not timed: included)"
        return f"train images / (median epoch time - {self.val_s:.2f} s timed validation pass)"

    @property
    def epochs_basis(self) -> str:
        ran = len(self.epoch_s)
        if not ran:
            return f"no epoch finished, {self.timing}"
        which = "all" if ran == self.epochs else f"{ran} of {self.epochs} asked"
        steady = len(self.steady_epoch_s)
        if steady < ran:
            which += f"; the first {ran - steady} in the trainer's warm-up left out"
        elif self.warmup_epochs:
            which += "; all in the trainer's warm-up: none after it ran"
        return f"median of {steady} epoch{'s' if steady != 1 else ''} ({which}), {self.timing}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON record stored in the study (derived figures included, for readers of the JSON)."""
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        data["epoch_s"] = list(self.epoch_s)
        data["notes"] = list(self.notes)
        data.update(
            predicted_epoch_s=self.predicted_epoch_s,
            measured_epoch_s=self.measured_epoch_s,
            measured_images_per_s=self.measured_images_per_s,
            epoch_error=self.epoch_error,
            images_per_s_error=self.images_per_s_error,
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verification:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values["status"])
        values["epoch_s"] = tuple(float(s) for s in values.get("epoch_s", ()))
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)

    def lines(self) -> list[str]:
        """A plain-text summary for a terminal."""
        epochs = f"{self.epochs} epoch{'s' if self.epochs != 1 else ''}"
        out = [
            f"verify: {self.status.value}: {self.message}",
            f"  ran {epochs} of: {self.command}",
            f"  train images per epoch: {self.train_images}{_fraction_text(self)}",
            f"  {'':<12}{'predicted':>12}{'measured':>12}{'error':>10}",
            f"  {'epoch time':<12}{_num(self.predicted_epoch_s, ' s'):>12}{_num(self.measured_epoch_s, ' s'):>12}"
            f"{_pct(self.epoch_error):>10}   measured: {self.epochs_basis}",
            f"  {'images/s':<12}{_num(self.predicted_images_per_s):>12}{_num(self.measured_images_per_s):>12}"
            f"{_pct(self.images_per_s_error):>10}   measured: {self.images_per_s_basis}",
            f"  predicted epoch = {_prediction_text(self)}",
        ]
        if self.epoch_s:
            out.append("  per epoch: " + ", ".join(f"{s:.2f} s" for s in self.epoch_s))
        out += [f"  note: {n}" for n in self.notes]
        if not self.ok and self.log_tail:
            out.append("  trainer log (last lines):")
            out += [f"    {line}" for line in self.log_tail.splitlines()]
        return out


def _error(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or not predicted:
        return None
    return measured / predicted - 1.0


def _num(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} %"


def _fraction_text(v: Verification) -> str:
    return f" (fraction {v.fraction:g}: the leading {v.train_images} train images)" if v.fraction else " (the whole train set)"


def _prediction_text(v: Verification) -> str:
    val = f" + {v.val_s:.2f} s validation pass" if v.val_s is not None else " (validation pass not timed: left out)"
    return f"{v.train_images} train images / {v.predicted_images_per_s:.2f} images/s ({v.images_per_s_source or f'trial {v.trial}'}){val}"



def _predicted_images_per_s(rec: Recommendation) -> tuple[float, str]:
    """The recommendation's images/s (its finals' median when it had finals) and where it comes from."""
    value = rec.images_per_s
    if not value:
        raise UsageError(f"study {rec.study!r}: the recommended trial {rec.trial.number} has no measured images/s")
    source = f"the median of trial {rec.trial.number}'s finals rounds" if rec.median_images_per_s else f"trial {rec.trial.number}"
    return float(value), source



def _warmup_epochs(rec: Recommendation, epochs: int, train_images: int) -> int:
    """The leading epochs of a run of ``epochs`` that lie (even in part) in the trainer's warm-up."""
    engine = rec.protocol.engine_spec.engine
    return math.ceil(engine.warmup_epochs(epochs, math.ceil(train_images / rec.knobs.batch)) - 1e-9)


def _with_checkout(rec: Recommendation, checkout: str) -> Recommendation:
    """The recommendation run from the user's own yolov5 checkout (checked to be one: UsageError otherwise)."""
    spec = EngineSpec(rec.protocol.engine, checkout)
    root = spec.engine.checkout  # checked: a clone of ultralytics/yolov5
    if root is None:
        raise UsageError(f"--yolov5-dir is for a study of the classic yolov5 engine; study {rec.study!r} ran {rec.protocol.engine}")
    ran = EngineSpec(spec.name, str(root))
    return dataclasses.replace(rec, protocol=dataclasses.replace(rec.protocol, **ran.record()))


def check_verify_options(epochs: int, fraction: float | None, timeout_s: float | None) -> None:
    """UsageError (one line) for options no run can satisfy."""
    if epochs < 1:
        raise UsageError(f"--epochs must be at least 1, got {epochs}")
    if fraction is not None and not (0.0 < fraction <= 1.0 and math.isfinite(fraction)):
        raise UsageError(f"--fraction must be in (0, 1], got {fraction:g}")
    if timeout_s is not None and not timeout_s > 0:
        raise UsageError(f"--timeout must be positive seconds, got {timeout_s:g}")


def verify(
    study: optuna.Study,
    epochs: int = 1,
    fraction: float | None = None,
    timeout_s: float | None = None,
    note: Note | None = None,
    on_wait: Note | None = None,
    checkout: str | None = None,
) -> Verification:
    """Run the study's recommended command for ``epochs`` epochs and compare with its prediction.

    ``fraction``: a leading fraction of the train set (None or 1: all of it). ``timeout_s`` (default:
    :func:`default_timeout`) stops the run. ``note`` hears progress (epoch N/E as results appear);
    ``on_wait`` hears that the host lock is held by another measurement. The result is stored in the
    study (:func:`speedopt.study.schema.write_verification`) and returned; a failed run ends in its status, never an exception.
    ``checkout``: the user's yolov5 checkout a classic study runs (``--yolov5-dir``; an imported study names none: an
    export's checkout is never run). UsageError for bad options or a study without a recommendation.
    """
    check_verify_options(epochs, fraction, timeout_s)
    if fraction == 1.0:
        fraction = None
    rec = recommend(study)
    if rec is None:
        raise UsageError(f"study {study.study_name!r} has no recommendation yet (no feasible trial measured ok); run speedopt search first")
    if checkout is not None:
        rec = _with_checkout(rec, checkout)
    # A study may come from elsewhere: a .pt it names as its model, and the checkpoint its command starts
    # from (pretrained=), are inspected before a trainer loads them.
    check_loads(rec.knobs.model, rec.weights)
    ips, ips_source = _predicted_images_per_s(rec)
    env = offline_env(rec)
    notes: list[str] = []
    if note:
        note("one validation pass for the prediction: from the study, or timed once now")
    val = validation_time(study, rec.protocol, rec.knobs)  # its own job under the host lock: before ours
    val_s = val.seconds if isinstance(val, ValidationTime) else None
    if not isinstance(val, ValidationTime):
        notes.append(f"the validation pass could not be timed ({val.status.value}: {val.message}); the prediction leaves it out")
    work = private_folder("speedopt-verify-")  # owner recorded: a sweep removes it should this process be killed
    try:
        run = launch(rec, epochs, fraction, work)
        predicted_epoch = run.train_images / ips + (val_s or 0.0)
        limit = timeout_s if timeout_s is not None else default_timeout(rec, run.train_images, epochs, predicted_epoch)
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        with measuring(study.study_name, on_wait=on_wait):
            if note:
                note(f"running {run.shown} (predicted epoch {predicted_epoch:.2f} s, timeout {limit:.0f} s)")
            seen = run_trainer(run, work, env, epochs, limit, note)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    status, message = ending(seen, epochs, limit)
    finished, timing = finished_at(seen.rows, seen.seen_at, seen.train_started, seen.started)
    train_images = run.train_images
    if seen.logged_train_images is not None and seen.logged_train_images != train_images:
        notes.append(f"the trainer reported {seen.logged_train_images} train images (speedopt counted {train_images}); its count is used")
        train_images = seen.logged_train_images
    result = Verification(
        warmup_epochs=_warmup_epochs(rec, epochs, train_images),
        study=study.study_name,
        status=status,
        message=message,
        command=run.shown,
        engine=rec.protocol.engine,
        trial=rec.trial.number,
        epochs=epochs,
        fraction=fraction,
        train_images=train_images,
        epoch_s=epoch_seconds(finished),
        predicted_images_per_s=ips,
        images_per_s_source=ips_source,
        val_s=val_s,
        timing=timing,
        started=started_at,
        wall_s=seen.wall_s,
        notes=tuple(notes) + run.notes,
        log_tail=seen.log_tail,
    )
    schema.write_verification(study, result.to_dict())
    return result


# -- the report ----------------------------------------------------------------------------------------


def stored(study: optuna.Study) -> Verification | None:
    """The study's last verification (None when it has none, or the stored record is unreadable)."""
    data = schema.read_verification(study)
    if data is None:
        return None
    try:
        return Verification.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None


def verified_section(study: optuna.Study) -> list[str]:
    """The report's "## Verified" section (markdown lines), or [] when the study holds no verification."""
    v = stored(study)
    if v is None:
        return []
    epochs = f"{v.epochs} epoch{'s' if v.epochs != 1 else ''}"
    lines = [
        "## Verified",
        "",
        f"`speedopt verify` ran the recommended command for real ({v.started}, {v.wall_s:.0f} s): "
        f"**{v.status.value}**: {v.message}.",
        "",
        "```bash",
        v.command,
        "```",
        "",
        "| | predicted | measured | error |",
        "|---|---:|---:|---:|",
        f"| epoch time | {_num(v.predicted_epoch_s, ' s')} | {_num(v.measured_epoch_s, ' s')} | {_pct(v.epoch_error)} |",
        f"| images/s | {_num(v.predicted_images_per_s)} | {_num(v.measured_images_per_s)} | {_pct(v.images_per_s_error)} |",
        "",
        f"- Command run: {epochs}, {v.train_images} train images per epoch{_fraction_text(v)}.",
        f"- Predicted epoch = {_prediction_text(v)}.",
        f"- Measured epoch time: {v.epochs_basis}; per epoch: {', '.join(f'{s:.2f} s' for s in v.epoch_s) or 'none finished'}.",
        f"- Measured images/s = {v.images_per_s_basis}.",
        "- Error = measured / predicted − 1.",
    ]
    lines += [f"- Note: {n.rstrip('.')}." for n in v.notes]
    return lines + [""]
