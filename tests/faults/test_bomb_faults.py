"""Issue 44, item 7: ``prepare`` reads each image's header before decoding it and skips, in one line, what
the trainers drop unread: an image over PIL's decompression-bomb limit (twice ``Image.MAX_IMAGE_PIXELS``,
which both trainers' label scans hit in ``Image.open``). A 30000x30000 PNG of a few hundred KB made a
worker decode 2.7 GB of pixels, and the copy kept one image more than the trainer uses.

The bombs are written by the tests (a 1-bit PNG of zeros, compressed as it is written). The fast cases
call :func:`speedopt.data.prepare` in this process; the slow one runs the CLI under a memory watch.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from PIL import Image

from speedopt import data
from tests.faults.conftest import Faults, no_traceback


def bomb_png(path: Path, width: int, height: int) -> Path:
    """A valid 1-bit greyscale PNG of ``width`` x ``height`` zeros: tiny on disk, huge once decoded."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    row = b"\0" * (1 + (width + 7) // 8)  # filter byte 0, then the packed pixels
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path


def _with_bomb(faults: Faults, width: int, height: int) -> tuple[Path, Path]:
    """A demo dataset plus one train image ``bomb.png`` of ``width`` x ``height`` with a label."""
    yaml_path = faults.dataset(train=6, val=2)
    bomb = bomb_png(yaml_path.parent / "images" / "train" / "bomb.png", width, height)
    (yaml_path.parent / "labels" / "train" / "bomb.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    return yaml_path, bomb


def _dropped_line(notes: tuple[str, ...], name: str) -> str:
    lines = [note for note in notes if "decompression bomb" in note]
    assert len(lines) == 1 and name in lines[0], notes
    return lines[0]


def test_prepare_skips_a_bomb_the_trainer_drops(faults: Faults) -> None:
    yaml_path, bomb = _with_bomb(faults, 20000, 10000)  # 200 M pixels: over PIL's 179 M, a 600 MB decode
    assert bomb.stat().st_size < 200_000
    ds = data.load(yaml_path)
    assert len(ds.train_images) == 7
    report = data.prepare(ds, data.PrepareSpec(imgsz=32), out=faults.work / "copy", jobs=1)
    line = _dropped_line(report.notes, str(bomb))
    assert str(2 * Image.MAX_IMAGE_PIXELS) in line  # the limit named is PIL's own
    assert report.copy.train_images == 6 and report.copy.corrupt == ()
    assert not list((faults.work / "copy").rglob("bomb*"))
    # the trainer's own check refuses the very file: it trains on the 6 the copy holds
    from ultralytics.data.utils import check_image

    with pytest.raises(Image.DecompressionBombError):
        check_image(str(bomb))


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # 6912 pixels over 4000: kept
def test_the_limit_is_pils_as_the_trainer_runs_it(faults: Faults, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lower ``Image.MAX_IMAGE_PIXELS`` (what a trainer's process would see) moves the line: 96x72 demo
    images (6912 pixels) pass a limit of 2 x 4000, a 100x100 one (10000) does not."""
    yaml_path = faults.dataset(train=4, val=1)
    Image.new("RGB", (100, 100), "white").save(yaml_path.parent / "images" / "train" / "big.png")
    (yaml_path.parent / "labels" / "train" / "big.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4000)
    report = data.prepare(data.load(yaml_path), data.PrepareSpec(imgsz=32), out=faults.work / "copy", jobs=1)
    assert "8000" in _dropped_line(report.notes, "big.png")
    assert report.copy.train_images == 4


@pytest.mark.slow
def test_prepare_cli_never_decodes_a_bomb(faults: Faults) -> None:
    yaml_path, bomb = _with_bomb(faults, 30000, 30000)  # the audit's: 900 M pixels, 2.7 GB as BGR
    faults.watch(yaml_path.parent)
    watch = (
        "import json, resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(json.dumps({'rc': done.returncode, 'out': done.stdout + done.stderr, 'peak': peak}))\n"
    )
    for jobs in ("1", "2"):
        command = [sys.executable, "-m", "speedopt", "prepare", "--data", str(yaml_path), "--imgsz", "32",
                   "--out", str(faults.work / f"copy{jobs}"), "--jobs", jobs]
        ran = subprocess.run([sys.executable, "-c", watch, *command], capture_output=True, text=True, timeout=300,
                             cwd=faults.work, env={**os.environ, "TMPDIR": str(faults.tmp)})
        result = json.loads(ran.stdout)
        no_traceback(subprocess.CompletedProcess(command, result["rc"], result["out"], ""))
        assert result["rc"] == 0, result["out"][-2000:]
        assert result["peak"] < 1.5 * 2**30, f"a process reached {result['peak'] / 2**30:.1f} GB"
        lines = [line for line in result["out"].splitlines() if "decompression bomb" in line]
        assert len(lines) == 1 and bomb.name in lines[0], result["out"]
        manifest = json.loads((faults.work / f"copy{jobs}" / data.MANIFEST).read_text())
        assert manifest["train_images"] == 6 and manifest["corrupt"] == []
    faults.unchanged()
