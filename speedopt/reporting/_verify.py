"""``speedopt verify``: run the recommended command for real and compare its epochs with the prediction.

The study predicts an epoch of the recommended config as ``train images / measured images/s + one
validation pass`` (the projection's arithmetic). Verification runs the very command the study
prints, through the trainer's own entry point (the ``yolo`` executable of this environment, or
``python train.py`` / ``python -m yolov5.train``), for a few epochs, optionally on a leading
fraction of the train set, and reads each epoch's time from the trainer's own output:

- Ultralytics writes ``results.csv`` with a cumulative ``time`` column (seconds since training
  started, written after the epoch's validation pass): epoch e takes ``time[e] - time[e-1]``;
- the classic ``train.py`` writes ``results.csv`` without a time column: each new row is
  timestamped as it appears (polled every :data:`POLL_S` s), and epoch 1 starts when the log prints
  its ``Starting training for`` line (stdout read line by line, timestamped).

For Ultralytics the short run gets ``close_mosaic=0`` (a run of at most 10 epochs would otherwise
train without mosaic from epoch 1, while the full run and the trials train with it) and
``optimizer=SGD`` where ``optimizer=auto`` picks SGD for the full run but would not for the short one;
both are printed with the command and explained in its notes.

The run holds the host measurement lock (it never runs beside a trial), in its own session (a
timeout or Ctrl-C kills its whole process group), offline (the engine's environment: YOLO_OFFLINE,
private config folders holding a local font), in a temporary run folder that is removed. The result
is stored in the study (user attr :data:`ATTR`) and shown by :func:`verified_section` in the report.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import yaml

from speedopt import engines
from speedopt.errors import UsageError
from speedopt.measure import ValidationTime, measuring
from speedopt.measure._runner import kill_group, log_tail
from speedopt.offline import cache_dir, place_font
from speedopt.reporting._projection import validation_time
from speedopt.reporting._recommend import Recommendation, recommend
from speedopt.status import Status

if TYPE_CHECKING:
    import optuna

ATTR = "verify"  # the study user attr that holds the last verification (a JSON dict)
MARKER = "Starting training for"  # both trainers log it once, right before epoch 1 starts
POLL_S = 0.1  # results.csv poll interval: the resolution of the classic engine's epoch times
RUN_NAME = "verify"
CLOSE_MOSAIC = 10  # Ultralytics' default: mosaic augmentation is turned off for the last 10 epochs
Note = Callable[[str], None]

_USING = re.compile(r"Using (\d+) train, (\d+) val images")  # Ultralytics' own count of the train set it runs
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


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
    def measured_epoch_s(self) -> float | None:
        """The median epoch over all epochs that ran (None: none finished)."""
        return statistics.median(self.epoch_s) if self.epoch_s else None

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
        return f"median of {ran} epoch{'s' if ran != 1 else ''} ({which}), {self.timing}"

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


# -- reading the trainer's output ---------------------------------------------------------------------


def parse_results(text: str) -> list[dict[str, str]]:
    """The complete rows of a trainer's results.csv (a last line still being written is left out).

    Both trainers pad their CSV with spaces (the classic one to 20 characters); keys and values are stripped.
    """
    lines = text.split("\n")[:-1]  # only lines ended by a newline
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        if line.strip():
            rows.append(dict(zip(header, (v.strip() for v in line.split(",")))))
    return rows


def cumulative_times(rows: Sequence[dict[str, str]]) -> list[float] | None:
    """Ultralytics' ``time`` column (seconds from the start of training to each epoch's row), or None without one."""
    try:
        return [float(r["time"]) for r in rows]
    except (KeyError, ValueError):
        return None


def epoch_seconds(finished: Sequence[float]) -> tuple[float, ...]:
    """Each epoch's seconds from the moments (since training started) its results row was written."""
    out, previous = [], 0.0
    for t in finished:
        out.append(t - previous)
        previous = t
    return tuple(out)


def leading_count(total: int, fraction: float | None) -> int:
    """The train images a leading ``fraction`` keeps, as Ultralytics counts them: ``max(1, round(total * f))``."""
    if fraction is None:
        return total
    return max(1, round(total * fraction))


