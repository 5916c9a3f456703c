"""GPU check of in-job workers : one script, one device run.

    python benchmarks/workers_check.py OUT_DIR [--device cuda] [--timer quick] [--dry]

1. one mixed sweep (matmul and add, 4 dtypes, 7 sizes, 2 seeds: 56+ trials), workers=1 then
   workers=per_gpu → wall time of each run and of its trials (first trial start to the end),
   the speed-up, and which GPUs the per_gpu rows name (``worker``, ``gpu_index``, ``gpu_uuid``);
2. the same trial set in both runs (trial_id multiset);
3. the same op pinned to every GPU at once (device=[cuda:0,cuda:1,...] workers=per_gpu) → each
   GPU's median and SM clock, and that a row of ``cuda:N`` names visible GPU N.

``--dry`` (CPU dry run): device=cpu, workers=2, tiny sizes, smoke timer; checks the plumbing.
Prints a table last.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

SIZES = [256, 512, 1024, 2048, 3072, 4096, 6144]


def run(out: Path, name: str, args: list[str]) -> tuple[pd.DataFrame, float, float]:
    """(rows, wall s of the whole command, s from the first trial's start to the end)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "runner", f"results_dir={out}/{name}", *args],
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True,
                          text=True)
    wall, end = time.perf_counter() - start, datetime.now(timezone.utc)
    (out / f"{name}.log").write_text(" ".join(args) + "\n" + proc.stdout + proc.stderr)
    files = sorted((out / name).glob("*/results.parquet"))
    if proc.returncode != 0 or not files:
        print(f"[{name}] exit {proc.returncode}\n{proc.stderr[-3000:]}", flush=True)
        return pd.DataFrame(), wall, float("nan")
    df = pd.read_parquet(files[0])
    first = pd.to_datetime(df["timestamp"], utc=True).min()
    return df, wall, (pd.Timestamp(end) - first).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timer", default="quick")
    parser.add_argument("--dry", action="store_true", help="CPU dry run: tiny sizes, 2 workers")
    a = parser.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sizes, workers, device, timer = SIZES, "per_gpu", a.device, a.timer
    if a.dry:
        sizes, workers, device, timer = [8, 16, 32, 48, 64, 96, 128], "2", "cpu", "smoke"
    mm = ",".join(f"{{op: matmul, shape: [{s},{s},{s}]}}" for s in sizes)
    add = ",".join(f"{{op: add, shape: [{s * 16},{s * 16}]}}" for s in sizes)
    sweep = [f"device={device}", f"timer={timer}", "dtype=[bf16,fp16,fp32,tf32]",
             "seed=[0,1]", f"cases=[{mm},{add}]"]
    if device == "cpu":
        sweep[2] = "dtype=[fp32,fp64]"
    one, wall1, span1 = run(a.out, "one", sweep + ["workers=1"])
    many, wall_n, span_n = run(a.out, "many", sweep + [f"workers={workers}"])
    lines = [f"mixed sweep: {len(one)} trials (workers=1) / {len(many)} (workers={workers})"]
    if not one.empty and not many.empty:
        same = Counter(one["trial_id"]) == Counter(many["trial_id"])
        lines += [
            f"  same trial set: {same}; statuses: {dict(Counter(many['status']))}",
            f"  wall s: workers=1 {wall1:.1f}, workers={workers} {wall_n:.1f}, "
            f"speed-up {wall1 / wall_n:.2f}x",
            f"  trials s (first trial start to end): {span1:.1f} vs {span_n:.1f}, "
            f"speed-up {span1 / span_n:.2f}x",
            f"  rows per worker: {dict(Counter(many['worker']))}; gpu_index: "
            f"{dict(Counter(many['gpu_index'].astype(str)))}; gpu_uuid: "
            f"{sorted(set(many['gpu_uuid'].astype(str)))}",
        ]
    if device.startswith("cuda") and not a.dry:
        import torch

        n = torch.cuda.device_count()
        pinned = [f"device=[{','.join(f'cuda:{i}' for i in range(n))}]", "timer=default",
                  "op=matmul", "shape=[8192,8192,8192]", "dtype=bf16", "workers=per_gpu"]
        df, _, _ = run(a.out, "pinned", pinned)
        lines.append("same op pinned to each GPU (bf16 matmul 8192^3, timer=default):")
        for _, r in df.sort_values("device").iterrows():
            lines.append(
                f"  {r['device']}: worker {r['worker']} gpu_index {r['gpu_index']} "
                f"{r['gpu_uuid']} median {r['time_median_us']:.1f} us "
                f"(gpu {r.get('gpu_time_median_us', float('nan')):.1f}) "
                f"sm_clock_timed {r.get('sm_clock_mhz_timed')} MHz "
                f"throttle {r.get('throttle_reasons_timed')!r}")
        if len(df) >= 2:
            medians = df["time_median_us"]
            lines.append(f"  spread (max/min - 1): {medians.max() / medians.min() - 1:.2%}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
