#!/usr/bin/env bash
# The GPU check: what no CPU machine can show, on one NVIDIA GPU, inside a stated budget of 8 minutes
# (issue 46: a lent GPU's 15-minute slot, less the machine's start and the transfers).
#
#   bash benchmarks/gpu_check.sh [OUT]        (OUT: default $OUT, else ./gpu-check)
#
# It runs the Python it finds (PYTHON, default python3), which must have torch with CUDA; the checkout is put
# on PYTHONPATH (nothing is pip-installed: the machine may be offline). On a machine without network, install
# the wheels benchmarks/gpu_wheels.sh downloads first: CONTRIBUTING.md, "Running the GPU tier on a machine
# without network". That install is the margin the budget keeps before the steps.
#
# Each step runs under its own limit (TERM at the limit less GRACE_S, KILL at the limit); the limits and the
# install margin add up to at most BUDGET_S, checked before anything runs and by tests/test_benchmarks.py:
#   setup        the interpreter: what the check imports, torch and the GPUs, a `yolo` beside it (gpu_python.py)
#   doctor       speedopt doctor --json, and nvidia-smi
#   demo-data    the demo set the search reads
#   gpu-tier     tests/gpu in ONE pytest process (no xdist: never two trials on one GPU at once), in file order,
#                each test under 90 s (pytest-timeout): AMP and NVML, channels_last, bf16, deterministic, memory
#                prediction within 15%, verify, compile decided at the end of a search, OOM as a status (last,
#                in its own process); DDP skips on one GPU. Its estimates: tests/gpu/test_gpu.py
#   search       a short search, quality off, over workers and cache. No compile in its space: a search decides
#                compile once, on its winner, and that cold compile (104 s for one trial in issue 46's run)
#                does not fit here; the tier covers it
#   report       the study's report (markdown, figures, CSV)
#   trials-json  every trial's measurements as JSON
# Outputs in OUT, 6 files (a lent machine returns at most 8): status.txt (the budget, and each step's limit,
# exit status, seconds and elapsed time), gpu-tier.txt, gpu-tier.xml, search.txt, trials.json, and more.tar.gz
# with the rest (the interpreter, doctor, nvidia-smi, the other logs, the study, the report). Exits non-zero if
# any step failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

BUDGET_S=480          # the whole check: 8 minutes
INSTALL_MARGIN_S=15   # the offline install of the wheels before it (12 wheels, --no-compile: about 10 s)
GRACE_S=5             # a step still running GRACE_S before its limit is sent TERM, then KILL at the limit
declare -A LIMIT=([setup]=15 [doctor]=15 [demo-data]=20 [gpu-tier]=285 [search]=90 [report]=30 [trials-json]=10)
ORDER=(setup doctor demo-data gpu-tier search report trials-json)
TEST_LIMIT_S=90       # each GPU test (tests/gpu/conftest.py's GPU_TEST_LIMIT_S sets the same)

OUT=${1:-${OUT:-gpu-check}}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
MORE="$OUT/more"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$MORE"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" YOLO_OFFLINE=1 SPEEDOPT_TEST_POSTGRES='' PYTHONUNBUFFERED=1

total=$INSTALL_MARGIN_S
for name in "${ORDER[@]}"; do total=$((total + LIMIT[$name])); done
{
  echo "budget ${BUDGET_S} s = install margin ${INSTALL_MARGIN_S} s + step limits $((total - INSTALL_MARGIN_S)) s" \
    "+ $((BUDGET_S - total)) s spare; each GPU test ${TEST_LIMIT_S} s"
  for name in "${ORDER[@]}"; do printf '  %-12s limit %3s s\n' "$name" "${LIMIT[$name]}"; done
} | tee "$OUT/status.txt"
if [ "$total" -gt "$BUDGET_S" ]; then
  echo "the limits add up to ${total} s, over the budget of ${BUDGET_S} s" | tee -a "$OUT/status.txt"
  exit 2
fi

failed=0
step() {  # step NAME COMMAND...: run under LIMIT[NAME], log to OUT (the tier and the search) or OUT/more
  local name=$1 limit=${LIMIT[$1]} began=$SECONDS log="$MORE/$1.txt"
  shift
  case $name in gpu-tier | search) log="$OUT/$name.txt" ;; esac
  timeout --kill-after="$GRACE_S" "$((limit - GRACE_S))" "$@" > "$log" 2>&1
  local rc=$?
  printf '%-12s limit=%3ss rc=%-3s seconds=%-4s elapsed=%ss\n' "$name" "$limit" "$rc" "$((SECONDS - began))" "$SECONDS" \
    | tee -a "$OUT/status.txt"
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

if ! step setup "$PY" benchmarks/gpu_python.py "$SCRATCH/python" "$SCRATCH/chosen"; then
  cat "$MORE/setup.txt" >> "$OUT/status.txt"
  tar -czf "$OUT/more.tar.gz" -C "$OUT" more && rm -rf "$MORE"
  exit 1
fi
PY=$(cat "$SCRATCH/chosen")
# shellcheck disable=SC2016  # $1 is the inner shell's: the interpreter
step doctor bash -c '"$1" -m speedopt doctor --json --device 0; rc=$?; nvidia-smi; exit $rc' doctor "$PY"
step demo-data "$PY" -m speedopt demo-data "$SCRATCH/demo" --train 192 --val 16
step gpu-tier "$PY" -m pytest tests/gpu -m gpu -p no:xdist -v -rs --timeout "$TEST_LIMIT_S" --junitxml "$OUT/gpu-tier.xml"
# Quality off: the accuracy knobs (amp, bf16, batch, ...) stay the baseline's, so the space holds the others. AMP,
# bf16, channels_last and the batch are measured in the tier. --timeout: no trial starts after 50 s.
printf 'workers: [2, 8]\ncache: [none, ram]\n' > "$MORE/space.yaml"
step search "$PY" -m speedopt search --data "$SCRATCH/demo/data.yaml" --device 0 --space "$MORE/space.yaml" \
  --quality off --trials 4 --timeout 50 --steps 8 --max-steps 16 --warmup 3 --repeats 0 --ceiling-rank off \
  --trial-timeout 40 --baseline "model=yolov5n imgsz=320 batch=16 workers=2" \
  --storage "sqlite:///$MORE/study.db" --study gpu-check --no-report
step report "$PY" -m speedopt report --storage "sqlite:///$MORE/study.db" --study gpu-check --out "$MORE/report"
step trials-json "$PY" - "$MORE/study.db" "$OUT/trials.json" <<'PYEOF'
import json, sys
import optuna
from speedopt.study import flat_attrs, quiet_optuna
quiet_optuna()
db, out = sys.argv[1], sys.argv[2]
study = optuna.load_study(study_name="gpu-check", storage=f"sqlite:///{db}")
rows = [{"number": t.number, "state": t.state.name, "value": t.value, **flat_attrs(t.user_attrs)} for t in study.trials]
json.dump({"study": study.user_attrs, "trials": rows}, open(out, "w"), indent=1, default=str)
print(f"{len(rows)} trials written")
PYEOF
echo "total seconds=$SECONDS of the budget's ${BUDGET_S} s" | tee -a "$OUT/status.txt"
tar -czf "$OUT/more.tar.gz" -C "$OUT" more && rm -rf "$MORE"
echo "outputs in $OUT"
exit $failed
