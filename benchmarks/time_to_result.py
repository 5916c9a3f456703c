"""What a right number costs: a plain size sweep through opsweep against a settled reference,
in one call on a CUDA machine:

    python benchmarks/time_to_result.py --out DIR [--copies] [--runs 2]

1. The settled reference, in this process, through triton: per case, 2 s of the op back to
   back with the device never idle (``sustained_load``), so a power-capped op is at its
   sustained clock (1 s from a cool board left bf16 2048³ on an H200 ~4% fast, still
   sliding), then
   ``triton.testing.do_bench_cudagraph``; and, beside it, ``triton.testing.do_bench`` alone
   (the burst number a quick loop reports). It runs twice, before and after the opsweep
   processes: a capped op's sustained clock depends on the board's temperature
   (docs/timing.md#what-a-trial-costs), so the reference moves too, and each trial is judged
   against the mean of the two passes, with the passes' own gap printed beside it.
2. ``python -m runner op=matmul`` over 256³ … 8192³ × bf16/fp16/fp32/tf32 (24 trials, one job,
   the default timer), timed as a whole command: its wall, when its first trial started, and
   each trial's cost split (the ``cost_*_s`` columns).
3. ``--presets quick precise``: the same sweep once per timer preset, each row's agreement with
   the reference and the wall, for the cost per preset (docs/timing.md#what-a-trial-costs).
4. ``--orders heat,plan,reverse``: the sweep once per trial order (``trial_order=heat``,
   ``trial_order=plan``, and the plan reversed), ``--runs`` processes each: a number must not
   depend on what ran before it.
5. ``--reference-s S``: the reference of a power-capped case is S seconds back to back, the
   median of its last third (``long_reference.py``), not 2 s then do_bench_cudagraph: a 1 s
   reference still reads near burst on an H100.
6. ``--burst``: the sweep once more with ``timer.burst=true``: no row may read faster than
   its own burst time unless its ``sustained_flag`` says so.
7. ``--gpus N``: the capped ops pinned to every GPU at once, each against its own reference
   (``every_gpu.py``); the one-GPU sweep is skipped.
8. ``--copies``: large device-to-device copies (512 MiB, 1 GiB) through opsweep and as eager
   calls back to back between two events: a copy captured in a CUDA graph can run slower than
   the eager one the user's code runs, and the device time must measure the eager one.

Prints each trial's agreement with the reference, the walls and their ratio, every miss of
every process with what its row says of it (``order_gates.py``: a miss without a
``sustained_flag`` fails), and a PASS/FAIL table last. Logs and Parquet go to DIR;
``timing_gates.sh`` runs it in steps that share one reference.
"""

from __future__ import annotations

import argparse
import glob
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
from every_gpu import every_gpu  # benchmarks/: this script's folder
from long_reference import matmul_inputs as long_reference_inputs
from long_reference import reference as long_reference
from order_gates import DTYPES, order_args, order_checks, pct, print_misses
from sustained_load import back_to_back_for

ROOT = Path(__file__).resolve().parent.parent
SIZES = (256, 512, 1024, 2048, 4096, 8192)
COPY_NUMELS = (1 << 27, 1 << 28)  # fp32: 512 MiB and 1 GiB
COST_COLUMNS = ("cost_settle_s", "cost_loop_s", "cost_device_s", "cost_accuracy_s",
                "cost_other_s")


def run_opsweep(out: Path, name: str, args: list[str]) -> tuple[pd.DataFrame, float, float]:
    """Run ``python -m runner`` as a user would; returns its rows, its wall (s) and the
    seconds from the command to its first trial's start."""
    results = out / name
    # A results folder left by an earlier call (the same --out on a warm machine) would be
    # read as this run's: start from an empty one.
    shutil.rmtree(results, ignore_errors=True)
    cmd = [sys.executable, "-m", "runner", f"results_dir={results}", *args]
    started_at = time.time()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    (out / f"{name}.log").write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                 + (proc.stdout + proc.stderr)[-3000:])
    frame = pd.read_parquet(glob.glob(str(results / "**" / "results.parquet"),
                                      recursive=True)[0])
    frame.to_parquet(out / f"{name}.parquet")
    first = frame["timestamp"].min().timestamp() - started_at
    return frame, wall, first


def matmul_inputs(size: int, dtype: str) -> tuple[Any, Any, bool]:
    """The case's two inputs on cuda:0 (``long_reference.matmul_inputs``) and whether it is
    tf32."""
    return (*long_reference_inputs(size, dtype, "cuda"), dtype == "tf32")


