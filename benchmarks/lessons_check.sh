#!/usr/bin/env bash
# Re-run the 16 lessons at full size on one GPU, in one call, and judge them:
#   bash benchmarks/lessons_check.sh [DATE]          (DATE names the packed file; default today)
# What it does, in order:
#   1. one multirun of every lesson (python -m runner -m experiment=A,B,...) with the quick
#      timer, as the published data was taken (docs/data/README.md), into one merged file;
#   2. copies that file to $OUT/h200-experiments-DATE.parquet (commit it under docs/data/);
#   3. writes $OUT/experiments.md (python -m runner.claims.report; copy to docs/experiments.md),
#      closing with the verdicts that changed since the newest docs/data/h200-experiments-*
#      (or $SINCE);
#   4. prints a per-trial table (loop and device time) to $OUT/run.log;
#   5. prints the verdict table last (python -m runner.check, judged by conf/experiment/*.yaml),
#      whose "time" column says which time each verdict read.
# The GPU machine has torch but no hydra/omegaconf: wheels in .whl/ (or $WHEELS) are installed
# into /tmp/site first when present. Extra runner overrides: OPSWEEP_ARGS="...".
set -uo pipefail
OUT=${OUT:-/tmp/opsweep-out}
DATE=${1:-$(date -u +%F)}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl \
    2>&1 | tail -1
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-220}
LESSONS=dtype_cliff,tensor_core_alignment,cuda_graphs,streams,copy_compute_overlap,\
compile_fusion,compile_recompilation,batching,inplace_memory,memory_layout,transfers,\
caching_allocator,cpu_threads,precision,cpu_vs_gpu,graphed_training_step
RESULTS=$(mktemp -d /tmp/opsweep-lessons.XXXX)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$OUT/nvidia-smi.csv"
start=$(date +%s)
python3 -m runner -m "experiment=$LESSONS" "results_dir=$RESULTS" timer=quick ${OPSWEEP_ARGS:-} \
  > "$OUT/run.log" 2>&1
echo "lessons exit=$? wall=$(( $(date +%s) - start ))s" | tee -a "$OUT/run.log"
merged=$(ls "$RESULTS"/*/results.parquet 2>/dev/null | head -1)
if [ -z "$merged" ]; then
  echo "no merged results under $RESULTS: see the end of run.log"; tail -30 "$OUT/run.log"; exit 1
fi
packed="$OUT/h200-experiments-$DATE.parquet"
cp "$merged" "$packed"
# the closing note of docs/experiments.md: the verdicts that changed since the last published run
SINCE=${SINCE:-$(ls docs/data/h200-experiments-*.parquet 2>/dev/null | sort | tail -1)}
python3 -m runner.claims.report "$packed" --claims-from conf ${SINCE:+--since "$SINCE"} \
  --out "$OUT/experiments.md" >> "$OUT/run.log" 2>&1
echo "report exit=$? -> $OUT/experiments.md" | tee -a "$OUT/run.log"
python3 benchmarks/summarize.py "$packed" >> "$OUT/run.log" 2>&1
python3 -m runner.check "$packed" --claims-from conf 2>&1 | tee "$OUT/verdicts.txt"
