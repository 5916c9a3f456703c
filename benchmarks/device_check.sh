#!/usr/bin/env bash
# Run opsweep's GPU checks on the lent GPU machine (the `device` tool), in one call:
#   bash benchmarks/device_check.sh [pytest] EXPERIMENT [EXPERIMENT ...]
# The machine has torch but no hydra/omegaconf: carry them as wheels in .whl/ (README,
# "Running on the GPU machine"). Each experiment's merged Parquet and log are copied flat
# into $OUT (the device tool returns at most 8 files, 2 folders deep); a short table is
# printed last.
set -uo pipefail
OUT=${OUT:-/tmp/opsweep-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
RESULTS=/tmp/opsweep-results
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv > "$OUT/nvidia-smi.csv" 2>&1
cat "$OUT/nvidia-smi.csv"
: > "$OUT/run.log"
for arg in "$@"; do
  if [ "$arg" = pytest ]; then
    python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee -a "$OUT/run.log" | tail -15
    continue
  fi
  before=$(ls "$RESULTS" 2>/dev/null)
  python3 -m runner "experiment=$arg" "results_dir=$RESULTS" >> "$OUT/run.log" 2>&1
  echo "experiment=$arg exit=$?" | tee -a "$OUT/run.log"
  for sweep in $(ls "$RESULTS"); do
    case " $before " in *" $sweep "*) continue;; esac
    cp "$RESULTS/$sweep/results.parquet" "$OUT/$arg.parquet" 2>/dev/null
  done
done
python3 benchmarks/summarize.py "$OUT"/*.parquet