def settled_reference(fn: Any, seconds: float = 2.0) -> dict[str, float]:
    """``fn`` back to back for ``seconds``, then do_bench_cudagraph (the settled number) and
    do_bench (triton's default loop, the burst number)."""
    from triton.testing import do_bench, do_bench_cudagraph

    back_to_back_for(fn, seconds)  # the device never idle: idle is clock to a capped GPU
    cudagraph_us = do_bench_cudagraph(fn, rep=100, return_mode="median") * 1e3
    return {"ref_us": cudagraph_us, "do_bench_us": do_bench(fn, return_mode="median") * 1e3}


def references(sizes: tuple[int, ...], dtypes: tuple[str, ...],
               long_s: float = 0.0) -> tuple[dict, float]:
    """One pass of the settled reference over every case: ``{(size, dtype): {ref_us,
    do_bench_us, temperature_c}}`` and the pass's wall (s). ``long_s`` > 0: ``ref_us`` is
    the long reference's (``long_reference.py``)."""
    import torch

    rows, start = {}, time.perf_counter()
    for size in sizes:
        for dtype in dtypes:
            if long_s > 0:
                ref = long_reference(size, dtype, "cuda:0", long_s)
            a, b, tf32 = matmul_inputs(size, dtype)
            torch.backends.cuda.matmul.allow_tf32 = tf32
            rows[(size, dtype)] = {**settled_reference(lambda a=a, b=b: a @ b, 0.2 if long_s
                                                       else 2.0),
                                   "temperature_c": temperature_c()}
            if long_s > 0:  # an op far from the cap keeps the settled cudagraph reference
                rows[(size, dtype)].update(capped=ref["capped"], long_ref_us=ref["ref_us"],
                                           temperature_c=ref["temperature_c"])
                if ref["capped"]:
                    rows[(size, dtype)]["ref_us"] = ref["ref_us"]
            torch.backends.cuda.matmul.allow_tf32 = False
            del a, b
    return rows, time.perf_counter() - start


class ReferenceCache:
    """The reference's passes by name (``before`` and ``after`` the opsweep processes), taken
    once and kept in ``path`` (None: not kept) so that one reference serves several calls: a
    long reference of every case takes minutes, and a call on the GPU machine has ten."""

    def __init__(self, path: Path | None, sizes: tuple[int, ...], long_s: float) -> None:
        self.path, self.sizes, self.long_s = path, sizes, long_s
        self.wall_s = 0.0  # seconds this process spent taking passes (nan: all from the cache)
        self.passes: dict[str, dict] = {}
        self.gpu = gpu_uuid()
        kept = json.loads(path.read_text()) if path is not None and path.exists() else {}
        if kept.get("gpu") == self.gpu:  # another GPU's reference is no reference here
            self.passes = {name: {tuple(json.loads(k)): v for k, v in rows.items()}
                           for name, rows in kept["passes"].items()}

    def pass_named(self, name: str) -> dict:
        """The pass ``name``: from the cache, else taken now (and kept)."""
        if name not in self.passes:
            rows, wall_s = references(self.sizes, DTYPES, self.long_s)
            self.passes[name], self.wall_s = rows, self.wall_s + wall_s
            if self.path is not None:
                self.path.write_text(json.dumps({"gpu": self.gpu, "passes": {
                    n: {json.dumps(list(k)): v for k, v in rows_n.items()}
                    for n, rows_n in self.passes.items()}}))
        return self.passes[name]


def gpu_uuid() -> str:
    import torch

    return str(torch.cuda.get_device_properties(0).uuid)


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def temperature_c() -> float | None:
    """The GPU's temperature now (°C; None where NVML cannot be read)."""
    import torch

    try:
        return float(torch.cuda.temperature())
    except Exception:  # no NVML binding: the column stays empty
        return None


def reference_over(passes: list[dict]) -> dict:
    """The reference per case over its passes: the mean of ``ref_us`` (the number each trial
    is judged against), every pass's value (``passes_us``) and their gap (``gap_pct``, the
    reference's own movement between passes)."""
    rows = {}
    for case in passes[0]:
        values = [p[case]["ref_us"] for p in passes]
        rows[case] = {**passes[0][case], "ref_us": statistics.fmean(values),
                      "passes_us": values, "gap_pct": pct(max(values), min(values)),
                      "temperatures_c": [p[case]["temperature_c"] for p in passes]}
    return rows


