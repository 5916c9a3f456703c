#!/usr/bin/env bash
# The timing gates of one GPU (docs/timing.md), in steps that fit calls of under ten minutes
# and share one long reference, kept in $CACHE while the machine stays up:
#   STEPS="heat plan" bash benchmarks/timing_gates.sh OUTDIR       # takes the reference first
#   STEPS="reverse burst tests" bash benchmarks/timing_gates.sh OUTDIR
# Steps: heat, plan, reverse (the 24-trial sweep in that trial order, two processes, against
# the 15 s reference: ~5 minutes of 14 capped cases on an H100, taken once, after the first
# step's sweeps); burst (the sweep with timer.burst=true: no row faster than its burst time
# unless flagged); tests (pytest -m gpu); regime (regime_check.py: opsweep's own sampling for
# 15 s against plain back-to-back work). Logs under OUTDIR; the gate tables last. PACK=FILE
# packs OUTDIR into one .tgz as well (a machine that returns few files returns that one).
# EXPECT=H200 stops at once, with status 3, on a GPU whose name does not contain H200 (a
# machine lent as "H100 or H200" then costs seconds, not a reference of minutes).
set -uo pipefail
out=${1:-${OUT:-/tmp/timing_gates}}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CACHE:-/tmp/opsweep-reference.json}
# the GPU this runs on: the first that CUDA_VISIBLE_DEVICES names (an index or a UUID)
visible=${CUDA_VISIBLE_DEVICES:-0}
gpu=$(nvidia-smi -i "${visible%%,*}" --query-gpu=name --format=csv,noheader | head -n 1)
if [ -n "${EXPECT:-}" ] && [[ "$gpu" != *"$EXPECT"* ]]; then
    echo "this GPU is $gpu, not the $EXPECT that EXPECT asks for: nothing run" >&2
    exit 3
fi
mkdir -p "$out" && out=$(cd "$out" && pwd)  # the steps run in other folders
nvidia-smi -i "${visible%%,*}" --query-gpu=name,uuid,power.limit,temperature.gpu --format=csv \
    > "$out/gpu.csv"
# One small command first, as host_check.sh does: on a fresh machine the first import of
# torch reads it from a cold disk (a first trial 4.9 s after the command on an H200, 2.2-2.8 s
# for every command after it), which is the machine's cost once, not opsweep's per command.
# Its start-up line is kept in prime.log.
(cd /tmp && PYTHONPATH="$here/..:${PYTHONPATH:-}" timeout 120 python3 -m runner op=matmul \
    'shape=[[256,256,256]]' timer=smoke device=cuda:0 results_dir="$out/prime_runs" \
    > "$out/prime.log" 2>&1)
for step in ${STEPS:-heat plan reverse burst tests}; do
    case $step in
        heat|plan|reverse) (cd "$here" && python3 time_to_result.py --out "$out/$step" \
                --orders "$step" --runs 2 --reference-s 15 --reference-passes 1 \
                --reference-cache "$cache" > "$out/$step.log" 2>&1) ;;
        burst) (cd "$here" && python3 time_to_result.py --out "$out/burst" --orders heat \
                --runs 1 --burst --reference-s 15 --reference-passes 1 \
                --reference-cache "$cache" > "$out/burst.log" 2>&1) ;;
        tests) (cd "$here/.." && python3 -m pytest -q -p no:cacheprovider -m gpu tests \
                > "$out/tests.log" 2>&1) ;;
        regime) (cd "$here" && python3 regime_check.py --out "$out/regime" \
                > "$out/regime.log" 2>&1) ;;
        *) echo "unknown step $step: expected heat, plan, reverse, burst, tests or regime" >&2
           exit 2 ;;
    esac
done
cp "$cache" "$out/" 2>/dev/null
if [ -n "${PACK:-}" ]; then tar -czf "$PACK" -C "$(dirname "$out")" "$(basename "$out")"; fi
cat "$out/gpu.csv"
for step in ${STEPS:-heat plan reverse burst tests}; do
    echo "=== $step"
    if [ "$step" = tests ]; then tail -n 8 "$out/tests.log"
    elif [ "$step" = regime ]; then tail -n 6 "$out/regime.log"
    else sed -n '/^## Misses/,$p' "$out/$step.log" | grep -v '^$'; fi
done