def default_timeout(rec: Recommendation, train_images: int, epochs: int, predicted_epoch_s: float) -> float:
    """3x the predicted run (dataset build scaled from the trial, plus epochs) and 5 minutes for start-up."""
    result = rec.trial.result
    build = 0.0
    if result.train_build_s is not None and result.images_used:
        build = result.train_build_s * train_images / result.images_used + (result.val_build_s or 0.0)
    return 300.0 + 3.0 * (build + epochs * predicted_epoch_s)


# -- running it ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Launch:
    """How the command is started here: argv, the printed form, the train images it trains on."""

    argv: list[str]
    shown: str
    results: Path
    train_images: int
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _Seen:
    rows: list[dict[str, str]]
    seen_at: list[float]  # monotonic: when each row was first read
    train_started: float | None  # monotonic: when the log printed MARKER
    started: float  # monotonic: when the process started
    returncode: int | None
    timed_out: bool
    log_tail: str
    wall_s: float
    logged_train_images: int | None


def _subset_yaml(data: str, count: int, folder: Path) -> tuple[Path, int]:
    """A data yaml like ``data`` whose train entry lists its first ``count`` train images (sorted, as Ultralytics sorts)."""
    from speedopt.data import load

    ds = load(data)
    images = sorted(ds.train_images)[:count]
    listing = folder / "train-subset.txt"
    listing.write_text("".join(f"{p}\n" for p in images))
    config = yaml.safe_load(Path(data).read_text())
    config.pop("download", None)  # the val split exists: never a download
    config.update(path=str(ds.root or Path(data).parent), train=str(listing))
    target = folder / "data-subset.yaml"
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target, len(images)


def _launch(rec: Recommendation, epochs: int, fraction: float | None, work: Path) -> _Launch:
    """The recommended command with epochs, a private run folder and (``fraction``) a leading subset."""
    from speedopt.data import load

    runs = work / "runs"
    total = len(load(rec.protocol.data).train_images)
    count = leading_count(total, fraction)
    words = shlex.split(rec.command(epochs))
    shown = rec.command(epochs)
    notes: list[str] = []
    if not rec.classic:
        yolo = Path(sys.executable).parent / "yolo"
        if not yolo.is_file():
            raise UsageError(f"no `yolo` executable beside {sys.executable}; install ultralytics in this environment")
        from speedopt.engines.ultralytics import optimizer_for

        added = [f"fraction={fraction!r}"] if fraction is not None else []
        full_epochs, batch = rec.protocol.epochs, rec.knobs.batch
        if full_epochs > CLOSE_MOSAIC and epochs <= full_epochs:
            added.append("close_mosaic=0")
            notes.append(
                f"close_mosaic=0: the full run ({full_epochs} epochs) trains its first {full_epochs - CLOSE_MOSAIC} with mosaic, "
                f"as the trials measured; a {epochs}-epoch run would turn mosaic off from epoch {max(1, epochs - CLOSE_MOSAIC + 1)}"
            )
        if optimizer_for(total, batch, full_epochs) == "SGD" and optimizer_for(count, batch, epochs) != "SGD":
            added.append("optimizer=SGD")
            notes.append(f"optimizer=SGD: what optimizer=auto picks for the full run ({full_epochs} epochs of {total} images), as the trials ran")
        shown = shlex.join([*shlex.split(shown), *added])
        argv = [str(yolo), *words[1:], *added, f"project={runs}", f"name={RUN_NAME}", "exist_ok=True"]
    else:
        script = words.index("train.py")
        entry = [str(Path(rec.protocol.yolov5_dir) / "train.py")] if rec.protocol.yolov5_dir else ["-m", "yolov5.train"]
        argv = [sys.executable, *words[1:script], *entry, *words[script + 1 :]]
        if fraction is not None:
            subset, count = _subset_yaml(rec.protocol.data, count, work)
            argv[argv.index("--data") + 1] = str(subset)
            notes.append(f"--fraction {fraction:g}: --data was a copy of the data yaml whose train entry lists the first {count} of {total} train images")
        argv += ["--project", str(runs), "--name", RUN_NAME, "--exist-ok"]
        if rec.protocol.yolov5_dir:
            notes.append(f"ran {Path(rec.protocol.yolov5_dir) / 'train.py'} (the checkout the command runs in) from a temporary folder")
        else:
            notes.append("ran as python -m yolov5.train (the yolov5 package) with the printed flags")
    return _Launch(argv, shown, runs / RUN_NAME / "results.csv", count, tuple(notes))


