#!/usr/bin/env bash
# Run opsweep's GPU checks on a GPU host, in one call:
#   bash benchmarks/device_check.sh STEP [STEP ...]
# Steps, run in order:
#   pytest          the GPU tests (pytest -m gpu)
#   crosscheck      benchmarks/timer_crosscheck.py (opsweep vs do_bench vs torch.utils.benchmark)
#   EXP[,EXP...]    python -m runner -m experiment=EXP[,EXP...] (one sweep, one merged file)
#   report=EXP      python -m runner.report on the latest sweep of EXP
#   compare=EXP     python -m runner.compare on the two latest sweeps of EXP
#   lessons         python -m runner.claims.report over every sweep -> $OUT/experiments.md
# A host without internet may have torch but no hydra/omegaconf: put their wheels in .whl/
# (docs/install.md). All sweeps and reports are packed into one file, $OUT/results.tgz; logs go to
# $OUT/run.log; a short table of every sweep is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/opsweep-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
RESULTS=/tmp/opsweep-results
mkdir -p "$RESULTS"
declare -A LATEST PREVIOUS
log() { echo "$*" | tee -a "$OUT/run.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$OUT/nvidia-smi.csv"
for step in "$@"; do
  case "$step" in
    pytest)
      python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee -a "$OUT/run.log" | tail -15 ;;
    crosscheck)
      python3 benchmarks/timer_crosscheck.py 2>&1 | tee -a "$OUT/run.log" ;;
    report=*)
      exp=${step#report=}
      python3 -m runner.report "${LATEST[$exp]}" --out "${LATEST[$exp]}/report" \
        --results-root "$RESULTS" >> "$OUT/run.log" 2>&1
      log "report $exp exit=$? -> ${LATEST[$exp]}/report" ;;
    compare=*)
      exp=${step#compare=}
      python3 -m runner.compare "${PREVIOUS[$exp]}" "${LATEST[$exp]}" --format markdown 2>&1 \
        | tee -a "$OUT/run.log" | tail -40 ;;
    lessons)
      python3 -m runner.claims.report "$RESULTS"/*/results.parquet --out "$OUT/experiments.md" \
        >> "$OUT/run.log" 2>&1
      log "lessons exit=$?" ;;
    *)
      before=$(ls "$RESULTS")
      start=$(date +%s)
      python3 -m runner -m "experiment=$step" "results_dir=$RESULTS" ${OPSWEEP_ARGS:-} \
        >> "$OUT/run.log" 2>&1
      log "experiment=$step exit=$? wall=$(( $(date +%s) - start ))s"
      for sweep in $(ls "$RESULTS"); do
        case " $before " in *" $sweep "*) continue;; esac
        [ "$sweep" = calibration ] && continue
        PREVIOUS[$step]=${LATEST[$step]:-}
        LATEST[$step]=$RESULTS/$sweep
      done ;;
  esac
done
tar -czf "$OUT/results.tgz" -C "$RESULTS" --exclude='*/jobs/*/.hydra' . 2>/dev/null
# the short table of every sweep, last (none where only the tests ran)
sweeps=$(ls "$RESULTS"/*/results.parquet 2>/dev/null)
if [ -n "$sweeps" ]; then python3 benchmarks/summarize.py $sweeps; fi
