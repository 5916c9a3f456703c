#!/usr/bin/env bash
# Every GPU of a multi-GPU host in one call: the workers check (the 46-trial mix, and three
# times over for a sweep of minutes) on 2 GPUs and, where the host has them, 4, against one;
# then the every-GPU mode of the time-to-result benchmark (capped ops pinned to each GPU at
# once, each against its own 15 s reference). Logs under $1 (default $OUT); short tables
# last. The three-times-over sweep takes about 330 s on its own (one GPU alone is 2 minutes
# of it): with under ten minutes a call, run `STEPS=seeds3` and `STEPS="seeds1 every_gpu"`
# as two calls. Three more steps: imports (torch's import on this host, alone and once per GPU
# at once: the floor under any worker's first trial), regime (regime_check.py on every GPU at
# once, each against its own plain back-to-back reference) and startup (three commands of one
# quick trial per GPU with a worker per GPU, each followed by one trial on cuda:0 with one
# worker, each with the bytecode cache off and on: each command's start-up line, command to
# first trial in its parts). Every call starts with one small command on GPU 0, so no step
# pays the host's first import of torch (its disk cache) or fills opsweep's bytecode cache
# (runner/core/bytecode.py): its start-up line is in prime.log. One more step, gates: the
# timing gates of one GPU (timing_gates.sh: heat, plan and reverse, each twice, against a
# 15 s reference) on every GPU at once, each against its own reference (~8 minutes on four
# H200s; stopped at 9: run it alone in a call). And spread: one light trial small enough to
# live in L2 and one that is not, warm and with the L2 flushed, each in five fresh processes
# on GPU 0 (process_spread.py: do two identical runs agree?). PACK=FILE packs the logs and
# results into one .tgz as well (a machine that returns few files returns that one).
set -uo pipefail
out=${1:-${OUT:-/tmp/host_check}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)  # the steps run in other folders
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
counts=$([ "$gpus" -ge 4 ] && echo "2 4" || echo "2")
steps=${STEPS:-seeds3 seeds1 every_gpu}
(cd /tmp && PYTHONPATH="$here/..:${PYTHONPATH:-}" timeout 120 python3 -m runner op=matmul \
    'shape=[[256,256,256]]' timer=smoke device=cuda:0 results_dir="$out/prime_runs" \
    > "$out/prime.log" 2>&1)
for step in $steps; do
    case $step in
        seeds3) timeout 330 python3 "$here/workers_check.py" --out "$out/w3" --gpus $counts \
                    --seeds 3 > "$out/workers_seeds3.log" 2>&1 ;;
        seeds1) timeout 150 python3 "$here/workers_check.py" --out "$out/w1" --gpus $counts \
                    --seeds 1 > "$out/workers_seeds1.log" 2>&1 ;;
        every_gpu) (cd "$here" && timeout 150 python3 time_to_result.py --out "$out/ttr" \
                    --gpus "$gpus" --reference-s 15 > "$out/every_gpu.log" 2>&1) ;;
        imports) { for run in 1 2; do (TIMEFORMAT="alone: %R s"; time python3 -c "import torch")
                   done
                   for i in $(seq 0 $((gpus - 1))); do
                       (TIMEFORMAT="one of $gpus at once: %R s"; time python3 -c "import torch") &
                   done; wait; } > "$out/imports.log" 2>&1 ;;
        startup) devices=$(seq -s, -f 'cuda:%g' 0 $((gpus - 1)))
                 for run in 1 2 3; do
                     for workers in per_gpu 1; do
                         for cache in off on; do
                         device="device=[$devices]"; [ "$workers" = 1 ] && device="device=cuda:0"
                         setting=off; [ "$cache" = on ] && setting=""
                         line=$(cd /tmp && PYTHONPATH="$here/..:${PYTHONPATH:-}" \
                             OPSWEEP_BYTECODE_CACHE=$setting timeout 60 \
                             python3 -m runner op=matmul dtype=bf16 'shape=[[2048,2048,2048]]' \
                             timer=quick "$device" workers=$workers results_dir="$out/startup_runs" \
                             2>&1 | tr '\n' ' ' | grep -o 'start-up: .*ready at [0-9.]* s)')
                         echo "run $run, workers=$workers, bytecode cache $cache: $line"
                         done
                     done
                 done > "$out/startup.log" 2>&1 ;;
        regime) for i in $(seq 0 $((gpus - 1))); do
                    (cd "$here" && CUDA_VISIBLE_DEVICES=$i timeout 200 python3 regime_check.py \
                        --out "$out/regime$i" > "$out/regime$i.log" 2>&1) &
                done; wait ;;
        gates) for i in $(seq 0 $((gpus - 1))); do
                   (CUDA_VISIBLE_DEVICES=$i CACHE="$out/reference$i.json" \
                       STEPS="heat plan reverse" timeout 540 bash "$here/timing_gates.sh" \
                       "$out/gates$i" > "$out/gates$i.log" 2>&1) &
               done; wait ;;
        spread) light="op=layer_norm dtype=fp32 'shape=[[1024,4096],[16384,4096]]'"
                (cd "$here" && timeout 200 python3 process_spread.py --out "$out/spread" \
                    --runs 5 --case "$light device=cuda:0" \
                    --case "$light device=cuda:0 timer.flush_l2=true" \
                    > "$out/spread.log" 2>&1) ;;
        *) echo "unknown step $step: expected seeds3, seeds1, every_gpu, imports, startup," \
                "regime, gates or spread" >&2
           exit 2 ;;
    esac
done
if [ -n "${PACK:-}" ]; then tar -czf "$PACK" -C "$(dirname "$out")" "$(basename "$out")"; fi
echo "=== prime"; tr '\n' ' ' < "$out/prime.log" | grep -o 'start-up: .*ready at [0-9.]* s)'
for step in $steps; do
    case $step in
        every_gpu|imports|startup|spread) echo "=== $step"; tail -n 40 "$out/$step.log" ;;
        regime) for i in $(seq 0 $((gpus - 1))); do
                    echo "=== regime, GPU $i"; tail -n 4 "$out/regime$i.log"; done ;;
        gates) for i in $(seq 0 $((gpus - 1))); do
                   echo "=== gates, GPU $i"
                   grep -E '^\| (order [a-z]+:|two processes)' "$out/gates$i.log" | cut -c1-240; done ;;
        *) echo "=== workers_$step"; tail -n 40 "$out/workers_$step.log" ;;
    esac
done