def _pump(stream: IO[bytes], log: IO[bytes], marks: dict[str, float]) -> None:
    """Copy the trainer's output to the log, timestamping the line that starts epoch 1 (and its train count)."""
    for raw in iter(stream.readline, b""):
        now = time.monotonic()
        log.write(raw)
        text = raw.decode(errors="replace")
        if MARKER in text and "train_started" not in marks:
            marks["train_started"] = now
        found = _USING.search(text)
        if found:
            marks["train_images"] = float(found.group(1))


def _read_rows(path: Path) -> list[dict[str, str]]:
    try:
        return parse_results(path.read_text(errors="replace"))
    except OSError:
        return []


def _run(launch: _Launch, cwd: Path, env: dict[str, str], epochs: int, timeout_s: float, note: Note | None) -> _Seen:
    """Run the trainer in its own session; poll results.csv; kill the group on timeout or interrupt."""
    log_path = cwd / "trainer.log"
    marks: dict[str, float] = {}
    seen_at: list[float] = []
    rows: list[dict[str, str]] = []
    timed_out = False
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            launch.argv,
            cwd=cwd,  # stray relative writes land here; a checkout's git status check finds no .git
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout or Ctrl-C kills its workers too
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout, log, marks), daemon=True)
        reader.start()
        try:
            deadline = started + timeout_s
            announced = False
            while True:
                done = proc.poll() is not None
                fresh = _read_rows(launch.results)
                now = time.monotonic()
                if not announced and "train_started" in marks and note:
                    note(f"training started ({time.monotonic() - started:.1f} s of set-up)")
                    announced = True
                for row in fresh[len(rows) :]:
                    seen_at.append(now)
                    rows.append(row)
                    if note:
                        so_far = _finished(rows, seen_at, marks.get("train_started"), started)[0]
                        note(f"epoch {len(rows)}/{epochs}: {epoch_seconds(so_far)[-1]:.2f} s")
                if done:
                    break
                if now > deadline:
                    timed_out = True
                    break
                time.sleep(POLL_S)
        finally:
            kill_group(proc)  # on timeout, interrupt, or workers that outlived the trainer
            reader.join(timeout=5.0)
    return _Seen(
        rows=rows,
        seen_at=seen_at,
        train_started=marks.get("train_started"),
        started=started,
        returncode=proc.returncode,
        timed_out=timed_out,
        log_tail=_ANSI.sub("", log_tail(log_path)),
        wall_s=time.monotonic() - started,
        logged_train_images=int(marks["train_images"]) if "train_images" in marks else None,
    )


def _finished(rows: Sequence[dict[str, str]], seen_at: Sequence[float], train_started: float | None, started: float) -> tuple[list[float], str]:
    """When each epoch ended, in seconds since training started, and where that came from."""
    times = cumulative_times(rows)
    if times is not None:
        return times, "from the time column of the trainer's results.csv"
    if train_started is not None:
        return [t - train_started for t in seen_at], (
            f"from when each results.csv row appeared (polled every {POLL_S:g} s) since the log's '{MARKER}' line"
        )
    return [t - started for t in seen_at], (
        f"from when each results.csv row appeared since the process started (no '{MARKER}' line: epoch 1 includes set-up)"
    )


def _ending(seen: _Seen, epochs: int, timeout_s: float) -> tuple[Status, str]:
    """How the run ended, in one status and one line."""
    ran = f"{len(seen.rows)} of {epochs} epochs recorded"
    if seen.timed_out:
        return Status.TIMEOUT, f"the trainer exceeded --timeout {timeout_s:g} s ({ran}); it was stopped"
    code = seen.returncode
    if code == 0:
        if not seen.rows:
            return Status.ERROR, "the trainer exited 0 but wrote no results.csv row in its run folder"
        return Status.OK, f"{ran}; the trainer exited 0 after {seen.wall_s:.1f} s"
    lines = [line.strip() for line in seen.log_tail.splitlines()]
    why = next((line for line in reversed(lines) if _EXCEPTION.match(line)), lines[-1] if lines else "no output")
    why = why if len(why) <= 200 else why[:199] + "…"
    if code is not None and code < 0:
        import signal

        name = signal.Signals(-code).name
        if name == "SIGKILL":
            return Status.OOM, f"the trainer was killed by SIGKILL ({ran}), most likely by the kernel's out-of-memory killer"
        return Status.ERROR, f"the trainer was killed by {name} ({ran}): {why}"
    return Status.ERROR, f"the trainer exited with code {code} ({ran}): {why}"


