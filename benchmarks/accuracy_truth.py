"""Accuracy truth (issue 52, item 4): a benchmark the shipped accuracy rule can fail, scored beside a naive rule.

Sets. Two generated sets by default, "large" (1-2 high-contrast squares or circles of 30-60% of the image side)
and "medium" (3-6 of 12-25%), each 64 train + 48 val images of 192 px. Each set gets a checkpoint pretrained
from scratch (yolov5n.yaml, imgsz 128, batch 8, 40 epochs): probes and truth runs fine-tune it. A third set,
"mixed" (one object of 30-50% beside 3-5 of 5-9%), is there for issue 52's crossing: a smaller imgsz may lead on the
large object early and trail on the small ones at the run's length (--sets mixed).

Cells. 6 candidates per set, 12 cells: imgsz=64, imgsz=96 (an imgsz step), freeze=3, freeze=6, freeze=10
(freezes from a checkpoint) and batch=16, against the baseline yolov5n imgsz 128 batch 8 freeze 0. Each cell is
one `speedopt search --quality all --weights <checkpoint>` of the baseline and that candidate (one storage per
set, so the baseline's probes are cache hits after the first search), with the user's run --epochs 15, probes of
2 epochs on 0.5 of the set, --probe-share 0.2 (the confirmation's long probe, 4 epochs x 0.5, is then 2 epochs of
the set: the run is at least 3 times the largest probe; refused otherwise), --max-map-loss 0.02, --risk 0.1,
--confirm-seeds 8. The shipped rule's verdict is the candidate trial's (kept, lost or unknown).

Truth. The user's run itself: every signature fine-tuned from the set's checkpoint for --epochs on the whole
train set, --truth-seeds seeds (default 2) numbered from 100, which no probe uses (screening: seeds 0-63,
confirmation: 1000 on). The baseline's runs are shared by the set's cells. A cell's truth loss is the mean of the
paired differences (baseline seed s minus candidate seed s), printed with its 90% two-sided Student-t interval
(wide with 2 seeds); the truth is "lost" when that mean is beyond the allowed loss, else "kept". A cell is near
the boundary when its truth loss is 0.5-3 times the allowed loss.

Naive rule. On the same cells: the screening's first look read from the set's probe cache (seeds 0 and 1 at
the asked budget, baseline and candidate): kept iff the mean of the paired losses is within the allowed loss.

Goals (exit 0 when all are met, else 1; with --quick they are printed but the exit is 0): no false kept by the
shipped rule, fewer wrong verdicts than the naive rule, at least one true kept decided, at least 4 cells near
the boundary; and the issue's frame: at least 12 cells, at least 2 learnable sets (the baseline's truth
mAP50-95 at least 0.05), the truth at least 3 times the largest probe any search ran.

Resumable. Everything lives under --keep (default a temp dir, deleted at the end): a rerun with the same --keep
reuses each set's data and checkpoint, each search's study (an interrupted search resumes) and each training
run's result (its result.json: mAP50-95 and seconds); an interrupted training run starts over. Settings that
would change what was measured (set sizes, budgets, the rule's flags) must match the folder's settings.json.

Time. Measured on the 2-core CPU with no GPU (2026-12-06, the machine shared with another benchmark): the default
12 cells took 1394 s (23 min) end to end, 618 s of it probes and 573 s truth runs (a 15-epoch truth run 17-25 s,
the first candidate's confirmation about 2 min, later ones about 1 min); 14 cells with the checkpoints and 12 truths
reused, 927 s. The --quick smoke run (1 set, 2 cells, 16 + 8 images of 96 px, 2 pretraining epochs, 2 confirmation
seeds) takes about 90 s; its checkpoint learns nothing, so it checks the plumbing, not the rule. Nothing is
downloaded.

    python benchmarks/accuracy_truth.py --keep /tmp/accuracy-truth      # the benchmark (rerun to resume)
    python benchmarks/accuracy_truth.py --quick                           # smoke run
    python benchmarks/accuracy_truth.py --sets large --candidates "imgsz=96,freeze=3 imgsz=96" --keep /tmp/acc
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

CLASSES = ("square", "circle")
KNOBS = ("imgsz", "batch", "freeze")  # what a candidate may change (the baseline's: --base, BATCH, 0)
BATCH = 8  # the baseline's batch
TRUTH_SEED0 = 100  # truth seeds: 100 on (screening probes seeds 0-63, confirmation 1000 on)
LEARNABLE = 0.05  # a set is learnable when its baseline's truth reaches this mAP50-95 (speedopt's LOW_MAP)

# One Ultralytics training run in a fresh process, as a probe trains (model yaml, --weights as
# `pretrained`, deterministic, plots off, the last epoch's validation is the score), offline; prints its
# val mAP50-95 ("@map"), after "@epoch E N" lines. argv: data.yaml, project folder, cache dir, a JSON of overrides.
TRAIN = """
import json, sys
from pathlib import Path
from speedopt.engines.ultralytics import UltralyticsEngine
UltralyticsEngine().prepare(Path(sys.argv[3]))
from ultralytics.models.yolo.detect import DetectionTrainer
args = {"model": "yolov5n.yaml", "data": sys.argv[1], "batch": 8, "device": "cpu", "workers": 2, "amp": False,
        "deterministic": True, "project": sys.argv[2], "name": "run", "exist_ok": True, "plots": False, "val": False,
        "verbose": False, **json.loads(sys.argv[4])}
