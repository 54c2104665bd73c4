"""The trial table shows what the trial read: its label scan and the images its trainer listed."""

from rich.console import Console

from speedopt.cli._render import trial_table
from speedopt.knobs import Knobs
from speedopt.measure import TrialResult
from speedopt.status import Status


def _text(result: TrialResult) -> str:
    console = Console(width=200, record=True)
    console.print(trial_table(result))
    return console.export_text()


def test_the_label_scan_and_the_images_read_are_shown_when_recorded():
    knobs = Knobs(imgsz=320, data="resized")
    shown = _text(TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics", label_scan_s=0.0,
                              image_bytes_mean=40 * 2**10, image_long_side=320))
    assert "0.0 s (read from the label cache)" in shown and "long side 320 px, 40 KiB each" in shown
    assert "data=resized" in shown
    old = _text(TrialResult(Status.OK, "", knobs, knobs, "cpu", "ultralytics"))  # a record made before these figures
    assert "read from the label cache" not in old
