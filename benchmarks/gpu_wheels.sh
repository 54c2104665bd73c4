#!/usr/bin/env bash
# The Python packages a lent GPU machine lacks, as wheels in .whl/ (git-ignored), for benchmarks/gpu_check.sh there.
#
#   bash benchmarks/gpu_wheels.sh [PIP]        (PIP: default "python3 -m pip"; needs the package registry)
#
# The GPU machine (Python 3.12, torch 2.11 with CUDA) is offline and has numpy, pandas, scipy, matplotlib,
# pillow, opencv-python-headless, psutil, pyyaml, requests, httpx, rich, tqdm, nvidia-ml-py, packaging,
# typing-extensions, markupsafe, pytest and pytest-xdist. It lacks optuna and ultralytics and these needs of
# theirs (Requires-Dist of each, less what the machine has). Versions are this project's venv's; polars is
# 0.20.31 (ultralytics asks for >=0.20.0): polars 2.x is a 40+ MiB wheel, over what one call may carry beside
# the repo (64 MiB in all). Each is downloaded --no-deps, so this list is the whole of what travels.
# Prints each wheel's size and the total, with the repo's tracked files.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a PIP <<< "${1:-python3 -m pip}"
WHEELS=(
  optuna==5.1.0 alembic==1.20.1 sqlalchemy==2.1.9 mako==1.4.3 colorlog==6.12.0  # optuna and its needs
  optuna-dashboard==0.21.0 bottle==0.13.5  # trial and study notes (speedopt.study.notes)
  ultralytics==8.4.190 ultralytics-thop==2.2.3 ultralytics-platform==0.1.99 polars==0.20.31  # the trainer
  pytest-timeout==2.4.0  # the tier's per-test limit (gpu_check.sh --timeout)
)
mkdir -p .whl
for wheel in "${WHEELS[@]}"; do
  "${PIP[@]}" download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$wheel"
done
du -b .whl/*.whl | awk '{printf "%8.2f MiB  %s\n", $1 / 2^20, $2}'
wheels=$(du -cb .whl/*.whl | tail -1 | cut -f1)
repo=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
awk -v w="$wheels" -v r="$repo" 'BEGIN {
  printf "wheels %.1f MiB + repo %.1f MiB = %.1f MiB of the 64 MiB a call carries\n", w / 2^20, r / 2^20, (w + r) / 2^20
  exit (w + r >= 64 * 2^20)
}'
