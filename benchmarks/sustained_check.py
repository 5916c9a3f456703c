"""Is opsweep's device time what the GPU sustains? One call on a CUDA machine:

    python benchmarks/sustained_check.py --out DIR

Runs ``python -m runner experiment=sustained`` in two processes (the second with
``energy=true``), and in this process the references for the same ops, each after a 2 s
back-to-back warm-up of that op: ``triton.testing.do_bench_cudagraph`` and 2000 calls back to
back between two events. Then the 1-element add with its element at 48 places
(benchmarks/graph_replays.py: its time depends on where the element lives, so the two-process
gate is over the other trials, the add shown apart), the order test (tf32 4096³ alone on a
rested GPU, and right after 10 s of bf16 8192³ load: ``gpu_warmup_s=10``), and the harness
cost: 200 tiny trials through ``run_trial`` interleaved, in this one process, with a bare loop
of the same timed calls, with the device time off and on. Prints the tables and a PASS/FAIL
table last; logs and results go to DIR.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from graph_replays import placement_text, placement_us
from harness_cost import harness_cost, per_trial_costs  # benchmarks/: this script's folder
from sustained_load import back_to_back_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

COMPUTE = ("matmul bf16 8192x8192x8192", "matmul tf32 4096x4096x4096",
           "bmm fp16 64x512x512x512", "linear bf16 4096x1024x4096")
MEMORY = ("add fp32 67108864", "copy fp32 67108864", "sum fp32 2048x2048")
FLOOR = "add fp32 1"


def key(row: pd.Series) -> str:
    return f"{row['op']} {row['dtype']} {row['shape_str']}"


def run_runner(out: Path, name: str, args: list[str]) -> tuple[pd.DataFrame, float]:
    results = out / name
    cmd = [sys.executable, "-m", "runner", f"results_dir={results}", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                 + (proc.stdout + proc.stderr)[-3000:])
    frame = pd.read_parquet(glob.glob(str(results / "**" / "results.parquet"),
                                      recursive=True)[0])
    frame.to_parquet(out / f"{name}.parquet")
    return frame, wall


def workloads() -> dict[str, Callable[[], Any]]:
    """The reference ops, built with torch directly (not with opsweep's ops)."""
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape: int, dtype: Any = torch.float32) -> Any:
        return torch.randn(*shape, device=dev, dtype=dtype, generator=g)

    a16, b16 = randn(8192, 8192, dtype=torch.bfloat16), randn(8192, 8192, dtype=torch.bfloat16)
    a32, b32 = randn(4096, 4096), randn(4096, 4096)
    ba, bb = randn(64, 512, 512, dtype=torch.half), randn(64, 512, 512, dtype=torch.half)
    x, w = randn(4096, 1024, dtype=torch.bfloat16), randn(4096, 1024, dtype=torch.bfloat16)
    p, q = randn(1 << 26), randn(1 << 26)
    src, dst = randn(1 << 26), randn(1 << 26)
    t = randn(2048, 2048)
    one, onev = randn(1), randn(1)

    def tf32() -> Any:
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return a32 @ b32
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    return {
        COMPUTE[0]: lambda: a16 @ b16, COMPUTE[1]: tf32, COMPUTE[2]: lambda: torch.bmm(ba, bb),
        COMPUTE[3]: lambda: F.linear(x, w), MEMORY[0]: lambda: torch.add(p, q),
        MEMORY[1]: lambda: dst.copy_(src), MEMORY[2]: lambda: torch.sum(t.T, dim=0),
        FLOOR: lambda: one.add_(onev),
    }


def reference(fn: Callable[[], Any], tf32: bool, rep_ms: int) -> dict[str, float]:
    """The references, after 2 s of the op back to back. ``rep_ms``: do_bench_cudagraph's
    window, which is also the size of its one graph: 500 ms for the power-capped ops (a long
    window at the sustained clock), triton's default 20 ms for the small ones, whose time per
    call grows in graphs past ~10k calls (benchmarks/graph_size_check.py: a transposed 2048²
    sum read 5.18 µs per call in graphs of 512-8192 calls, 5.35 at 32768); the 500 ms
    number is printed beside it."""
    import torch
    from triton.testing import do_bench_cudagraph

    torch.backends.cuda.matmul.allow_tf32 = tf32
    back_to_back_for(fn, 2.0, batch=50)  # ≥ 2 s back to back at the op's own load
    cudagraph_us = do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") * 1e3
    long_us = (cudagraph_us if rep_ms == 500 else
               do_bench_cudagraph(fn, rep=500, return_mode="median") * 1e3)
    b2b_us = back_to_back_us(fn, 2000)
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"cudagraph_us": cudagraph_us, "cudagraph_500ms_us": long_us, "b2b_us": b2b_us}