trainer = DetectionTrainer(overrides=args)
trainer.add_callback("on_train_epoch_end", lambda t: print(f"@epoch {t.epoch + 1} {t.epochs}", flush=True))
trainer.final_eval = lambda: None
trainer.train()
print("@map", float((trainer.metrics or {}).get("metrics/mAP50-95(B)", 0.0)), flush=True)
"""


@dataclass(frozen=True)
class SetSpec:
    """One generated set: its name, object side as fractions of the image side, objects per image, image side."""

    name: str
    low: float
    high: float
    objects: tuple[int, int]
    side: int = 192
    small: tuple[float, float, int, int] | None = None  # and small objects beside them: side low, high; count low, high


#: "mixed" (issue 52's crossing): one large object, learned early at any imgsz, beside 3-5 small ones that only a
#: larger imgsz resolves once the learning rate anneals: a smaller imgsz may lead early and trail at the run's length.
SETS = (SetSpec("large", 0.30, 0.60, (1, 2)), SetSpec("medium", 0.12, 0.25, (3, 6)),
        SetSpec("mixed", 0.30, 0.50, (1, 1), small=(0.05, 0.09, 3, 5)))

#: Defaults of the full benchmark and of --quick (an explicit flag overrides either).
FULL = {"sets": "large,medium", "candidates": "imgsz=64,imgsz=96,freeze=3,freeze=6,freeze=10,batch=16", "train": 64,
        "val": 48, "side": 192, "pretrain_epochs": 40, "confirm_seeds": 8, "truth_seeds": 2}
QUICK = {"sets": "large", "candidates": "imgsz=64,freeze=3", "train": 16, "val": 8, "side": 96, "pretrain_epochs": 2,
         "confirm_seeds": 2, "truth_seeds": 2}
#: The settings a --keep folder was measured with: a rerun must ask the same.
SETTLED = ("train", "val", "side", "base", "pretrain_epochs", "epochs", "probe_epochs", "probe_fraction", "probe_share",
           "max_map_loss", "risk", "confirm_seeds")


@dataclass(frozen=True)
class Run:
    """One training run's final val mAP50-95 and wall time."""

    map50_95: float
    seconds: float


@dataclass(frozen=True)
class Cell:
    """One candidate of one set: the shipped rule's trial attrs, the naive rule's loss, the truth runs by seed."""

    set_name: str
    name: str
    attrs: dict[str, Any]
    naive_loss: float | None  # None: the cache holds no first look of the candidate
    base: tuple[float, ...]  # the baseline's truth mAP50-95, seeds TRUTH_SEED0 on
    cand: tuple[float, ...]
    truth_s: float  # the candidate's truth runs (the baseline's are shared by the set)

    @property
    def shipped(self) -> str:
        return {"feasible": "kept", "rejected": "lost"}.get(str(self.attrs.get("verdict")), "unknown")

    def naive(self, allowed: float) -> str:
        return "-" if self.naive_loss is None else "kept" if self.naive_loss <= allowed else "lost"

    @property
    def loss(self) -> float:
        return statistics.fmean(b - c for b, c in zip(self.base, self.cand, strict=True))

    def truth(self, allowed: float) -> str:
        return "lost" if self.loss > allowed else "kept"

    def near(self, allowed: float) -> bool:
        return 0.5 * allowed <= self.loss <= 3 * allowed

    @property
    def probe_s(self) -> float:
        return float(sum((self.attrs.get("probe_seconds") or {}).values()))


