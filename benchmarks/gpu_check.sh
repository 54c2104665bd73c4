#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, in under 11 minutes, run what no CPU machine can show and
# keep every output in one folder.
#
#   bash benchmarks/gpu_check.sh [OUT]        (OUT: default $OUT, else ./gpu-check)
#
# 1. speedopt doctor (JSON) and nvidia-smi: what the machine is;
# 2. the `gpu` test tier (tests/gpu: AMP on/off, CUDA OOM as a status, NVML telemetry, memory prediction
#    within 15%, verify on the GPU, DDP across 2 GPUs where there are 2, torch.compile on CUDA, bf16, channels_last
#    on/off), with a time limit;
# 3. a short search on the demo data with workers, cache, compile and channels_last in the space (quality off:
#    speed only, so the accuracy knobs stay the baseline's), its
#    report (markdown, figures, CSV) and every trial's measurements as JSON.
# It uses the Python environment it finds (PYTHON, default python3): torch with CUDA must already be
# installed there (the machine may be offline); speedopt is installed from this checkout if missing.
# Each step's exit status is in $OUT/status.txt; the script exits non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-gpu-check}}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
: > "$OUT/status.txt"
failed=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.txt, record the status
  local name=$1 limit=$2
  shift 2
  local began=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc seconds=$((SECONDS - began))" | tee -a "$OUT/status.txt"
  [ "$rc" -eq 0 ] || failed=1
}

if ! "$PY" -c "import speedopt, pytest" 2>/dev/null; then
  "$PY" -m pip install --quiet --no-build-isolation -e '.[test]' > "$OUT/install.txt" 2>&1 \
    || "$PY" -m pip install --quiet --no-deps --no-build-isolation -e . >> "$OUT/install.txt" 2>&1
fi
"$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())" \
  > "$OUT/torch.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
export YOLO_OFFLINE=1 SPEEDOPT_TEST_POSTGRES=

step doctor 30 "$PY" -m speedopt doctor --json --device 0
step demo-data 30 "$PY" -m speedopt demo-data "$OUT/demo"
step gpu-tier 280 "$PY" -m pytest tests/gpu -m gpu -q -rs -x --junitxml "$OUT/gpu-tier.xml"
# Quality off: the accuracy knobs (amp, bf16, batch, ...) stay the baseline's, so the space holds the others; AMP,
# bf16 and the batch are measured in the tier. Each channels_last value compiles its graph cold once.
printf 'workers: [2, 4]\ncache: [none, ram]\ncompile: [off, default]\nchannels_last: [default, off]\n' > "$OUT/space.yaml"
step search 200 "$PY" -m speedopt search --data "$OUT/demo/data.yaml" --device 0 --space "$OUT/space.yaml" \
  --quality off --trials 6 --steps 10 --repeats 0 --baseline "model=yolov5n imgsz=320 batch=16 workers=2" \
  --storage "sqlite:///$OUT/study.db" --study gpu-check --no-report
step report 40 "$PY" -m speedopt report --storage "sqlite:///$OUT/study.db" --study gpu-check --out "$OUT/report"
step trials-json 20 "$PY" - "$OUT" <<'PYEOF'
import json, sys
import optuna
from speedopt.study import flat_attrs
out = sys.argv[1]
study = optuna.load_study(study_name="gpu-check", storage=f"sqlite:///{out}/study.db")
rows = [{"number": t.number, "state": t.state.name, "value": t.value, **flat_attrs(t.user_attrs)} for t in study.trials]
json.dump({"study": study.user_attrs, "trials": rows}, open(f"{out}/trials.json", "w"), indent=1, default=str)
print(f"{len(rows)} trials written")
PYEOF
echo "outputs in $OUT"
exit $failed