def back_to_back_us(fn: Callable[[], Any], launches: int, calls_per_launch: int = 1) -> float:
    """µs per call of ``launches`` calls of ``fn`` back to back between two CUDA events
    (``calls_per_launch``: calls one ``fn`` makes, e.g. a graph replay of K calls)."""
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(launches):
        fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) * 1e3 / (launches * calls_per_launch)


def pct(a: float, b: float) -> float:
    return (b / a - 1) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=200, help="harness-cost trials")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    checks: list[tuple[str, bool, str]] = []

    run1, wall1 = run_runner(out, "run1", ["experiment=sustained"])
    run2, wall2 = run_runner(out, "run2", ["experiment=sustained", "energy=true",
                                           "energy_window_s=2", "energy_idle_s=0.5"])
    refs = {}
    for name, fn in workloads().items():
        refs[name] = reference(fn, tf32=name == COMPUTE[1],
                               rep_ms=500 if name in COMPUTE else 20)
    r1 = {key(r): r for _, r in run1.iterrows()}
    r2 = {key(r): r for _, r in run2.iterrows()}

    print("\n## Steady-state device time against the references (µs per call)\n")
    print("| trial | gpu_time run 1 | run 2 | loop time | do_bench_cudagraph | rep=500 ms "
          "| 2000 b2b | Δ vs cudagraph | clock MHz | settle s | settled | bound |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for name, ref in refs.items():
        row = r1.get(name)
        if row is None:
            print(f"| {name} | missing | | | | | | | | | | |")
            continue
        gpu = row["gpu_time_us"]
        delta = pct(ref["cudagraph_us"], gpu)
        print(f"| {name} | {gpu:.2f} | {r2[name]['gpu_time_us']:.2f} | "
              f"{row['time_median_us']:.2f} | {ref['cudagraph_us']:.2f} | "
              f"{ref['cudagraph_500ms_us']:.2f} | {ref['b2b_us']:.2f} | "
              f"{delta:+.2f}% | {row['sm_clock_mhz_samples_median']:.0f} | "
              f"{row['gpu_time_settle_s']:.2f} | {row['gpu_time_settled']} | {row['bound']} |")
        print(f"  (capped {row['power_capped']}; loop warm-up {row['warmup_time_s']:.2f} s,"
              f" settled {row['warmup_settled']};"
              f" clock min {row['sm_clock_mhz_samples_min']}, note {row['clock_note']})")
        if name in COMPUTE:
            checks.append((f"{name} within 3% of do_bench_cudagraph", abs(delta) <= 3,
                           f"{delta:+.2f}% (2000 b2b: {pct(ref['b2b_us'], gpu):+.2f}%)"))
        elif name in MEMORY:
            checks.append((f"{name} within 2% of do_bench_cudagraph", abs(delta) <= 2,
                           f"{delta:+.2f}%"))
        else:
            ratio = gpu / ref["cudagraph_us"]
            checks.append(("1-element add ≤ 1.2× do_bench_cudagraph", ratio <= 1.2,
                           f"{gpu:.3f} / {ref['cudagraph_us']:.3f} µs = {ratio:.2f}×"))

    deltas = {k: abs(pct(r1[k]["gpu_time_us"], r2[k]["gpu_time_us"]))
              for k in r1 if k in r2 and pd.notna(r1[k]["gpu_time_us"])}
    print("\n## Two processes\n")
    for k in r1:
        if k in r2:
            print(f"- {k}: {r1[k]['gpu_time_us']:.2f} vs {r2[k]['gpu_time_us']:.2f}"
                  f" µs ({pct(r1[k]['gpu_time_us'], r2[k]['gpu_time_us']):+.2f}%),"
                  f" loop {r1[k]['time_median_us']:.2f} vs {r2[k]['time_median_us']:.2f}")
    # The 1-element add's time is set by where its element lives (placement_us below), which
    # no process chooses: the repeatability gate is over the other trials, the floor shown.
    rest = [d for k, d in deltas.items() if k != FLOOR]
    med, worst = statistics.median(rest), max(rest)
    checks.append((f"two processes, {len(rest)} trials besides the 1-element add: median |Δ| "
                   "≤ 1%, max ≤ 3%", med <= 1 and worst <= 3,
                   f"median {med:.2f}%, max {worst:.2f}%; the 1-element add "
                   f"{deltas.get(FLOOR, float('nan')):.2f}%"))
    place = placement_us()
    print("\n## The 1-element add with its element elsewhere (µs per call, K=512 replays)\n")
    for moved in ("written", "read"):
        print(f"- element {moved} at 48 places: min / median / max (median spread between "
              f"rounds) {placement_text(place, moved)}")
    bf16 = r1[COMPUTE[0]]
    checks.append(("eager bf16 8192³ matmul is bound=compute", bf16["bound"] == "compute",
                   f"bound={bf16['bound']}, host_overhead_ratio="
                   f"{bf16['host_overhead_ratio']:.3f}"))
    energy = run2[run2["avg_power_W"].notna()]
    flagged = energy[energy["consistency_flag"].notna()]
    print("\n## energy=true (run 2)\n")
    for _, row in energy.iterrows():
        print(f"- {key(row)}: {row['avg_power_W']:.0f} W (limit {row['power_limit_w']}), "
              f"window {row['energy_time_per_call_us']:.2f} µs vs gpu_time "
              f"{row['gpu_time_us']:.2f} µs, {row['energy_per_call_mJ']:.3f} mJ, busy "
              f"{row['energy_busy_fraction']:.3f}, instant {row['power_instant_median_W']} W; "
              f"flag: {row['consistency_flag']}")
    checks.append((f"energy=true rows pass the power and time checks ({len(energy)} rows)",
                   len(energy) > 0 and flagged.empty,
                   f"{len(flagged)} flagged: " + "; ".join(flagged["consistency_flag"])[:300]))

    # Order: tf32 4096³ on a rested GPU, then right after 10 s of bf16 8192³ load.
    time.sleep(15)
    tf32 = ["op=matmul", "dtype=tf32", "shape=[4096,4096,4096]"]
    rested, _ = run_runner(out, "order_rested", tf32)
    loaded, _ = run_runner(out, "order_loaded", [*tf32, "gpu_warmup_s=10"])
    a, b = rested["gpu_time_us"].iloc[0], loaded["gpu_time_us"].iloc[0]
    checks.append(("order: tf32 4096³ rested vs after 10 s bf16 load within 2%",
                   abs(pct(a, b)) <= 2, f"{a:.2f} vs {b:.2f} µs ({pct(a, b):+.2f}%)"))

    walls = harness_cost(out, args.trials)
    costs = per_trial_costs(out)
    print(f"\n## Harness cost ({args.trials} tiny trials, one process, interleaved)\n")
    print(f"- wall s: bare loop {walls['bare']:.2f}, run_trial device time off "
          f"{walls['off']:.2f}, on {walls['on']:.2f}")
    print("- per-trial costs: " + ", ".join(f"{k}={v:.4g}" for k, v in costs.items()))
    print("- run_trial steps, ms per trial: " + ", ".join(
        f"{k[5:]}={v / args.trials * 1e3:.3f}" for k, v in walls.items()
        if k.startswith("step_")))
    print(f"- sweeps: run 1 {wall1:.1f} s, run 2 (energy) {wall2:.1f} s")
    off, on = walls["off"] / walls["bare"], walls["on"] / walls["off"]
    checks.append(("in-job cost ≤ 1.05× the bare loop, device time off", off <= 1.05,
                   f"{off:.3f}×"))
    checks.append(("device time on ≤ 1.25× off", on <= 1.25, f"{on:.3f}×"))

    print("\n## PASS/FAIL\n")
    print("| check | result | measured |")
    print("| --- | --- | --- |")
    for name, ok, text in checks:
        print(f"| {name} | {'PASS' if ok else 'FAIL'} | {text} |")


if __name__ == "__main__":
    main()
