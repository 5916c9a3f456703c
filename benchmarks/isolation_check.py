"""GPU check of crash isolation: one script, one device run.

    python benchmarks/isolation_check.py OUT_DIR [--device cuda] [--spin-s 60]

1. one job of [fine, device-side assert, fine]       → ok, crashed, ok
2. a two-job -m sweep, the assert in job 0            → job 1 ok
3. a 60 s GPU spin under trial_timeout_s=10, then fine → timeout, ok
4. an OOM, then fine                                  → oom, ok
5. matmul / copy / add, isolation=process vs none     → medians, ratio (the timer is the same
   code in the worker; only where it runs changes)

On a machine without CUDA (``--device cpu``, the dry run) the assert is an ordinary error and
the spin a host sleep; the script checks the plumbing, not the GPU. Prints a table last.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

FINE = "ops.examples:gelu_mul"
FINE2 = "torch:mul"


def run(out: Path, name: str, args: list[str], env: dict[str, str]) -> tuple[pd.DataFrame, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "runner", f"results_dir={out}/{name}", *args],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    files = sorted((out / name).glob("*/results.parquet"))
    if proc.returncode != 0 or not files:
        print(f"[{name}] exit {proc.returncode}\n{proc.stderr[-3000:]}", flush=True)
        return pd.DataFrame(), wall
    return pd.read_parquet(files[0]), wall


def statuses(df: pd.DataFrame) -> list[str]:
    if df.empty:
        return ["(no file)"]
    return list(df.sort_values(["job_num", "trial_index"])["status"].astype(str))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--spin-s", type=float, default=60.0)
    parser.add_argument("--timeout-s", type=float, default=10.0)
    parser.add_argument("--smoke-timing", action="store_true", help="dry run: tiny sizes")
    a = parser.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPSWEEP_FAULT_SPIN_S": str(a.spin_s), "PYTHONUNBUFFERED": "1"}
    common = [f"device={a.device}", "timer=smoke", "shape=[256,256]", "op=custom"]
    checks = []
    crash = "crashed" if a.device.startswith("cuda") else "error"  # CPU: an IndexError

    df, wall = run(a.out, "assert_in_job", common + [
        f"op.target=[{FINE},ops.faults:device_assert,{FINE2}]"], env)
    checks.append(("[fine, assert, fine] in one job", f"ok,{crash},ok", statuses(df), wall))
    df, wall = run(a.out, "assert_job0", common + [
        f"op.target=ops.faults:device_assert,{FINE}", "-m"], env)
    checks.append(("-m: assert in job 0, job 1 fine", f"{crash},ok", statuses(df), wall))
    df, wall = run(a.out, "timeout", common + [
        f"op.target=[ops.faults:gpu_spin,{FINE}]" if a.device.startswith("cuda")
        else f"op.target=[ops.faults:sleeps,{FINE}]", f"trial_timeout_s={a.timeout_s:g}"], env)
    checks.append((f"{a.spin_s:g} s spin, trial_timeout_s={a.timeout_s:g}", "timeout,ok",
                   statuses(df), wall))
    df, wall = run(a.out, "oom", common + [f"op.target=[ops.faults:oom,{FINE}]"], env)
    checks.append(("OOM then fine", "oom,ok" if a.device.startswith("cuda") else "error,ok",
                   statuses(df), wall))

    timing = [f"device={a.device}", "timer=default", "dtype=bf16",
              "cases=[{op:matmul,shape:[4096,4096,4096]},{op:copy},{op:add,shape:[8192,8192]}]"]
    if a.smoke_timing:
        timing.append("smoke=true")
    medians = {}
    driver_cuda = []
    for isolation in ("process", "none", "process", "none"):
        name = f"timing_{isolation}_{len(medians)}"
        df, wall = run(a.out, name, timing + [f"isolation={isolation}"], env)
        if not df.empty:
            medians[f"{isolation}#{len(medians)}"] = df.set_index("op")["time_median_us"]
            from runner.storage.files import read_metadata

            meta = read_metadata(next((a.out / name).glob("*/jobs/0/trials.parquet")))
            driver_cuda.append(f"{isolation}: {meta.get('driver_cuda_initialized')}")

    print("\n== crash isolation ==")
    failed = 0
    for what, expected, got, wall in checks:
        ok = ",".join(got) == expected
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {what:<38} expected {expected:<14} got "
              f"{','.join(got):<20} ({wall:.0f} s)")
    if medians:
        table = pd.DataFrame(medians)
        keys = list(medians)
        table["none/process"] = table[keys[1]] / table[keys[0]] if len(keys) > 1 else None
        if len(keys) > 3:
            table["none#3/process#2"] = table[keys[3]] / table[keys[2]]
            table["process#2/process#0"] = table[keys[2]] / table[keys[0]]
            table["none#3/none#1"] = table[keys[3]] / table[keys[1]]
        print("\n== timer medians (µs), isolation=process vs none, runs in this order ==")
        print(table.to_string(float_format=lambda v: f"{v:.3f}"))
        print("driver process created a CUDA context: " + "; ".join(driver_cuda))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
