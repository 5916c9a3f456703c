"""The device time's acceptance checks, in one call on a GPU machine: do two processes agree on
gpu_time?

    python benchmarks/device_time_check.py --out DIR            # on a CUDA machine
    python benchmarks/device_time_check.py --out DIR --smoke    # CPU dry run (smoke sizes)

Runs ``python -m runner experiment=device_time`` three times, each in its own process: run 1,
then the same sweep with ``timer.device_time=false`` (loop time only: the path before device
time existed, for the cost), then run 2. Then, in this process: the launch-queue depth
(``runner.timing.device_time.LAUNCH_QUEUE_BUDGET``), ``triton.testing.do_bench_cudagraph`` on
the one-element add, and the cold-offset table of ``benchmarks/timer_crosscheck.py --cold``.
Prints one row per trial (loop and gpu medians of both runs, their |Δ|, method,
host_overhead_ratio, bound) and a PASS/FAIL line per criterion. Results and logs go to DIR.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def run_sweep(out: Path, name: str, extra: list[str]) -> tuple[pd.DataFrame, float]:
    """One ``python -m runner`` process; returns its rows and its wall time."""
    results = out / name
    cmd = [sys.executable, "-m", "runner", "experiment=device_time", f"results_dir={results}",
           *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    wall = time.perf_counter() - start
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}); see {out / name}.log:\n"
                 + (proc.stdout + proc.stderr)[-3000:])
    files = glob.glob(str(results / "*" / "results.parquet"))
    return pd.read_parquet(files[0]), wall


def label(row: pd.Series) -> str:
    params = {k[6:]: _plain(row[k]) for k in row.index
              if k.startswith("param_") and pd.notna(row[k])}
    mode = [f"streams={row['streams']}"] if row["streams"] != 1 else []
    mode += [row["graph"]] if row["graph"] != "none" else []
    mode += [f"compile={row['compile']}"] if row["compile"] != "none" else []
    text = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{row['op']} {row['dtype']} {row['shape_str']} {text} {' '.join(mode)}".strip()


def _plain(value: object) -> object:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def pct(a: float, b: float) -> float:
    return abs(b / a - 1) * 100 if a and b and a == a and b == b else float("nan")


def launch_queue_depth(limit: int = 4096) -> tuple[int | None, float]:
    """Launches the host can queue behind a long spin before a launch blocks (> 200 µs),
    and the median host µs per launch before that."""
    import torch

    from runner.timing.cuda_device import CudaDevice

    x = torch.zeros(1, device="cuda")
    for _ in range(10):
        x.add_(1)
    spin = CudaDevice(torch.device("cuda")).spin_cycles(1.0)  # calibrates, then 1 s of spin
    torch.cuda.synchronize()
    torch.cuda._sleep(spin)
    times = []
    for _ in range(limit):
        t0 = time.perf_counter()
        x.add_(1)
        times.append(time.perf_counter() - t0)
        if times[-1] > 200e-6:
            break
    torch.cuda.synchronize()
    depth = len(times) - 1 if times[-1] > 200e-6 else None
    return depth, statistics.median(times[:-1]) * 1e6


def copy_probe(sizes_mib=(256, 512, 1024), n: int = 20) -> list[str]:
    """A d2d copy launched on a stream vs the same copy captured in a graph (a memcpy node),
    one call per sample, each held by a spin: µs per call and GB/s (read + write)."""
    import torch

    from runner.timing.cuda_device import CudaDevice

    device = torch.device("cuda:0")
    spin = CudaDevice(device)

    def median_us(work) -> float:
        for _ in range(3):
            spin.timed(work, 100e-6, None)
        return statistics.median(spin.timed(work, 100e-6, None).work_s for _ in range(n)) * 1e6

    out = []
    for mib in sizes_mib:
        stream_us, graph_us = _copy_times(mib << 20, device, median_us)
        moved = 2 * (mib << 20)
        out.append(f"copy d2d {mib} MiB: stream {stream_us:.1f} µs "
                   f"({moved / stream_us / 1e3:.0f} GB/s), graph {graph_us:.1f} µs "
                   f"({moved / graph_us / 1e3:.0f} GB/s)")
        torch.cuda.empty_cache()
    return out


def _copy_times(nbytes: int, device, median_us) -> tuple[float, float]:
    import torch

    from runner.timing.cuda_device import capture_graph

    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    replay, _, _ = capture_graph(lambda: dst.copy_(src), device)
    return median_us(lambda: dst.copy_(src)), median_us(replay)


def graph_floor() -> float:
    """do_bench_cudagraph's median µs for the one-element in-place add."""
    import torch
    from triton.testing import do_bench_cudagraph

    from ops.base import OpContext
    from ops.elementwise import build_add

    device = torch.device("cuda:0")
    ctx = OpContext(shape=(1,), dtype=torch.float32, device=device,
                    generator=torch.Generator(device=device).manual_seed(0))
    fn = build_add(ctx, inplace=True).fn
    return do_bench_cudagraph(fn, rep=200, return_mode="median") * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/dtc")))
    parser.add_argument("--smoke", action="store_true", help="CPU dry run at smoke size")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = ["smoke=true", "device=cpu"] if args.smoke else []

    first, wall_1 = run_sweep(args.out, "run1", extra)
    old, wall_old = run_sweep(args.out, "loop_only", [*extra, "timer.device_time=false"])
    second, wall_2 = run_sweep(args.out, "run2", extra)

    extras: list[str] = []
    floor_us = None
    if not args.smoke:
        depth, per_launch = launch_queue_depth()
        extras.append(f"launch queue: {depth} launches queue behind a spin before the host "
                      f"blocks ({per_launch:.2f} µs per launch before)")
        floor_us = graph_floor()
        extras.append(f"do_bench_cudagraph, 1-element add: {floor_us:.3f} µs (median)")
        extras += copy_probe()
        import timer_crosscheck

        timer_crosscheck.print_cold_offset(timer_crosscheck.cold_offset())

    ok = lambda df: df[df["status"] == "ok"].set_index("trial_id")  # noqa: E731
    a, b = ok(first), ok(second)
    rows = []
    for trial_id in a.index.intersection(b.index):
        r1, r2 = a.loc[trial_id], b.loc[trial_id]
        rows.append({
            "trial": label(r1), "loop1": r1["time_per_op_us"], "loop2": r2["time_per_op_us"],
            "dloop": pct(r1["time_per_op_us"], r2["time_per_op_us"]),
            "gpu1": r1["gpu_time_per_op_us"], "gpu2": r2["gpu_time_per_op_us"],
            "dgpu": pct(r1["gpu_time_per_op_us"], r2["gpu_time_per_op_us"]),
            "method": r1["gpu_time_method"] if r1["gpu_time_method"] == r2["gpu_time_method"]
            else f"{r1['gpu_time_method']}/{r2['gpu_time_method']}",
            "ratio": r1["host_overhead_ratio"],
            "bound": r1["bound"],
            "op": r1["op"], "shape": r1["shape_str"], "graph": r1["graph"],
            "dtype": r1["dtype"],
        })
    table = pd.DataFrame(rows)
    for df in (first, second):
        bad = df[df["status"] != "ok"]
        for _, row in bad.iterrows():
            extras.append(f"not ok: {label(row)}: {row['status']} {row['reason']}")
    for name, df in (("run1", first), ("run2", second)):
        for _, row in df[df["gpu_time_reason"].notna() & (df["status"] == "ok")].iterrows():
            extras.append(f"gpu_time_reason ({name}), {label(row)}: {row['gpu_time_reason']}")

    checks = criteria(table, floor_us, span(first), span(second), span(old)) \
        if len(table) else []
    print()
    for line in extras:
        print(line)
    print(f"wall: run1 {wall_1:.1f} s, run2 {wall_2:.1f} s, loop time only "
          f"(timer.device_time=false) {wall_old:.1f} s; trials only (first to last trial "
          f"start): {span(first):.1f} s, {span(second):.1f} s vs {span(old):.1f} s")
    for name, passed, detail in checks:
        print(f"{'PASS' if passed else 'FAIL'} {name}: {detail}")
    print()
    header = (f"{'trial':58} {'loop1 µs':>10} {'loop2 µs':>10} {'|Δ|%':>6} {'gpu1 µs':>10} "
              f"{'gpu2 µs':>10} {'|Δ|%':>6} {'method':>11} {'loop/gpu':>8} {'bound':>8}")
    print(header)
    print("-" * len(header))
    for _, r in table.iterrows():
        print(f"{r['trial'][:58]:58} {r['loop1']:10.2f} {r['loop2']:10.2f} {r['dloop']:6.1f} "
              f"{_f(r['gpu1'])} {_f(r['gpu2'])} {r['dgpu']:6.2f} {r['method']:>11} "
              f"{r['ratio']:8.2f} {str(r['bound']):>8}")
    table.to_csv(args.out / "table.csv", index=False)
    return 0


