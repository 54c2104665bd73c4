"""Run a printed training command through the trainer's own entry point, and read its epoch times.

The command runs in its own session (a timeout or Ctrl-C kills its whole process group), offline
(the engine's environment: YOLO_OFFLINE, private config folders holding a local font), in a folder
the caller owns. Each epoch's time comes from the trainer's own output:

- Ultralytics writes ``results.csv`` with a cumulative ``time`` column (seconds since training
  started, written after the epoch's validation pass): epoch e takes ``time[e] - time[e-1]``;
- the classic ``train.py`` writes ``results.csv`` without a time column: each new row is
  timestamped as it appears (polled every :data:`POLL_S` s), and epoch 1 starts when the log prints
  its ``Starting training for`` line (stdout read line by line, timestamped).

For Ultralytics the short run gets ``close_mosaic=0`` (a run of at most 10 epochs would otherwise
train without mosaic from epoch 1, while the full run and the trials train with it) and the optimizer,
lr0 and warm-up bias lr that ``optimizer=auto`` gives the full run (as the trial's trainer resolved them:
a shorter run would resolve its own); both are printed with the command and explained in its notes.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

from speedopt import command, engines
from speedopt.errors import UsageError
from speedopt.isolation import log_tail, start
from speedopt.offline import cache_dir, place_font
from speedopt.reporting._recommend import Recommendation
from speedopt.status import Status

MARKER = "Starting training for"  # both trainers log it once, right before epoch 1 starts
POLL_S = 0.1  # results.csv poll interval: the resolution of the classic engine's epoch times
RUN_NAME = "verify"
CLOSE_MOSAIC = 10  # Ultralytics' default: mosaic augmentation is turned off for the last 10 epochs
Note = Callable[[str], None]

_USING = re.compile(r"Using (\d+) train, (\d+) val images")  # Ultralytics' own count of the train set it runs
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")

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
    """Ultralytics' ``time`` column (seconds from the start of training to each epoch's row), or None without one
    (or without any row: nothing says which trainer wrote it)."""
    if not rows:
        return None
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
class Launch:
    """How the command is started here: argv, the printed form, the train images it trains on."""

    argv: list[str]
    shown: str
    results: Path
    train_images: int
    notes: tuple[str, ...]

    def run(self, cwd: Path, env: dict[str, str], epochs: int, timeout_s: float, note: Note | None = None) -> Seen:
        """Run it in ``cwd`` with ``env`` as its whole environment (see :func:`run_trainer`): what was seen."""
        return run_trainer(self, cwd, env, epochs, timeout_s, note)


@dataclass(frozen=True)
class Seen:
    rows: list[dict[str, str]]
    seen_at: list[float]  # monotonic: when each row was first read
    train_started: float | None  # monotonic: when the log printed MARKER
    started: float  # monotonic: when the process started
    returncode: int | None
    timed_out: bool
    log_tail: str
    wall_s: float
    logged_train_images: int | None

    def epoch_times(self) -> tuple[float, ...]:
        """Each recorded epoch's seconds (when each ended: :func:`finished_at`)."""
        return epoch_seconds(finished_at(self.rows, self.seen_at, self.train_started, self.started)[0])


def subset_yaml(data: str, count: int, folder: Path) -> tuple[Path, int]:
    """A data yaml like ``data`` whose train entry lists its first ``count`` train images (sorted, as Ultralytics sorts)."""
    from speedopt.data import load, read_yaml

    ds = load(data)
    images = ds.train_images[:count]  # listed and sorted as the trainers sort
    listing = folder / "train-subset.txt"
    listing.write_text("".join(f"{p}\n" for p in images))
    config = read_yaml(data, "data.yaml")  # load() read it already: bounded, a mapping
    config.pop("download", None)  # the val split exists: never a download
    config.update(path=str(ds.root or Path(data).parent), train=str(listing))
    target = folder / "data-subset.yaml"
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target, len(images)


def launch(rec: Recommendation, epochs: int, fraction: float | None, work: Path) -> Launch:
    """The recommended command with epochs, a private run folder and (``fraction``) a leading subset, as the
    study's trainer's dialect runs it."""
    return _LAUNCHES[rec.words.dialect](rec, epochs, fraction, work)