def eager_copy_us(numel: int, launches: int = 20) -> float:
    """µs per call of ``launches`` eager d2d copies back to back between two events."""
    import torch

    src = torch.randn(numel, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(5):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(launches):
            dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=1, help="opsweep processes (repeatability)")
    parser.add_argument("--copies", action="store_true", help="the large d2d copy check")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--extra", nargs="*", default=[], help="more runner overrides")
    parser.add_argument("--presets", nargs="*", default=[], help="other timer presets to run")
    parser.add_argument("--orders", default="heat", help="comma-separated: heat,plan,reverse")
    parser.add_argument("--reference-s", type=float, default=0.0,
                        help="seconds of a capped case's long reference (0: 2 s settled)")
    parser.add_argument("--reference-passes", type=int, default=2, choices=(1, 2),
                        help="2: before and after the sweeps; 1: after only")
    parser.add_argument("--burst", action="store_true", help="a timer.burst=true sweep too")
    parser.add_argument("--reference-cache", type=Path, default=None,
                        help="a JSON file of the reference's passes (before, after): a pass "
                             "found there is read, else taken and written there, so calls on "
                             "one machine share one reference")
    parser.add_argument("--gpus", type=int, default=0, help="every-GPU mode on N GPUs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.gpus:
        checks = every_gpu(run_opsweep, args.out, args.gpus, args.reference_s or 15.0, pct)
        print_checks(checks)
        return
    sizes = tuple(args.sizes)
    orders = args.orders.split(",")
    shapes = "[" + ",".join(f"[{s},{s},{s}]" for s in sizes) + "]"
    sweep = ["op=matmul", f"shape={shapes}", f"dtype=[{','.join(DTYPES)}]", *args.extra]

    cache = ReferenceCache(args.reference_cache, sizes, args.reference_s)
    passes = [cache.pass_named("before")] if args.reference_passes == 2 else []
    runs, by_order = [], {}
    for order in orders:
        by_order[order] = [run_opsweep(args.out, f"sweep_{order}{i}", order_args(sweep, order,
                                                                                 sizes))
                           for i in range(args.runs)]
        runs.extend(by_order[order])
    passes.append(cache.pass_named("after"))
    ref_wall = cache.wall_s
    before = passes[0]
    refs = reference_over(passes)
    ref_gaps = sorted(r["gap_pct"] for r in refs.values())
    print("\n## The reference's two passes (before and after the opsweep processes)\n")
    print("| case | before µs | after µs | gap | °C before, after |\n|---|---:|---:|---:|---|")
    for (size, dtype), ref in refs.items():
        print(f"| {dtype} {size}³ | {ref['passes_us'][0]:.2f} | {ref['passes_us'][-1]:.2f} | "
              f"{ref['gap_pct']:.2f}% | {ref['temperatures_c']} |")

    frame, wall, first = runs[0]
    print(f"\n## Trials ({len(frame)}), first opsweep process\n")
    print("| trial | gpu µs | ref µs | Δ | do_bench µs | °C | capped | settle s | loop s "
          "| device s | accuracy s | other s | wall s |" + (" run 2 Δ |" if len(runs) > 1 else ""))
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
          + ("---:|" if len(runs) > 1 else ""))
    deltas, uncapped_settle = [], []
    for _, row in frame.iterrows():
        size = int(row["shape_str"].split("x")[0])
        ref = refs[(size, row["dtype"])]
        gpu = row["gpu_time_us"]
        delta = pct(gpu, ref["ref_us"])
        deltas.append(delta)
        settle = row.get("cost_settle_s")
        if row.get("power_capped") is False and settle is not None:
            uncapped_settle.append(settle)
        costs = " | ".join("—" if row.get(c) is None else f"{row.get(c):.2f}"
                           for c in COST_COLUMNS)
        line = (f"| {row['dtype']} {row['shape_str']} | {gpu:.2f} | {ref['ref_us']:.2f} | "
                f"{delta:+.2f}% | {ref['do_bench_us']:.2f} | {row.get('temperature_c_timed')} | "
                f"{row.get('power_capped')} | "
                f"{costs} | {row.get('worker_trial_wall_s', float('nan')):.2f} |")
        if len(runs) > 1:
            other = runs[1][0].set_index("trial_id").loc[row["trial_id"]]
            line += f" {pct(other['gpu_time_us'], gpu):+.2f}% |"
        print(line + (f" {row.get('sustained_flag')}" if row.get("sustained_flag") else ""))

    for other_frame, _, _ in runs[1:]:  # the gates judge every process, not just the first
        for _, row in other_frame.iterrows():
            ref = refs[(int(row["shape_str"].split("x")[0]), row["dtype"])]
            deltas.append(pct(row["gpu_time_us"], ref["ref_us"]))
            if row.get("power_capped") is False and row.get("cost_settle_s") is not None:
                uncapped_settle.append(row["cost_settle_s"])
    walls = [w for _, w, _ in runs]
    print(f"\nopsweep wall {', '.join(f'{w:.1f}' for w in walls)} s, first trial at "
          f"{', '.join(f'{f:.2f}' for _, _, f in runs)} s; settled reference {ref_wall:.1f} s "
          f"(ratio {walls[0] / ref_wall if ref_wall else float('nan'):.2f}×; 0: from the cache)")

    firsts = [pct(row["gpu_time_us"],
                  before[(int(row["shape_str"].split("x")[0]), row["dtype"])]["ref_us"])
              for frame_i, _, _ in runs for _, row in frame_i.iterrows()]
    wall_limit_s = 40.0 if "H100" in device_name() else 35.0
    n_trials = len(runs[0][0])  # the wall gate is set for the 24-trial sweep (all sizes)
    checks = [(f"24-trial sweep ≤ {wall_limit_s:g} s wall (H200 35 s, H100 40 s)"
               if n_trials == 24 else f"{n_trials}-trial sweep (the wall gate is for 24 trials)",
               n_trials != 24 or max(walls) <= wall_limit_s,
               ", ".join(f"{w:.1f} s" for w in walls)),
              ("every device time within 3% of the reference",
               max(abs(d) for d in deltas) <= 3.0,
               f"max |Δ| {max(abs(d) for d in deltas):.2f}%, median "
               f"{statistics.median(deltas):+.2f}%, {sum(abs(d) <= 3 for d in deltas)} of "
               f"{len(deltas)} within 3% over {len(runs)} process(es); against the first "
               f"pass alone {sum(abs(d) <= 3 for d in firsts)} of {len(firsts)}"),
              ("(the reference itself: gap between its passes)", True,
               f"median {statistics.median(ref_gaps):.2f}%, max {ref_gaps[-1]:.2f}%"),
              ("no uncapped trial settles > 0.1 s",
               not uncapped_settle or max(uncapped_settle) <= 0.1,
               f"max {max(uncapped_settle, default=float('nan')):.3f} s over "
               f"{len(uncapped_settle)} uncapped trials"),
              ("first trial ≤ 4.5 s after the command", max(f for _, _, f in runs) <= 4.5,
               ", ".join(f"{f:.2f} s" for _, _, f in runs))]
    if len(runs) > 1:
        joined = runs[0][0].set_index("trial_id")["gpu_time_us"]
        other = runs[1][0].set_index("trial_id")["gpu_time_us"]
        moves = sorted(abs(pct(other[t], joined[t])) for t in joined.index)
        checks.append(("two processes: median ≤ 1%, max ≤ 3%",
                       statistics.median(moves) <= 1 and moves[-1] <= 3,
                       f"median {statistics.median(moves):.2f}%, max {moves[-1]:.2f}%"))
    checks.extend(order_checks(by_order, refs))
    checks.append(print_misses(by_order, refs))
    if args.burst:
        burst, _, _ = run_opsweep(args.out, "burst", [*sweep, "timer.burst=true"])
        faster = [f"{row['dtype']} {row['shape_str']}" for _, row in burst.iterrows()
                  if row["gpu_time_us"] < row["gpu_burst_time_ci_low_us"]
                  and not row.get("sustained_flag")]
        checks.append(("no row faster than its own burst time unless flagged", not faster,
                       f"{len(faster)} of {len(burst)}: {', '.join(faster) or 'none'}"))
    for preset in args.presets:
        rows, preset_wall, _ = run_opsweep(args.out, f"preset_{preset}",
                                           [*sweep, f"timer={preset}"])
        gaps = sorted(abs(pct(row["gpu_time_us"],
                              refs[(int(row["shape_str"].split("x")[0]), row["dtype"])]["ref_us"]))
                      for _, row in rows.iterrows())
        print(f"timer={preset}: wall {preset_wall:.1f} s, {preset_wall / len(rows):.2f} s a trial, "
              f"|Δ| median {statistics.median(gaps):.2f}%, max {gaps[-1]:.2f}%")
    if args.copies:
        shapes = "[" + ",".join(f"[{n}]" for n in COPY_NUMELS) + "]"
        copies, _, _ = run_opsweep(args.out, "copies",
                                   ["op=copy", "op.direction=d2d", f"shape={shapes}"])
        print("\n## Large device copies\n\n| copy | gpu µs | method | eager b2b µs | Δ |\n"
              "|---|---:|---|---:|---:|")
        worst = 0.0
        for _, row in copies.iterrows():
            eager = eager_copy_us(int(row["shape_str"]))
            delta = pct(row["gpu_time_us"], eager)
            worst = max(worst, abs(delta))
            print(f"| {int(row['shape_str']) * 4 >> 20} MiB | {row['gpu_time_us']:.1f} | "
                  f"{row['gpu_time_method']} | {eager:.1f} | {delta:+.2f}% |")
            print(f"  reason: {row['gpu_time_reason']}")
        checks.append(("d2d copies within 3% of eager back to back", worst <= 3.0,
                       f"max |Δ| {worst:.2f}%"))

    print_checks(checks)


def print_checks(checks: list[tuple[str, bool, str]]) -> None:
    print("\n| check | result | measured |\n|---|---|---|")
    for name, ok, text in checks:
        print(f"| {name} | {'PASS' if ok else 'FAIL'} | {text} |")


if __name__ == "__main__":
    main()
