#!/usr/bin/env bash
# Every GPU of a multi-GPU host in one call: the workers check (the 46-trial mix, and three
# times over for a sweep of minutes) on 2 and 4 GPUs against one, then the every-GPU mode of
# the time-to-result benchmark (capped ops pinned to each GPU at once, each against its own
# 15 s reference). Logs under $1 (default $OUT); short tables last.
set -uo pipefail
out=${1:-${OUT:-/tmp/host_check}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
timeout 330 python3 "$here/workers_check.py" --out "$out/w3" --gpus 2 4 --seeds 3 \
    > "$out/workers_seeds3.log" 2>&1
timeout 150 python3 "$here/workers_check.py" --out "$out/w1" --gpus 2 4 --seeds 1 \
    > "$out/workers_seeds1.log" 2>&1
(cd "$here" && timeout 150 python3 time_to_result.py --out "$out/ttr" --gpus 4 \
    --reference-s 15 > "$out/every_gpu.log" 2>&1)
for log in workers_seeds3 workers_seeds1 every_gpu; do
    echo "=== $log"; tail -n 40 "$out/$log.log"
done