def _yolo_launch(rec: Recommendation, epochs: int, fraction: float | None, work: Path) -> Launch:
    """``yolo detect train ...``, with the full run's mosaic and optimizer where a short run would change them."""
    from speedopt.data import load, write_trainer_yaml

    runs = work / "runs"
    dataset = load(rec.data)
    total = len(dataset.train_images)
    count = leading_count(total, fraction)
    words = shlex.split(rec.command(epochs))
    notes: list[str] = []
    yolo = Path(sys.executable).parent / "yolo"
    if not yolo.is_file():
        raise UsageError(f"no `yolo` executable beside {sys.executable}; install ultralytics in this environment")
    added = [f"fraction={fraction!r}"] if fraction is not None else []
    full_epochs = rec.protocol.epochs
    if full_epochs > CLOSE_MOSAIC and epochs <= full_epochs:
        added.append("close_mosaic=0")
        notes.append(
            f"close_mosaic=0: the full run ({full_epochs} epochs) trains its first {full_epochs - CLOSE_MOSAIC} with mosaic, "
            f"as the trials measured; a {epochs}-epoch run would turn mosaic off from epoch {max(1, epochs - CLOSE_MOSAIC + 1)}"
        )
    engine, classes = engines.get(rec.protocol.engine), len(dataset.names)
    optimizer = rec.trial.result.optimizer_args or engine.optimizer_args(total, rec.knobs.batch, full_epochs, classes)
    own = engine.optimizer_args(count, rec.knobs.batch, epochs, classes)  # what this short run would resolve
    if optimizer and optimizer != own and not any(w.startswith("optimizer=") for w in words):
        added += list(optimizer)
        notes.append(
            f"{' '.join(optimizer)}: what optimizer=auto gives the full run ({full_epochs} epochs of {total} images), "
            f"as the trials trained; this {epochs}-epoch run would resolve {' '.join(own) or 'another'}"
        )
    shown = shlex.join([*words, *added])
    # the printed environment (ULTRALYTICS_SAFE_LOAD for a file of the user's) is the engine's, set by offline_env
    argv = [str(yolo), *command.program_words(words)[1:], *added, f"project={runs}", f"name={RUN_NAME}", "exist_ok=True"]
    # The run's folder is temporary and its Ultralytics settings private: the data.yaml it reads is
    # resolved here, as in the user's working directory (see speedopt.data.write_trainer_yaml).
    resolved = f"data={write_trainer_yaml(rec.data, work)}"
    argv = [resolved if word.startswith("data=") else word for word in argv]
    return Launch(argv, shown, runs / RUN_NAME / "results.csv", count, tuple(notes))


def _train_py_launch(rec: Recommendation, epochs: int, fraction: float | None, work: Path) -> Launch:
    """``python train.py ...`` from the study's checkout (or ``-m yolov5.train``), a subset yaml for ``fraction``."""
    from speedopt.data import load, write_trainer_yaml

    runs = work / "runs"
    total = len(load(rec.data).train_images)
    count = leading_count(total, fraction)
    words = shlex.split(rec.command(epochs))
    notes: list[str] = []
    script = words.index("train.py")
    checkout = rec.protocol.engine_spec.checkout  # a study's own, or the one verify's caller named (never an import's)
    entry = [str(Path(checkout) / "train.py")] if checkout else ["-m", "yolov5.train"]
    argv = [sys.executable, *words[1:script], *entry, *words[script + 1 :]]
    if fraction is not None:
        subset, count = subset_yaml(rec.data, count, work)
        argv[argv.index("--data") + 1] = str(subset)
        notes.append(f"--fraction {fraction:g}: --data was a copy of the data yaml whose train entry lists the first {count} of {total} train images")
    else:
        argv[argv.index("--data") + 1] = str(write_trainer_yaml(rec.data, work))  # resolved, as in _yolo_launch
    argv += ["--project", str(runs), "--name", RUN_NAME, "--exist-ok"]
    if checkout:
        notes.append(f"ran {Path(checkout) / 'train.py'} (the checkout the command runs in) from a temporary folder")
    else:
        notes.append("ran as python -m yolov5.train (the yolov5 package) with the printed flags")
    return Launch(argv, rec.command(epochs), runs / RUN_NAME / "results.csv", count, tuple(notes))


