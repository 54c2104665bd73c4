"""Accuracy truth: do the quality probe's verdicts match what longer training says, in both directions?

Makes one generated set (by default "large": 1-2 objects of 30-60% of the image side; "small": 8-16 objects
of 4-6%), pretrains a checkpoint at the baseline imgsz (so probes fine-tune, as --weights makes them), and for
each candidate (by default imgsz=64, imgsz=128 and freeze=3 against the baseline imgsz=160 freeze=0) runs
`speedopt search --quality all` with the baseline and that candidate and reads the candidate's verdict (kept,
lost or unknown). All searches share one storage, so the baseline's probes run once. Then every signature is
fine-tuned from the same checkpoint for --truth-factor x the probe epochs on the full train set, --truth-seeds
seeds each, and the candidate's truth is "lost" when the baseline's mean val mAP50-95 beats its mean by more
than the allowed loss, else "kept". It prints whether each verdict agreed with that truth, whatever it is, and
what the probes cost beside what the long runs cost. About 25 minutes on a 2-core CPU with the defaults;
nothing is downloaded.

    python benchmarks/accuracy_truth.py
    python benchmarks/accuracy_truth.py --set small --candidates imgsz=96 --keep /tmp/acc
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

CLASSES = ("square", "circle")

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
    """One generated set: its name, image side, object side as fractions of it, objects per image."""

    name: str
    low: float
    high: float
    objects: tuple[int, int]
    side: int = 320


SETS = (SetSpec("small", 0.04, 0.06, (8, 16)), SetSpec("large", 0.30, 0.60, (1, 2)))


@dataclass(frozen=True)
class Row:
    """What one candidate measured: the probe's verdict (the candidate trial's attrs) and the long runs' mAP of
    the baseline and the candidate, with the seconds the long runs took."""

    name: str
    attrs: dict[str, Any]
    checkpoint_map: float
    base_maps: tuple[float, ...]
    small_maps: tuple[float, ...]
    long_s: float = 0.0  # the candidate's long runs (the baseline's are shared by every row)


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
    for _ in range(int(rng.integers(spec.objects[0], spec.objects[1] + 1))):
        cls = int(rng.integers(len(CLASSES)))
        size = max(3, int(side * rng.uniform(spec.low, spec.high)))
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
    """Write the set in YOLO layout under ``root`` and return its data.yaml."""
    for split_id, (split, count) in enumerate((("train", train), ("val", val))):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for index in range(count):
            image, lines = _draw(np.random.default_rng([len(spec.name), split_id, index]), spec)
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


def _knobs(text: str) -> dict[str, int]:
    """``imgsz=64`` or ``freeze=3 imgsz=128``: a candidate's knobs that differ from the baseline's."""
    pairs = [item.split("=", 1) for item in text.split()]
    if not pairs or any(len(p) != 2 or p[0] not in ("imgsz", "freeze") for p in pairs):
        raise SystemExit(f"a candidate is imgsz=N and/or freeze=N, got {text!r}")
    return {k: int(v) for k, v in pairs}


def probe_verdict(data: Path, checkpoint: Path, folder: Path, name: str, candidate: dict[str, int], args: argparse.Namespace) -> dict[str, Any]:
    """Run `speedopt search --quality all` on the baseline and one candidate (its own study in the shared storage
    under ``folder``, so the baseline's probes are cache hits after the first); the candidate's flat attrs."""
    import optuna

    from speedopt.isolation import start
    from speedopt.study import flat_attrs, quiet_optuna

    folder.mkdir(parents=True, exist_ok=True)
    space = folder / f"{name}.yaml"
    imgsz = sorted({args.base, candidate.get("imgsz", args.base)})
    freeze = sorted({0, candidate.get("freeze", 0)})
    space.write_text(f"model: [yolov5n]\nimgsz: {imgsz}\nbatch: [8]\nfreeze: {freeze}\ncache: [none]\nworkers: [0]\n")
    url = f"sqlite:///{folder}/probe.db"
    fix = [arg for k, v in candidate.items() for arg in ("--fix", f"{k}={v}")]
    command = [
        sys.executable, "-m", "speedopt", "search", "--data", str(data), "--trials", "2", "--storage", url,
        "--study", name, "--space", str(space), *fix,
        "--baseline", f"model=yolov5n imgsz={args.base} batch=8 workers=0", "--steps", "3", "--max-steps", "3",
        "--warmup", "1", "--device", "cpu", "--quality", "all", "--probe-epochs", str(args.probe_epochs),
        "--probe-fraction", str(args.probe_fraction), "--weights", str(checkpoint), "--epochs", str(args.epochs),
        "--max-map-loss", str(args.max_map_loss), "--repeats", "0", "--no-report",
        "--no-stop-at-ceiling", "--prune-margin", "0", "--probe-grow", str(args.probe_grow),
    ]
    with open(folder / f"{name}.log", "w") as log:
        job = start(command, cwd=folder, env=os.environ, stdout=log.fileno())
        timed_out = job.wait(3600)
        job.end()
    if timed_out or job.returncode != 0:
        tail = "\n".join((folder / f"{name}.log").read_text().splitlines()[-5:])
        raise SystemExit(f"the search failed ({'timed out after 3600 s' if timed_out else f'exit {job.returncode}'}):\n{tail}")
    quiet_optuna()
    trials = optuna.load_study(study_name=name, storage=url).get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    for trial in trials:
        attrs = flat_attrs(trial.user_attrs)
        config = attrs.get("config") or {}
        if all(config.get(k) == v for k, v in candidate.items()):
            return attrs
    raise SystemExit(f"no complete trial with {candidate}; see {folder / (name + '.log')}")


def truth_runs(data: Path, checkpoint: Path, folder: Path, knobs: dict[str, int], epochs: int, args: argparse.Namespace) -> tuple[tuple[float, ...], float]:
    """Fine-tune one signature from the checkpoint for ``epochs`` on the whole train set, one run per seed: each
    run's mAP50-95, and the seconds they took together."""
    maps, took = [], 0.0
    label = "-".join(f"{k}{v}" for k, v in knobs.items())
    for seed in range(args.truth_seeds):
        started = time.perf_counter()
        overrides = {**knobs, "epochs": epochs, "seed": seed, "pretrained": str(checkpoint)}
        maps.append(train(data, folder / f"{label}-seed{seed}", overrides))
        took += time.perf_counter() - started
        say(f"  long run {label} seed {seed}: {epochs} epochs, mAP50-95 {maps[-1]:.4f} ({time.perf_counter() - started:.0f} s)")
    return tuple(maps), took


def measure_set(spec: SetSpec, root: Path, args: argparse.Namespace) -> tuple[list[Row], float]:
    """Generate the set, pretrain its checkpoint, run each candidate's verdict, then the long runs; the rows and the
    seconds of the baseline's long runs."""
    started = time.perf_counter()
    data = generate(root / "data", spec, args.train, args.val)
    say(f"[{spec.name}] {args.train}+{args.val} images of {spec.side} px, objects {100 * spec.low:.0f}-"
        f"{100 * spec.high:.0f}% of the side; pretraining {args.pretrain} epochs at imgsz {args.base} ...")
    checkpoint_map = train(data, root / "pretrain", {"imgsz": args.base, "epochs": args.pretrain, "seed": 0})
    checkpoint = root / "pretrain" / "run" / "weights" / "last.pt"
    say(f"[{spec.name}] checkpoint mAP50-95 {checkpoint_map:.4f} ({time.perf_counter() - started:.0f} s)")
    verdicts = []
    for text in args.candidates.split(","):
        candidate = _knobs(text)
        name = "-".join(f"{k}{v}" for k, v in candidate.items())
        started = time.perf_counter()
        attrs = probe_verdict(data, checkpoint, root / "search", name, candidate, args)
        say(f"[{spec.name}] {text}: verdict {attrs.get('verdict')}: {attrs.get('quality_reason')} "
            f"({time.perf_counter() - started:.0f} s)")
        verdicts.append((name, candidate, attrs))
    judged = max(int(a.get("probe_epochs") or args.probe_epochs) for _, _, a in verdicts)  # a budget may have grown
    epochs = args.truth_factor * judged
    say(f"[{spec.name}] long runs: {args.truth_factor} x {judged} epochs on the whole train set, {args.truth_seeds} seed(s) each ...")
    base_maps, base_s = truth_runs(data, checkpoint, root / "truth", {"imgsz": args.base}, epochs, args)
    rows = []
    for name, candidate, attrs in verdicts:
        maps, took = truth_runs(data, checkpoint, root / "truth", {"imgsz": args.base, **candidate}, epochs, args)
        rows.append(Row(name, attrs, checkpoint_map, base_maps, maps, took))
    return rows, base_s


def _mean(values: tuple[float, ...]) -> float:
    return sum(values) / len(values)


def outcome(row: Row, allowed: float) -> tuple[str, str, str]:
    """The probe's verdict (kept, lost, unknown, ...), the long runs' truth (kept or lost), and whether they agree."""
    stored = str(row.attrs.get("verdict"))
    verdict = {"feasible": "kept", "rejected": "lost"}.get(stored, stored)
    truth = "lost" if _mean(row.base_maps) - _mean(row.small_maps) > allowed else "kept"
    agreement = ("agree" if verdict == truth else "disagree") if verdict in ("kept", "lost") else f"{verdict}-probe"
    return verdict, truth, agreement


def table(rows: list[Row], allowed: float) -> list[str]:
    """The result table: each set's probe verdict, the long runs' mAP and difference, the truth, the agreement."""
    lines = [
        "| candidate | checkpoint mAP | probe base / candidate | probe verdict (loss +/- interval) | probes (seeds, budget) "
        "| probe time | long base | long candidate | long difference | long-run time | truth | agreement |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        a = row.attrs
        verdict, truth, agreement = outcome(row, allowed)
        loss, spread = a.get("map_loss"), a.get("map_spread")
        judged = f"{verdict} ({loss:+.4f} +/- {spread:.4f})" if loss is not None and spread is not None else verdict
        probed = f"{_fmt(a.get('baseline_map50_95'))} / {_fmt(a.get('probe_map50_95'))}"
        base, small = _mean(row.base_maps), _mean(row.small_maps)
        seconds = sum((a.get("probe_seconds") or {}).values())
        probes = f"{a.get('probes_run', 0)} run, {a.get('probe_cache_hits', 0)} cached ({a.get('probe_epochs')} epochs x {a.get('probe_fraction')})"
        lines.append(
            f"| {row.name} | {row.checkpoint_map:.4f} | {probed} | {judged} | {probes} | {seconds:.0f} s "
            f"| {base:.4f} ({_runs(row.base_maps)}) | {small:.4f} ({_runs(row.small_maps)}) | {base - small:+.4f} "
            f"| {row.long_s:.0f} s | {truth} | {agreement} |"
        )
    return lines


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4f}"


def _runs(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:.4f}" for v in values)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=[s.name for s in SETS], default="large", help="which generated set (default large)")
    parser.add_argument("--base", type=int, default=160, help="the baseline's imgsz (default 160)")
    parser.add_argument("--candidates", default="imgsz=64,imgsz=128,freeze=3",
                        help="comma-separated candidates, each imgsz=N and/or freeze=N (default imgsz=64,imgsz=128,freeze=3)")
    parser.add_argument("--train", type=int, default=96, help="train images (default 96)")
    parser.add_argument("--val", type=int, default=64, help="val images (default 64)")
    parser.add_argument("--pretrain", type=int, default=30, help="pretraining epochs (default 30)")
    parser.add_argument("--probe-epochs", type=int, default=3, help="--probe-epochs of the search (default 3)")
    parser.add_argument("--probe-fraction", type=float, default=1.0, help="--probe-fraction of the search (default 1)")
    parser.add_argument("--epochs", type=int, default=100, help="--epochs of the search: the run probes are priced against (default 100)")
    parser.add_argument("--max-map-loss", type=float, default=0.01, help="allowed mAP50-95 loss (default 0.01)")
    parser.add_argument("--probe-grow", type=float, default=300.0, help="--probe-grow of the search, seconds (default 300)")
    parser.add_argument("--truth-factor", type=int, default=3, help="long runs' epochs / probe epochs (default 3)")
    parser.add_argument("--truth-seeds", type=int, default=2, help="long runs per signature (default 2)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (new or empty) and keep it, instead of a temp dir")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    started = time.perf_counter()
    spec = next(s for s in SETS if s.name == args.set)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep).resolve() if args.keep else Path(tmp)
        if args.keep and root.exists() and any(root.iterdir()):
            raise SystemExit(f"--keep {root} is not empty; give a new or empty folder")
        rows, base_s = measure_set(spec, root / spec.name, args)
    say(f"\nset {spec.name}; baseline imgsz {args.base} freeze 0; probes {args.probe_epochs} epoch(s) x fraction "
        f"{args.probe_fraction} from the set's checkpoint, priced against a {args.epochs}-epoch run; long runs "
        f"{args.truth_factor} x the probe epochs judged at, on the whole train set, x {args.truth_seeds} seed(s) "
        f"(the baseline's took {base_s:.0f} s, shared by every row); allowed loss {args.max_map_loss}")
    say("\n".join(table(rows, args.max_map_loss)))
    agreements = [outcome(row, args.max_map_loss)[2] for row in rows]
    say(f"\nagreement: {agreements.count('agree')} of {len(rows)} verdict(s) agreed with the long runs, "
        f"{agreements.count('disagree')} disagreed, {len(rows) - agreements.count('agree') - agreements.count('disagree')} "
        "gave no verdict")
    say(f"total wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
