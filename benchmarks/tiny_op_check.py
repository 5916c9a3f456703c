"""Is a launch-bound op's device time the same in every process, and what does it cost? One
call on a CUDA machine:

    python benchmarks/tiny_op_check.py --out DIR --processes 2

Runs itself in ``--processes`` processes, one after another. Each measures the 1-element
in-place add (the floor of ``conf/experiment/sustained.yaml``):

* graph replays of K calls back to back (benchmarks/graph_size_check.py's loop), µs per call,
  for K from 64 to 8192, three rounds interleaved;
* ``triton.testing.do_bench_cudagraph`` (20 ms window);
* 20 trials through ``run_trial`` with the device time on: the device time, its K, and each
  device-time step's own cost (benchmarks/trial_steps.py);
* 5 more right after 3 s of bf16 8192³ matmuls;
* the same add with its element at 48 places in one buffer (``graph_replays.placement_us``).

Each process writes DIR/proc<i>.json; the table comes last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

KS = (64, 128, 256, 485, 512, 1024, 2048, 8192)
#: The device time's steps timed on their own (their time less the timed steps they call).
DEVICE_STEPS = (
    ("runner.timing.device_time", "measure_device_time"),
    ("runner.timing.device_time", "_capture"),
    ("runner.timing.device_time", "eager_per_call_s"),
    ("runner.timing.device_time", "replay_per_call_s"),
    ("runner.timing.device_time", "steady_samples"),
    ("runner.timing.back_to_back", "warm_up"),
    ("runner.timing.back_to_back", "sample"),
    ("runner.timing.cuda_device", "capture_graph"),
    ("runner.timing.cuda_device", "CudaDevice.enqueue"),
    ("runner.timing.cuda_device", "CudaDevice.wait"),
    ("runner.timing.cuda_device", "CudaDevice.clocks"),
    ("runner.timing.cuda_device", "CudaDevice.kernels_per_call"),
    ("runner.timing.cuda_device", "CudaDevice.spin_cycles"),
)


def one_process(out: Path) -> dict:
    import torch
    from graph_replays import per_call_us, placement_us
    from harness_cost import plan_trial
    from sustained_check import COMPUTE, FLOOR, workloads
    from trial_steps import timed_steps
    from triton.testing import do_bench_cudagraph

    import runner.execution.trial as trial

    ops = workloads()
    fn = ops[FLOOR]
    by_k: dict[int, list[float]] = {k: [] for k in KS}
    for _ in range(3):
        for k in KS:
            by_k[k].append(per_call_us(fn, k, seconds=0.2))
    ref = do_bench_cudagraph(fn, return_mode="median") * 1e3
    planned, cfg = plan_trial("cuda")
    rows, steps, walls = [], {}, []
    for index in range(22):
        timed = index >= 2
        with timed_steps(steps if timed else {}, extra=DEVICE_STEPS):
            start = time.perf_counter()
            row = trial.run_trial(planned.spec, planned.op, cfg.timer)
            if timed:
                walls.append(time.perf_counter() - start)
        if timed:
            rows.append(row)
    matmul = ops[COMPUTE[0]]
    after = []
    for _ in range(5):
        start = time.perf_counter()
        while time.perf_counter() - start < 3.0:
            for _ in range(20):
                matmul()
            torch.cuda.synchronize()
        after.append(trial.run_trial(planned.spec, planned.op, cfg.timer))
    return {
        "by_k": {k: statistics.median(v) for k, v in by_k.items()},
        "by_k_spread": {k: max(v) - min(v) for k, v in by_k.items()},
        "do_bench_cudagraph": ref,
        "gpu_time": [r["gpu_time_us"] for r in rows],
        "gpu_k": [r["gpu_time_calls_per_sample"] for r in rows],
        "gpu_time_after_load": [r["gpu_time_us"] for r in after],
        "gpu_k_after_load": [r["gpu_time_calls_per_sample"] for r in after],
        "trial_ms": statistics.median(walls) * 1e3,
        "placement": placement_us(),
        "steps_ms": {name: s / len(rows) * 1e3 for name, s in sorted(
            steps.items(), key=lambda item: -item[1]) if s / len(rows) > 2e-5},
    }


def main() -> None:
    from graph_replays import placement_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--child", type=int, default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child is not None:
        result = one_process(args.out)
        (args.out / f"proc{args.child}.json").write_text(json.dumps(result, indent=1))
        return
    results = []
    for index in range(args.processes):
        subprocess.run([sys.executable, __file__, "--out", str(args.out), "--child",
                        str(index)], check=True)
        results.append(json.loads((args.out / f"proc{index}.json").read_text()))
    print("\n| process | " + " | ".join(f"K={k}" for k in KS)
          + " | cudagraph | gpu_time median (min-max) | K | after load | trial ms |")
    print("| --- |" + " ---: |" * (len(KS) + 5))
    for index, r in enumerate(results):
        times, after = r["gpu_time"], r["gpu_time_after_load"]
        print(f"| {index} | " + " | ".join(f"{r['by_k'][str(k)]:.3f}" for k in KS)
              + f" | {r['do_bench_cudagraph']:.3f} | {statistics.median(times):.3f} "
              f"({min(times):.3f}-{max(times):.3f}) | {sorted(set(r['gpu_k']))} | "
              f"{statistics.median(after):.3f} | {r['trial_ms']:.1f} |")
    print("\n| process | element written moved: min / median / max µs (between rounds) "
          "| element read moved |")
    print("| --- | --- | --- |")
    for index, r in enumerate(results):
        print(f"| {index} | {placement_text(r['placement'], 'written')} | "
              f"{placement_text(r['placement'], 'read')} |")
    for index, r in enumerate(results):
        print(f"\nprocess {index}: device-time steps, ms per trial (own time)")
        for name, ms in r["steps_ms"].items():
            print(f"  {ms:8.3f}  {name}")


if __name__ == "__main__":
    main()
