"""The interpreter benchmarks/gpu_check.sh runs: this one, or beside it an overlay that has a `yolo` command.

    python benchmarks/gpu_python.py OVERLAY_DIR CHOSEN_FILE [--force]

`speedopt verify` runs the printed `yolo ...` command from beside ``sys.executable``. On a GPU machine without
network the wheels are installed with ``pip install --target DIR`` (CONTRIBUTING.md), which leaves ``yolo`` in
``DIR/bin``, not beside the interpreter. Then this makes OVERLAY_DIR a virtual environment with no packages of its
own that reads this interpreter's site-packages (a .pth file) and holds a ``yolo`` launcher, and writes the
interpreter to use to CHOSEN_FILE. Nothing outside OVERLAY_DIR changes. It also checks that what the GPU check
imports is there and prints torch, CUDA and the GPUs, so a missing wheel stops the check in its first second.
"""

from __future__ import annotations

import importlib
import site
import subprocess
import sys
import venv
from pathlib import Path

NEEDED = ("torch", "optuna", "ultralytics", "polars", "pytest", "pytest_timeout", "speedopt")


def overlay(folder: Path) -> Path:
    """A venv at ``folder`` that reads this interpreter's site-packages and has a ``yolo`` launcher; its python."""
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(folder)
    python = folder / "bin" / "python"
    purelib = subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                      text=True).strip()
    dirs = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    Path(purelib, "_gpu_check_base.pth").write_text("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
    yolo = folder / "bin" / "yolo"
    yolo.write_text(f"#!{python}\nimport sys\nfrom ultralytics.cfg import entrypoint\nsys.exit(entrypoint())\n")
    yolo.chmod(0o755)
    return python


def main(argv: list[str]) -> int:
    missing = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if missing:
        print("missing: " + ", ".join(missing) + "; on a machine without network see CONTRIBUTING.md, "
              "'Running the GPU tier on a machine without network'", file=sys.stderr)
        return 1
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    print(f"python {sys.version.split()[0]} at {sys.executable}; torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"GPUs {gpus}")
    folder, chosen = Path(argv[0]), Path(argv[1])
    python = Path(sys.executable)
    if "--force" in argv or not (python.parent / "yolo").is_file():
        python = overlay(folder)
        print(f"no `yolo` beside {sys.executable}: running {python}, an overlay of it with {folder / 'bin' / 'yolo'}")
    chosen.write_text(f"{python}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
