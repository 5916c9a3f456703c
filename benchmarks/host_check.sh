#!/usr/bin/env bash
# Every GPU of a multi-GPU host in one call: the workers check (the 46-trial mix, and three
# times over for a sweep of minutes) on 2 GPUs and, where the host has them, 4, against one;
# then the every-GPU mode of the time-to-result benchmark (capped ops pinned to each GPU at
# once, each against its own 15 s reference). Logs under $1 (default $OUT); short tables
# last. The three-times-over sweep takes about 330 s on its own (one GPU alone is 2 minutes
# of it): with under ten minutes a call, run `STEPS=seeds3` and `STEPS="seeds1 every_gpu"`
# as two calls.
set -uo pipefail
out=${1:-${OUT:-/tmp/host_check}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
counts=$([ "$gpus" -ge 4 ] && echo "2 4" || echo "2")
steps=${STEPS:-seeds3 seeds1 every_gpu}
for step in $steps; do
    case $step in
        seeds3) timeout 330 python3 "$here/workers_check.py" --out "$out/w3" --gpus $counts \
                    --seeds 3 > "$out/workers_seeds3.log" 2>&1 ;;
        seeds1) timeout 150 python3 "$here/workers_check.py" --out "$out/w1" --gpus $counts \
                    --seeds 1 > "$out/workers_seeds1.log" 2>&1 ;;
        every_gpu) (cd "$here" && timeout 150 python3 time_to_result.py --out "$out/ttr" \
                    --gpus "$gpus" --reference-s 15 > "$out/every_gpu.log" 2>&1) ;;
        *) echo "unknown step $step: expected seeds3, seeds1 or every_gpu" >&2; exit 2 ;;
    esac
done
for step in $steps; do
    log=$([ "$step" = every_gpu ] && echo every_gpu || echo "workers_$step")
    echo "=== $log"; tail -n 40 "$out/$log.log"
done