@dataclass(frozen=True)
class Score:
    """One rule's errors against the truth over the cells."""

    false_kept: int
    false_lost: int
    unknown: int
    true_kept: int
    undecided: int = 0  # the naive rule with no first look to read

    @property
    def wrong(self) -> int:
        return self.false_kept + self.false_lost


def say(text: str) -> None:
    print(text, flush=True)


def _place(rng: np.random.Generator, side: int, size: int, boxes: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int] | None:
    """A box of ``size`` that overlaps none of ``boxes`` (appended to them), or None after 20 tries."""
    for _ in range(20):
        x0, y0 = (int(v) for v in rng.integers(0, side - size, size=2))
        box = (x0, y0, x0 + size - 1, y0 + size - 1)
        if all(box[2] < b[0] or b[2] < box[0] or box[3] < b[1] or b[3] < box[1] for b in boxes):
            boxes.append(box)
            return box
    return None


def _draw(rng: np.random.Generator, spec: SetSpec) -> tuple[Any, list[str]]:
    """One image (high-contrast shapes on a mildly noisy grey) and its YOLO label lines."""
    from PIL import Image, ImageDraw

    side = spec.side
    grey = rng.normal(int(rng.integers(90, 160)), 10, size=(side, side, 3))
    image = Image.fromarray(np.clip(grey, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    lines: list[str] = []
    boxes: list[tuple[int, int, int, int]] = []
    sizes = [(spec.low, spec.high)] * int(rng.integers(spec.objects[0], spec.objects[1] + 1))
    if spec.small is not None:
        sizes += [spec.small[:2]] * int(rng.integers(spec.small[2], spec.small[3] + 1))
    for low, high in sizes:
        cls = int(rng.integers(len(CLASSES)))
        size = max(3, int(side * rng.uniform(low, high)))
        box = _place(rng, side, size, boxes)
        if box is None:
            continue
        x0, y0 = box[0], box[1]
        colour = (255, 255, 255) if rng.random() < 0.5 else (0, 0, 0)
        (draw.rectangle if CLASSES[cls] == "square" else draw.ellipse)(box, fill=colour)
        cx, cy = (x0 + size / 2) / side, (y0 + size / 2) / side
        lines.append(f"{cls} {cx:.6f} {cy:.6f} {size / side:.6f} {size / side:.6f}")
    return image, lines


def generate(root: Path, spec: SetSpec, train: int, val: int) -> Path:
    """Write the set in YOLO layout under ``root`` and return its data.yaml (written last: its presence says the
    set is complete, and a complete set is reused)."""
    if (root / "data.yaml").exists():
        return root / "data.yaml"
    for split_id, (split, count) in enumerate((("train", train), ("val", val))):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for index in range(count):
            image, lines = _draw(np.random.default_rng([zlib.crc32(spec.name.encode()), split_id, index]), spec)
            image.save(root / "images" / split / f"{index:05d}.png")
            (root / "labels" / split / f"{index:05d}.txt").write_text("\n".join(lines) + "\n")
    data = {"path": str(root), "train": "images/train", "val": "images/val", "names": dict(enumerate(CLASSES))}
    (root / "data.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return root / "data.yaml"


def _environment() -> dict[str, str]:
    """The engine's offline environment (its private settings), as a probe's."""
    from speedopt import engines
    from speedopt.offline import cache_dir

    return {**os.environ, **engines.get("ultralytics").environment(cache_dir())}


def train(data: Path, folder: Path, overrides: dict[str, Any]) -> float:
    """One training run in a fresh process (see TRAIN); its final val mAP50-95."""
    from speedopt.isolation import start
    from speedopt.offline import cache_dir

    folder.mkdir(parents=True)
    command = [sys.executable, "-c", TRAIN, str(data), str(folder), str(cache_dir()), json.dumps(overrides)]
    score = None
    with open(folder / "train.log", "a") as log:  # appended to by the child (stderr) and here (its other stdout)
        job = start(command, env=_environment(), cwd=folder, stdout=subprocess.PIPE, stderr=log.fileno())
        assert job.proc is not None and job.proc.stdout is not None
        for raw in job.proc.stdout:
            line = raw.decode(errors="replace")
            words = line.split()
            if words[:1] == ["@epoch"] and (int(words[1]) % max(1, int(words[2]) // 5) == 0 or words[1] == words[2]):
                say(f"    epoch {words[1]}/{words[2]}")
            elif words[:1] == ["@map"]:
                score = float(words[1])
            elif words[:1] != ["@epoch"]:
                log.write(line)
                log.flush()
        job.wait(math.inf)
        job.end()  # its group too: nothing of it outlives the run
    if job.returncode != 0 or score is None:
        raise SystemExit(f"training in {folder} failed (exit {job.returncode}); see {folder / 'train.log'}")
    return score


def run_once(data: Path, folder: Path, overrides: dict[str, Any]) -> Run:
    """One training run (:func:`train`), or its result from an earlier invocation (``folder``/result.json); a run
    interrupted before it wrote one starts over."""
    done = folder / "result.json"
    if done.exists():
        saved = json.loads(done.read_text())
        return Run(float(saved["map50_95"]), float(saved["seconds"]))
    if folder.exists():
        shutil.rmtree(folder)
    started = time.perf_counter()
    run = Run(train(data, folder, overrides), round(time.perf_counter() - started, 3))
    done.write_text(json.dumps({"map50_95": run.map50_95, "seconds": run.seconds, "overrides": overrides}))
    return run


def _knobs(text: str) -> dict[str, int]:
    """``imgsz=64`` or ``freeze=3 imgsz=96``: a candidate's knobs that differ from the baseline's."""
    pairs = [item.split("=", 1) for item in text.split()]
    if not pairs or any(len(p) != 2 or p[0] not in KNOBS or not p[1].isdigit() for p in pairs):
        raise SystemExit(f"a candidate is one or more of imgsz=N, batch=N, freeze=N (space-separated), got {text!r}")
    return {k: int(v) for k, v in pairs}


def _baseline(args: argparse.Namespace) -> dict[str, int]:
    return {"imgsz": args.base, "batch": BATCH, "freeze": 0}


def _name(knobs: dict[str, int]) -> str:
    """``imgsz96-freeze3``: a study's or a run folder's name."""
    return "-".join(f"{k}{v}" for k, v in knobs.items())


def _space(candidate: dict[str, int], args: argparse.Namespace) -> str:
    """The search space of one cell: the baseline's and the candidate's values of each knob."""
    base = _baseline(args)
    lists = {k: sorted({base[k], candidate.get(k, base[k])}) for k in KNOBS}
    return (f"model: [yolov5n]\nimgsz: {lists['imgsz']}\nbatch: {lists['batch']}\nfreeze: {lists['freeze']}\n"
            "cache: [none]\nworkers: [0]\n")


def _search_command(data: Path, checkpoint: Path, url: str, name: str, space: Path, candidate: dict[str, int],
                    args: argparse.Namespace) -> list[str]:
    """`speedopt search --quality all` of the baseline and one candidate (trial 2, pinned by --fix)."""
    fix = [arg for k, v in candidate.items() for arg in ("--fix", f"{k}={v}")]
    return [
        sys.executable, "-m", "speedopt", "search", "--data", str(data), "--trials", "2", "--storage", url,
        "--study", name, "--space", str(space), *fix,
        "--baseline", f"model=yolov5n imgsz={args.base} batch={BATCH} workers=0", "--steps", "3", "--max-steps", "3",
        "--warmup", "1", "--device", "cpu", "--quality", "all", "--probe-epochs", str(args.probe_epochs),
        "--probe-fraction", str(args.probe_fraction), "--probe-share", str(args.probe_share),
        "--weights", str(checkpoint), "--epochs", str(args.epochs), "--max-map-loss", str(args.max_map_loss),
        "--risk", str(args.risk), "--confirm-seeds", str(args.confirm_seeds), "--repeats", "0", "--no-report",
        "--no-stop-at-ceiling", "--prune-margin", "0", "--ceiling-rank", "off",
    ]


def _trials(url: str, name: str, candidate: dict[str, int]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The flat attrs of the study's complete baseline trial and candidate trial (None for each missing)."""
    import optuna

    from speedopt.study import flat_attrs, quiet_optuna

    quiet_optuna()
    if name not in optuna.study.get_all_study_names(storage=url):
        return None, None
    base = cand = None
    for trial in optuna.load_study(study_name=name, storage=url).get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        attrs = flat_attrs(trial.user_attrs)
        config = attrs.get("config") or {}
        if attrs.get("role") == "baseline":
            base = attrs
        elif all(config.get(k) == v for k, v in candidate.items()):
            cand = attrs
    return base, cand


def search(data: Path, checkpoint: Path, folder: Path, candidate: dict[str, int], args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The baseline's and the candidate's trial attrs of the cell's search, run now (or resumed) unless its study
    already holds the candidate's verdict."""
    from speedopt.isolation import start

    name, url = _name(candidate), f"sqlite:///{folder}/probe.db"
    folder.mkdir(parents=True, exist_ok=True)  # sqlite makes the file, not its folder
    base, cand = _trials(url, name, candidate)
    if base is not None and cand is not None and cand.get("verdict"):
        say(f"  {name}: the study's verdict reused")
        return base, cand
    space = folder / f"{name}.yaml"
    space.write_text(_space(candidate, args))
    log_path = folder / f"{name}.log"
    with open(log_path, "a") as log:
        job = start(_search_command(data, checkpoint, url, name, space, candidate, args), cwd=folder, env=os.environ,
                    stdout=log.fileno())
        timed_out = job.wait(6 * 3600)
        job.end()
    if timed_out or job.returncode != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-5:])
        raise SystemExit(f"the search {name} failed ({'timed out' if timed_out else f'exit {job.returncode}'}):\n{tail}")
    base, cand = _trials(url, name, candidate)
    if base is None or cand is None:
        raise SystemExit(f"no complete baseline and {name} trials; see {log_path}")
    return base, cand


def _signature(attrs: dict[str, Any], fallback: dict[str, Any] | None = None) -> dict[str, Any]:
    sig = attrs.get("signature")
    if isinstance(sig, dict):
        return sig
    if fallback is None:
        raise SystemExit(f"a trial without its accuracy signature: {attrs.get('quality_reason') or attrs.get('status')}")
    return fallback


def naive_loss(url: str, base_sig: dict[str, Any], cand_sig: dict[str, Any], args: argparse.Namespace) -> float | None:
    """The naive rule's loss: the mean of (baseline - candidate) over seeds 0 and 1 at the asked budget, as the
    set's probe cache holds them (the screening's first look); None when the cache lacks one of those probes."""
    from optuna.storages import get_storage

    from speedopt.quality import ProbeResult, cache_entries

    found: dict[tuple[str, int], float] = {}
    for entry in cache_entries(get_storage(url), None).values():
        probe = ProbeResult.from_dict(entry)
        asked = probe.epochs == args.probe_epochs and abs(probe.fraction - args.probe_fraction) < 1e-9
        if probe.ok and asked and probe.map50_95 is not None and probe.seed in (0, 1):
            for side, sig in (("base", base_sig), ("cand", cand_sig)):
                if probe.signature == sig:
                    found[side, probe.seed] = probe.map50_95
    if len(found) < 4:
        return None
    return statistics.fmean(found["base", s] - found["cand", s] for s in (0, 1))


def largest_probe(url: str) -> float:
    """The largest probe the set's cache holds, in epochs of the whole train set (0 when none)."""
    from optuna.storages import get_storage

    from speedopt.quality import cache_entries

    sizes = [float(e.get("epochs", 0)) * float(e.get("fraction", 0)) for e in cache_entries(get_storage(url), None).values()]
    return max(sizes, default=0.0)


def probe_seconds(url: str) -> float:
    """Wall time of every probe the set's cache holds (each was run once, by one of the set's searches)."""
    from optuna.storages import get_storage

    from speedopt.quality import cache_entries

    return float(sum(e.get("seconds") or 0.0 for e in cache_entries(get_storage(url), None).values()))


def truth(data: Path, checkpoint: Path, folder: Path, knobs: dict[str, int], args: argparse.Namespace) -> tuple[tuple[float, ...], float]:
    """The user's run of one signature: fine-tuned from the checkpoint for --epochs on the whole train set, one run
    per truth seed; each run's mAP50-95 and the seconds they took together (as first run: a reused run counts)."""
    maps, took = [], 0.0
    trainer = {k: v for k, v in knobs.items() if k != "freeze" or v}  # freeze 0: none, as a probe asks for it
    for seed in range(TRUTH_SEED0, TRUTH_SEED0 + args.truth_seeds):
        overrides = {**trainer, "epochs": args.epochs, "seed": seed, "pretrained": str(checkpoint)}
        run = run_once(data, folder / f"{_name(knobs)}-seed{seed}", overrides)
        maps.append(run.map50_95)
        took += run.seconds
        say(f"  truth {_name(knobs)} seed {seed}: {args.epochs} epochs, mAP50-95 {run.map50_95:.4f} ({run.seconds:.0f} s)")
    return tuple(maps), took


@dataclass(frozen=True)
class SetResult:
    """What one set measured: its cells, its checkpoint, its baseline's truth, its probes' cost and largest size."""

    name: str
    cells: list[Cell]
    checkpoint: Run
    base: tuple[float, ...]
    base_s: float
    probe_s: float
    largest: float


def measure_set(spec: SetSpec, root: Path, args: argparse.Namespace) -> SetResult:
    """Generate the set, pretrain its checkpoint, search each cell, then the truth runs."""
    data = generate(root / "data", spec, args.train, args.val)
    say(f"[{spec.name}] {args.train}+{args.val} images of {spec.side} px, {spec.objects[0]}-{spec.objects[1]} objects "
        f"of {100 * spec.low:.0f}-{100 * spec.high:.0f}% of the side; pretraining {args.pretrain_epochs} epochs at imgsz {args.base} ...")
    pretrained = run_once(data, root / "pretrain", {"imgsz": args.base, "batch": BATCH, "epochs": args.pretrain_epochs, "seed": 0})
    checkpoint = root / "pretrain" / "run" / "weights" / "last.pt"
    if not checkpoint.exists():
        raise SystemExit(f"no checkpoint at {checkpoint}; delete {root / 'pretrain'} and rerun")
    say(f"[{spec.name}] checkpoint mAP50-95 {pretrained.map50_95:.4f} ({pretrained.seconds:.0f} s)")
    url = f"sqlite:///{root / 'search'}/probe.db"
    judged = []
    for text in args.candidates.split(","):
        candidate = _knobs(text)
        started = time.perf_counter()
        base, cand = search(data, checkpoint, root / "search", candidate, args)
        cand_sig = _signature(cand)
        base_sig = _signature(base, {**cand_sig, **_baseline(args)})
        naive = naive_loss(url, base_sig, cand_sig, args)
        say(f"[{spec.name}] {text}: verdict {cand.get('verdict')} ({time.perf_counter() - started:.0f} s): "
            f"{cand.get('quality_reason')}")
        judged.append((_name(candidate), candidate, cand, naive))
    say(f"[{spec.name}] truth: {args.epochs} epochs on the whole train set, seeds {TRUTH_SEED0}-{TRUTH_SEED0 + args.truth_seeds - 1} ...")
    base_maps, base_s = truth(data, checkpoint, root / "truth", _baseline(args), args)
    cells = []
    for name, candidate, attrs, naive in judged:
        maps, took = truth(data, checkpoint, root / "truth", {**_baseline(args), **candidate}, args)
        cells.append(Cell(spec.name, name, attrs, naive, base_maps, maps, took))
    return SetResult(spec.name, cells, pretrained, base_maps, base_s, probe_seconds(url), largest_probe(url))


def interval(diffs: Sequence[float]) -> tuple[float, float] | None:
    """The 90% two-sided Student-t interval of the mean of ``diffs`` (None under 2 of them)."""
    from scipy import stats

    if len(diffs) < 2:
        return None
    mean, half = statistics.fmean(diffs), float(stats.t.ppf(0.95, len(diffs) - 1)) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return mean - half, mean + half


def score(verdicts: Iterable[str], truths: Iterable[str]) -> Score:
    """False kept (kept where the truth is lost), false lost, unknown, true kept, and verdicts missing ("-")."""
    pairs = list(zip(verdicts, truths, strict=True))
    return Score(
        false_kept=sum(v == "kept" and t == "lost" for v, t in pairs),
        false_lost=sum(v == "lost" and t == "kept" for v, t in pairs),
        unknown=sum(v == "unknown" for v, _ in pairs),
        true_kept=sum(v == t == "kept" for v, t in pairs),
        undecided=sum(v == "-" for v, _ in pairs),
    )


def _fmt(value: Any, sign: bool = True) -> str:
    return "-" if value is None else f"{float(value):+.4f}" if sign else f"{float(value):.4f}"


def _row(cell: Cell, allowed: float) -> str:
    """One cell's line of the table."""
    a = cell.attrs
    shipped = f"{cell.shipped} ({_fmt(a.get('map_loss'))} +/- {_fmt(a.get('map_spread'), False)}"
    shipped += f"; run {_fmt(a.get('run_map_loss'))})" if a.get("run_map_loss") is not None else ")"
    diffs = [b - c for b, c in zip(cell.base, cell.cand, strict=True)]
    span = interval(diffs)
    around = f"[{span[0]:+.4f}, {span[1]:+.4f}]" if span else "[-]"
    seeds = ", ".join(f"{b:.4f}/{c:.4f}" for b, c in zip(cell.base, cell.cand, strict=True))
    wrong = cell.shipped in ("kept", "lost") and cell.shipped != cell.truth(allowed)
    budget = f"{a.get('probe_epochs')} x {a.get('probe_fraction')}" if a.get("probe_epochs") is not None else "-"
    return (f"| {cell.set_name} | {cell.name} | {shipped}{' WRONG' if wrong else ''} | {cell.naive(allowed)} "
            f"({_fmt(cell.naive_loss)}) | {cell.loss:+.4f} {around} | {seeds} | {cell.truth(allowed)} "
            f"| {'yes' if cell.near(allowed) else 'no'} | {a.get('probes_run', 0)}, {budget} | {cell.probe_s:.0f} | {cell.truth_s:.0f} |")


def table(cells: list[Cell], allowed: float) -> list[str]:
    """The per-cell table (markdown)."""
    return [
        "| set | candidate | shipped (loss +/- half-width; run loss) | naive (loss) | truth loss [90% interval] "
        "| truth base/cand by seed | truth | near | probes run, last budget | probe s | truth s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(cell, allowed) for cell in cells),
    ]


def goals(results: list[SetResult], args: argparse.Namespace) -> list[tuple[str, bool]]:
    """The issue's goals, each met or not."""
    cells = [c for r in results for c in r.cells]
    allowed = args.max_map_loss
    truths = [c.truth(allowed) for c in cells]
    shipped, naive = score((c.shipped for c in cells), truths), score((c.naive(allowed) for c in cells), truths)
    largest = max((r.largest for r in results), default=0.0)
    return [
        ("no false kept", shipped.false_kept == 0),
        (f"fewer wrong than naive ({shipped.wrong} vs {naive.wrong})", shipped.wrong < naive.wrong),
        (f">=1 true kept decided ({shipped.true_kept})", shipped.true_kept >= 1),
        (f">=4 near-boundary cells ({sum(c.near(allowed) for c in cells)})", sum(c.near(allowed) for c in cells) >= 4),
        (f">=12 cells ({len(cells)})", len(cells) >= 12),
        (f">=2 learnable sets ({sum(statistics.fmean(r.base) >= LEARNABLE for r in results)})",
         sum(statistics.fmean(r.base) >= LEARNABLE for r in results) >= 2),
        (f"truth >= 3 x the largest probe run ({args.epochs} vs {largest:g} epochs of the set)", args.epochs >= 3 * largest),
    ]


def summary(results: list[SetResult], args: argparse.Namespace, wall_s: float) -> bool:
    """Print the table, each rule's score, the goals and the costs; whether every goal was met."""
    cells = [c for r in results for c in r.cells]
    allowed = args.max_map_loss
    say(f"\nbaseline yolov5n imgsz {args.base} batch {BATCH} freeze 0; run --epochs {args.epochs}; probes {args.probe_epochs} "
        f"epochs x {args.probe_fraction}, --probe-share {args.probe_share}, --risk {args.risk}, --confirm-seeds "
        f"{args.confirm_seeds}; allowed loss {allowed}; truth seeds {TRUTH_SEED0}-{TRUTH_SEED0 + args.truth_seeds - 1}")
    for r in results:
        say(f"set {r.name}: checkpoint mAP50-95 {r.checkpoint.map50_95:.4f} ({r.checkpoint.seconds:.0f} s); baseline truth "
            f"{', '.join(f'{m:.4f}' for m in r.base)} ({r.base_s:.0f} s); probes {r.probe_s:.0f} s; largest probe {r.largest:g} epochs of the set")
    say("\n".join(table(cells, allowed)))
    truths = [c.truth(allowed) for c in cells]
    for label, verdicts in (("shipped", [c.shipped for c in cells]), ("naive", [c.naive(allowed) for c in cells])):
        s = score(verdicts, truths)
        say(f"{label}: false kept {s.false_kept}, false lost {s.false_lost}, unknown {s.unknown}, wrong {s.wrong}, "
            f"true kept {s.true_kept}" + (f", no first look {s.undecided}" if s.undecided else ""))
    met = goals(results, args)
    say("goals: " + "; ".join(f"{text}: {'met' if ok else 'NOT met'}" for text, ok in met))
    probes = sum(r.probe_s for r in results)
    truth_s = sum(r.base_s + sum(c.truth_s for c in r.cells) for r in results)
    say(f"probe time {probes:.0f} s (every probe in the sets' caches) vs truth time {truth_s:.0f} s "
        f"({probes / truth_s if truth_s else 0:.2f}x); pretraining {sum(r.checkpoint.seconds for r in results):.0f} s; "
        f"total wall time {wall_s:.0f} s (this invocation)")
    return all(ok for _, ok in met)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--quick", action="store_true", help=f"smoke run: {QUICK}; goals printed, exit 0")
    add("--sets", help=f"comma-separated generated sets, of {[s.name for s in SETS]} (default {FULL['sets']})")
    add("--candidates", help="comma-separated candidates, each imgsz=N, batch=N and/or freeze=N separated by spaces "
        f"(default {FULL['candidates']})")
    add("--train", type=int, help=f"train images per set (default {FULL['train']})")
    add("--val", type=int, help=f"val images per set (default {FULL['val']})")
    add("--side", type=int, help=f"image side, px (default {FULL['side']})")
    add("--pretrain-epochs", type=int, help=f"checkpoint's epochs from scratch (default {FULL['pretrain_epochs']})")
    add("--base", type=int, default=128, help="the baseline's imgsz (default 128)")
    add("--epochs", type=int, default=15, help="the user's run: --epochs of the search and the truth runs (default 15, at least 15)")
    add("--probe-epochs", type=int, default=2, help="--probe-epochs of the search (default 2)")
    add("--probe-fraction", type=float, default=0.5, help="--probe-fraction of the search (default 0.5)")
    add("--probe-share", type=float, default=0.2, help="--probe-share of the search (default 0.2)")
    add("--max-map-loss", type=float, default=0.02, help="allowed mAP50-95 loss, absolute (default 0.02)")
    add("--risk", type=float, default=0.1, help="--risk of the search (default 0.1)")
    add("--confirm-seeds", type=int, help=f"--confirm-seeds of the search (default {FULL['confirm_seeds']})")
    add("--truth-seeds", type=int, help=f"truth runs per signature (default {FULL['truth_seeds']})")
    add("--keep", metavar="DIR", help="work in DIR and keep it (a rerun resumes there), instead of a temp dir")
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def check(args: argparse.Namespace) -> None:
    """Refuse settings under which the truth is not the issue's: a run of at least 15 epochs and at least 3 times
    the largest probe (the confirmation's long probe), sets that exist, at least one truth seed."""
    from speedopt.quality import ProbeBudget

    if args.epochs < 15:
        raise SystemExit(f"--epochs must be at least 15 (the issue's truth), got {args.epochs}")
    unknown = set(args.sets.split(",")) - {s.name for s in SETS}
    if unknown or args.truth_seeds < 1:
        raise SystemExit(f"unknown set(s) {sorted(unknown)}" if unknown else "--truth-seeds must be at least 1")
    asked = ProbeBudget(args.probe_epochs, args.probe_fraction)
    long = asked.twice(asked, args.probe_share, args.epochs) if asked.within(args.probe_share, args.epochs) else None
    if long is None:
        raise SystemExit(f"no confirmation fits: a probe of {asked} and one at least twice as long must train at most "
                         f"{args.probe_share:g} of the {args.epochs}-epoch run; raise --probe-share or lower the budget")
    if args.epochs < 3 * long.size:
        raise SystemExit(f"the truth (--epochs {args.epochs}) must be at least 3 times the largest probe, the confirmation's "
                         f"{long} ({long.size:g} epochs of the set); raise --epochs or lower the probe budget")
    for text in args.candidates.split(","):
        _knobs(text)


def settle(root: Path, args: argparse.Namespace) -> None:
    """Record the settings in ``root``/settings.json, or refuse when a folder being resumed was measured with others."""
    path, mine = root / "settings.json", {k: getattr(args, k) for k in SETTLED}
    if path.exists():
        theirs = json.loads(path.read_text())
        differ = [f"--{k.replace('_', '-')} {theirs.get(k)} (asked {mine[k]})" for k in SETTLED if theirs.get(k) != mine[k]]
        if differ:
            raise SystemExit(f"{root} was measured with other settings: {', '.join(differ)}; give those or a new --keep")
    else:
        root.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(mine, indent=1))


def main() -> None:
    args = _arguments()
    check(args)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep).resolve() if args.keep else Path(tmp)
        settle(root, args)
        say(f"working in {root}" + ("" if args.keep else " (deleted at the end; --keep DIR keeps it and lets a rerun resume)"))
        specs = [replace(next(s for s in SETS if s.name == name), side=args.side) for name in args.sets.split(",")]
        results = [measure_set(spec, root / spec.name, args) for spec in specs]
        met = summary(results, args, time.perf_counter() - started)
    if args.quick:
        say("--quick: a smoke run; the goals above do not set the exit status")
        return
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
