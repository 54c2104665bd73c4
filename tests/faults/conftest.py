"""The fault suite's harness: run a command against hostile or faulty input, then check that it said
one clear line, exited as promised, and left the user's dataset, storage and temp folder as they were.

Every case runs with a private ``TMPDIR``, so "nothing left in the temp folder" is checked on a folder no
other process writes to; it is a short path in ``/tmp``, as a user's temp folder is (in pytest's own temp
folder, ``.../popen-gw1/test_a_classic_trial_longer_th0/tmp`` under pytest-xdist, multiprocessing's sockets
would not fit the 107 bytes of an AF_UNIX path, and a trainer's dataloader then waits forever for a batch); a trial (and every process a case signals or kills) is the real ``speedopt``
entry point in a subprocess. Permissions are
simulated with ``chattr +i`` (immutable: even root cannot write) where a case needs a read-only
folder, since the suite runs as root here; a case skips, saying so, where chattr is not available.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from speedopt import data as demo_data
from tests.conftest import run_cli


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a digest of its content (folders: "dir")."""
    if not root.exists():
        return {}
    if root.is_file():
        return {root.name: hashlib.sha256(root.read_bytes()).hexdigest()}
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@dataclass
class Faults:
    """One case's sandbox: a private temp folder, a work folder, and the trees it must leave unchanged."""

    root: Path
    tmp: Path
    work: Path
    watched: dict[Path, dict[str, str]] = field(default_factory=dict)

    def watch(self, *paths: Path) -> None:
        """Remember ``paths`` as they are now; :meth:`unchanged` checks them later."""
        for path in paths:
            self.watched[path] = tree(path)

    def run(self, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """The real CLI in ``work`` with the private temp folder."""
        return run_cli(*args, cwd=self.work, timeout=timeout, env={"TMPDIR": str(self.tmp), **(env or {})})

    def unchanged(self) -> None:
        """Every watched tree is as it was, and the private temp folder holds nothing speedopt left."""
        for path, before in self.watched.items():
            after = tree(path)
            added = sorted(set(after) - set(before))
            removed = sorted(set(before) - set(after))
            changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
            assert (added, removed, changed) == ([], [], []), f"{path} changed: +{added} -{removed} ~{changed}"
        left = sorted(p.name for p in self.tmp.iterdir())
        assert left == [], f"left in the temp folder: {left}"

    def dataset(self, name: str = "shapes", train: int = 16, val: int = 4) -> Path:
        """A private tiny demo dataset (cases may damage it); returns its data.yaml."""
        spec = demo_data.DemoSpec(train=train, val=val, width=96, height=72, seed=3)
        return demo_data.generate(self.root / name, spec)


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[Faults]:
    tmp = Path(tempfile.mkdtemp(prefix="sf-", dir="/tmp"))  # short: see the module docstring
    work = tmp_path / "work"
    work.mkdir()
    try:
        yield Faults(root=tmp_path, tmp=tmp, work=work)
    finally:
        unfreeze(tmp_path)
        unfreeze(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def one_line_error(done: subprocess.CompletedProcess, *mentions: str, code: int = 2) -> str:
    """Assert the command failed with ``code`` and one stderr line (no traceback) naming ``mentions``."""
    everything = done.stdout + done.stderr
    assert "Traceback" not in everything, everything[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, (done.returncode, everything[-3000:])
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("speedopt ") and ": " in line, line
    for text in mentions:
        assert text.lower() in line.lower(), (text, line)
    return line


def no_traceback(done: subprocess.CompletedProcess) -> None:
    everything = done.stdout + done.stderr
    assert "Traceback" not in everything, everything[-3000:]


def needs_classic_yolov5() -> None:
    """Skip the calling test, saying why, where the classic YOLOv5 code (the ``yolov5`` extra) is not installed:
    a case about the classic engine cannot run without it, and is no failure of speedopt's."""
    import importlib.util

    if importlib.util.find_spec("yolov5") is None:  # what `import yolov5` would fail on, without importing torch
        pytest.skip("the classic YOLOv5 code is not installed: pip install -e '.[yolov5]'")


def chattr_available() -> bool:
    return shutil.which("chattr") is not None and os.geteuid() == 0


def freeze(path: Path) -> None:
    """Make ``path`` immutable (``chattr +i``): no write, create, rename or delete in it, even as root."""
    if not chattr_available():
        pytest.skip("chattr +i needs root and e2fsprogs: read-only folders cannot be simulated here")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported on this filesystem: {done.stderr.strip()}")


def unfreeze(root: Path) -> None:
    """Undo every ``chattr +i`` under ``root`` so pytest can delete it."""
    if not chattr_available():
        return
    subprocess.run(["chattr", "-R", "-i", str(root)], capture_output=True)