_LAUNCHES = {"yolo": _yolo_launch, "train.py": _train_py_launch}


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


def run_trainer(launch: Launch, cwd: Path, env: dict[str, str], epochs: int, timeout_s: float, note: Note | None) -> Seen:
    """Run the trainer in its own session; poll results.csv; kill the group on timeout or interrupt."""
    log_path = cwd / "trainer.log"
    marks: dict[str, float] = {}
    seen_at: list[float] = []
    rows: list[dict[str, str]] = []
    timed_out = False
    started = time.monotonic()
    announced = False

    def read_rows() -> None:
        """Take the rows results.csv gained since the last look (timestamped now), and say so."""
        nonlocal announced
        fresh = _read_rows(launch.results)
        now = time.monotonic()
        if not announced and "train_started" in marks and note:
            note(f"training started ({time.monotonic() - started:.1f} s of set-up)")
            announced = True
        for row in fresh[len(rows) :]:
            seen_at.append(now)
            rows.append(row)
            if note:
                so_far = finished_at(rows, seen_at, marks.get("train_started"), started)[0]
                note(f"epoch {len(rows)}/{epochs}: {epoch_seconds(so_far)[-1]:.2f} s")

    with open(log_path, "wb") as log:
        # its own session: a timeout or Ctrl-C kills its workers too; stray relative writes land in cwd,
        # where a checkout's git status check finds no .git
        job = start(launch.argv, cwd=cwd, env=env, stdout=subprocess.PIPE)
        assert job.proc is not None and job.proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(job.proc.stdout, log, marks), daemon=True)
        reader.start()
        try:
            timed_out = job.wait(timeout_s, read_rows, every_s=POLL_S)
            read_rows()  # once more: what the trainer wrote before it ended (or before the deadline)
        finally:
            job.end()  # on timeout, interrupt, or workers that outlived the trainer
            reader.join(timeout=5.0)
    return Seen(
        rows=rows,
        seen_at=seen_at,
        train_started=marks.get("train_started"),
        started=started,
        returncode=job.returncode,
        timed_out=timed_out,
        log_tail=_ANSI.sub("", log_tail(log_path)),
        wall_s=time.monotonic() - started,
        logged_train_images=int(marks["train_images"]) if "train_images" in marks else None,
    )


def finished_at(rows: Sequence[dict[str, str]], seen_at: Sequence[float], train_started: float | None, started: float) -> tuple[list[float], str]:
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


def ending(seen: Seen, epochs: int, timeout_s: float) -> tuple[Status, str]:
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
        name = signal.Signals(-code).name
        if name == "SIGKILL":
            return Status.OOM, f"the trainer was killed by SIGKILL ({ran}), most likely by the kernel's out-of-memory killer"
        return Status.ERROR, f"the trainer was killed by {name} ({ran}): {why}"
    return Status.ERROR, f"the trainer exited with code {code} ({ran}): {why}"


def offline_env(rec: Recommendation) -> dict[str, str]:
    """The engine's offline environment, with a local font in each private config folder it names."""
    cache = cache_dir()
    env = rec.protocol.engine_spec.engine.environment(cache)
    if "YOLO_CONFIG_DIR" in env:  # Ultralytics looks for Arial.ttf in $YOLO_CONFIG_DIR/Ultralytics
        place_font(Path(env["YOLO_CONFIG_DIR"]) / "Ultralytics")
    if "YOLOV5_CONFIG_DIR" in env:  # the classic code looks in $YOLOV5_CONFIG_DIR itself
        place_font(Path(env["YOLOV5_CONFIG_DIR"]))
    return {**os.environ, **env, "PYTHONUNBUFFERED": "1"}  # unbuffered: log lines are timestamped as printed