def span(df: pd.DataFrame) -> float:
    """Seconds from the first trial's start to the last one's: the sweep without process
    start-up and gpu_warmup_s (the last trial's own time left out)."""
    stamps = pd.to_datetime(df["timestamp"])
    return (stamps.max() - stamps.min()).total_seconds()


def _f(value: float) -> str:
    return f"{value:10.2f}" if value == value and value is not None else f"{'-':>10}"


def criteria(t: pd.DataFrame, floor_us: float | None, wall_1: float, wall_2: float,
             wall_old: float) -> list[tuple[str, bool, str]]:
    """The acceptance checks, each as (name, passed, numbers)."""
    out = []
    has = t[t["dgpu"].notna()]
    med = has["dgpu"].median()
    out.append(("two processes agree (median |Δ| gpu_time <= 1%)", bool(med <= 1.0),
                f"median {med:.2f}% over {len(has)} trials (loop time: median "
                f"{t['dloop'].median():.2f}%, max {t['dloop'].max():.1f}%)"))
    big = has[has["gpu1"] >= 5.0]
    worst = big["dgpu"].max() if len(big) else float("nan")
    out.append(("every trial with gpu_time >= 5 µs within 3%", bool(worst <= 3.0),
                f"worst {worst:.2f}% over {len(big)} trials"))
    add_graph = t[(t["op"] == "add") & (t["shape"] == "1") & (t["graph"] == "cuda_graph")]
    if floor_us and len(add_graph):
        gpu = add_graph["gpu1"].iloc[0]
        out.append(("graph floor within 20% of do_bench_cudagraph",
                    bool(abs(gpu / floor_us - 1) <= 0.2),
                    f"gpu_time {gpu:.3f} µs vs {floor_us:.3f} µs "
                    f"(loop time, one replay of a 1-call graph: "
                    f"{add_graph['loop1'].iloc[0]:.3f} µs)"))
    long = t[((t["op"] == "matmul") & (t["shape"] == "8192x8192x8192"))
             | ((t["op"] == "copy") & (t["shape"] == "268435456"))]
    for _, r in long.iterrows():
        diff = pct(r["gpu1"], r["loop1"])
        out.append((f"long trial loop ≈ gpu within 2%: {r['trial']}", bool(diff <= 2.0),
                    f"{r['loop1']:.1f} vs {r['gpu1']:.1f} µs ({diff:.2f}%)"))
    for name, sel, want in (
            ("add", (t["op"] == "add") & (t["shape"] == "1"), True),
            ("chain", (t["op"] == "pointwise_chain") & (t["graph"] == "none")
             & (t["shape"] == "1000000"), True),
            ("8192³ matmul", (t["op"] == "matmul") & (t["shape"] == "8192x8192x8192"), False)):
        rows = t[sel]
        got = [str(b) for b in rows["bound"]]
        passed = bool(len(rows)) and all((b == "overhead") == want for b in got)
        out.append((f"bound: {name} {'is' if want else 'is not'} overhead", passed,
                    ", ".join(got)))
    ratio = (wall_1 + wall_2) / 2 / wall_old
    out.append(("cost: wall time grows <= 30%", bool(ratio <= 1.3),
                f"{(wall_1 + wall_2) / 2:.1f} s (mean of run 1, 2) vs {wall_old:.1f} s "
                f"loop time only: {ratio:.2f}x (first to last trial start)"))
    return out


if __name__ == "__main__":
    sys.exit(main())