def _predicted_images_per_s(rec: Recommendation) -> tuple[float, str]:
    """The recommendation's images/s (its finals' median when it had finals) and where it comes from."""
    value = rec.images_per_s
    if not value:
        raise UsageError(f"study {rec.study!r}: the recommended trial {rec.trial.number} has no measured images/s")
    source = f"the median of trial {rec.trial.number}'s finals rounds" if rec.median_images_per_s else f"trial {rec.trial.number}"
    return float(value), source


def _offline_env(rec: Recommendation) -> dict[str, str]:
    """The engine's offline environment, with a local font in each private config folder it names."""
    cache = cache_dir()
    env = engines.get(rec.protocol.engine, yolov5_dir=rec.protocol.yolov5_dir).environment(cache)
    if "YOLO_CONFIG_DIR" in env:  # Ultralytics looks for Arial.ttf in $YOLO_CONFIG_DIR/Ultralytics
        place_font(Path(env["YOLO_CONFIG_DIR"]) / "Ultralytics")
    if "YOLOV5_CONFIG_DIR" in env:  # the classic code looks in $YOLOV5_CONFIG_DIR itself
        place_font(Path(env["YOLOV5_CONFIG_DIR"]))
    return {**os.environ, **env, "PYTHONUNBUFFERED": "1"}  # unbuffered: log lines are timestamped as printed


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
) -> Verification:
    """Run the study's recommended command for ``epochs`` epochs and compare with its prediction.

    ``fraction``: a leading fraction of the train set (None or 1: all of it). ``timeout_s`` (default:
    :func:`default_timeout`) stops the run. ``note`` hears progress (epoch N/E as results appear);
    ``on_wait`` hears that the host lock is held by another measurement. The result is stored in the
    study's user attr :data:`ATTR` and returned; a failed run ends in its status, never an exception.
    UsageError for bad options or a study without a recommendation.
    """
    check_verify_options(epochs, fraction, timeout_s)
    if fraction == 1.0:
        fraction = None
    rec = recommend(study)
    if rec is None:
        raise UsageError(f"study {study.study_name!r} has no recommendation yet (no feasible trial measured ok); run speedopt search first")
    ips, ips_source = _predicted_images_per_s(rec)
    env = _offline_env(rec)
    notes: list[str] = []
    if note:
        note("one validation pass for the prediction: from the study, or timed once now")
    val = validation_time(study, rec.protocol, rec.knobs)  # its own job under the host lock: before ours
    val_s = val.seconds if isinstance(val, ValidationTime) else None
    if not isinstance(val, ValidationTime):
        notes.append(f"the validation pass could not be timed ({val.status.value}: {val.message}); the prediction leaves it out")
    work = Path(tempfile.mkdtemp(prefix="speedopt-verify-"))
    try:
        launch = _launch(rec, epochs, fraction, work)
        predicted_epoch = launch.train_images / ips + (val_s or 0.0)
        limit = timeout_s if timeout_s is not None else default_timeout(rec, launch.train_images, epochs, predicted_epoch)
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        with measuring(study.study_name, on_wait=on_wait):
            if note:
                note(f"running {launch.shown} (predicted epoch {predicted_epoch:.2f} s, timeout {limit:.0f} s)")
            seen = _run(launch, work, env, epochs, limit, note)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    status, message = _ending(seen, epochs, limit)
    finished, timing = _finished(seen.rows, seen.seen_at, seen.train_started, seen.started)
    train_images = launch.train_images
    if seen.logged_train_images is not None and seen.logged_train_images != train_images:
        notes.append(f"the trainer reported {seen.logged_train_images} train images (speedopt counted {train_images}); its count is used")
        train_images = seen.logged_train_images
    result = Verification(
        study=study.study_name,
        status=status,
        message=message,
        command=launch.shown,
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
        notes=tuple(notes) + launch.notes,
        log_tail=seen.log_tail,
    )
    study.set_user_attr(ATTR, result.to_dict())
    return result


# -- the report ----------------------------------------------------------------------------------------


def stored(study: optuna.Study) -> Verification | None:
    """The study's last verification (None when it has none, or the stored record is unreadable)."""
    data = study.user_attrs.get(ATTR)
    if not isinstance(data, dict):
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
