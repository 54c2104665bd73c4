"""The advice on per-epoch overheads: validation, checkpoint saves and online loggers, forced by numbers."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from speedopt.engines._words import TRAIN_PY, YOLO
from speedopt.reporting import Projection
from speedopt.reporting._loggers import LoggerIntegration
from speedopt.reporting._overheads import CALLBACK, interval, overhead_advice


def _projection(train_s: float, val_s: float | None, save_s: float | None = None, epochs: int = 100) -> Projection:
    total = epochs * (train_s + (val_s or 0.0) + (save_s or 0.0))
    return Projection(epochs, 1000, 10.0, 0.0, train_s, val_s, total, (), save_s=save_s)


def test_validation_above_a_tenth_of_an_epoch_is_advised_with_the_saving():
    # 20 s validation in a 100 s epoch: 20%; every k epochs with k = 3 brings it to 6.25 s of 86.7 s (7%).
    text = "\n".join(overhead_advice(_projection(80.0, 20.0), words=YOLO, loggers=[]))
    assert "Validation is 20% of each epoch" in text
    assert "`val=False`" in text and "33.0 min" in text  # 100 x 20 s x (1 - 1/100)
    assert "validate every 3 epochs" in text and "22.2 min" in text  # 100 x 20 s x (1 - 1/3)
    assert 'model.add_callback("on_train_epoch_end", validate_every_k)' in text and "K = 3" in text


def _advice(p: Projection, **kw) -> str:
    return "\n".join(overhead_advice(p, words=TRAIN_PY if kw.get("classic") else YOLO, loggers=kw.get("loggers", [])))


def test_validation_below_a_tenth_is_measured_but_not_advised():
    text = _advice(_projection(95.0, 9.0))  # 8.7% of the epoch
    assert "validation 9.00 s (8.7%)" in text and "training 95.00 s" in text and "checkpoint saves not timed" in text
    assert "`val=False`" not in text and "every" not in text.split("advice follows")[1]
    assert "validation not timed" in _advice(_projection(95.0, None))
    assert overhead_advice(None, words=YOLO, loggers=[]) == []


def test_classic_validation_advice_is_noval():
    text = "\n".join(overhead_advice(_projection(50.0, 50.0), words=TRAIN_PY, loggers=[]))
    assert "`--noval`" in text and "on_train_epoch_end" not in text


def test_slow_saves_are_advised_in_the_trainers_own_terms():
    p = _projection(10.0, 0.5, save_s=2.0, epochs=10)  # 2 s of 12.5 s: 16%
    assert "`save=False`" in "\n".join(overhead_advice(p, words=YOLO, loggers=[]))
    assert "`--nosave`" in "\n".join(overhead_advice(p, words=TRAIN_PY, loggers=[]))
    assert "`save=False`" not in _advice(_projection(10.0, 0.5, save_s=0.1))


def test_online_loggers_are_warned_about_and_local_ones_are_not():
    wandb = LoggerIntegration("wandb", "wandb", True, "on in settings.json")
    board = LoggerIntegration("tensorboard", "tensorboard", False, "on in settings.json")
    text = "\n".join(overhead_advice(_projection(95.0, 1.0), words=YOLO, loggers=[wandb, board]))
    assert "stall" in text and "`yolo settings wandb=False` or `WANDB_MODE=offline`" in text
    assert "Logger integrations on for this trainer here: wandb (online; on in settings.json), tensorboard (local;" in text
    local = _advice(_projection(95.0, 1.0), loggers=[board])
    assert "tensorboard (local" in local and "stall" not in local


def test_the_interval_stays_within_the_run():
    assert interval(_projection(1.0, 100.0, epochs=5)) == 5
    assert interval(_projection(90.0, 11.0)) == 2


@pytest.mark.slow
def test_the_printed_callback_validates_only_every_k_epochs(tmp_path):
    """The exact printed Python form, on a real Ultralytics trainer: k=2 over 3 epochs validates after epochs 2
    and 3 (the final one), never after epoch 1."""
    from speedopt import data as demo_data

    yaml = demo_data.generate(tmp_path / "demo", demo_data.DemoSpec(train=8, val=4, width=128, height=96))
    code = CALLBACK.format(k=2).replace("YOLO(...)", 'YOLO("yolov5n.yaml")').replace(
        "model.train(...)",
        "model.train(data=DATA, epochs=3, imgsz=64, batch=4, workers=0, device='cpu', plots=False, "
        "project=PROJECT, name='run', exist_ok=True, amp=False)",
    )
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from ultralytics.utils import USER_CONFIG_DIR
        from speedopt.offline import place_font
        place_font(Path(USER_CONFIG_DIR))
        DATA, PROJECT = {str(yaml)!r}, {str(tmp_path / "runs")!r}
        validated = []

        def count(trainer):
            validate = trainer.validate

            def counted():
                validated.append(trainer.epoch + 1)
                return validate()

            trainer.validate = counted
    """) + code.replace("model.add_callback(", 'model.add_callback("on_train_start", count)\nmodel.add_callback(', 1) + (
        "\nprint('VALIDATED', json.dumps(validated))\n"
    )
    env = {**os.environ, "YOLO_OFFLINE": "1", "YOLO_CONFIG_DIR": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("VALIDATED"))
    assert json.loads(line.split(" ", 1)[1]) == [2, 3]


@pytest.mark.slow
def test_a_large_val_split_gets_the_validation_advice_in_a_real_report(tmp_path):
    """A real search and report on demo data whose val split is 12x its train split: validation, timed with the
    trainer's own code, is most of an epoch, so the report advises validating less often, with the saving."""
    from speedopt import data as demo_data
    from tests.conftest import run_cli

    yaml = demo_data.generate(tmp_path / "bigval", demo_data.DemoSpec(train=16, val=192, width=96, height=72, seed=3))
    done = run_cli(
        "search", "--data", str(yaml), "--trials", "1", "--steps", "3", "--max-steps", "3", "--warmup", "1", "--quality", "off",
        "--repeats", "0", "--device", "cpu", "--baseline", "model=yolov5n imgsz=64 batch=4 workers=0",
        "--storage", f"sqlite:///{tmp_path / 's.db'}", "--epochs", "20", cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    report = next((tmp_path / "reports").glob("*.md")).read_text()
    measured = next(line for line in report.splitlines() if line.startswith("Per epoch of the projected run"))
    assert "validation not timed" not in measured and "checkpoint saves not timed" not in measured
    assert "Validation is" in report and "`val=False`" in report and "Or validate every" in report
    assert 'model.add_callback("on_train_epoch_end", validate_every_k)' in report
