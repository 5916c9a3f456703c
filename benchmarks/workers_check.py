"""Check of in-job workers on this machine's GPUs: one script, one device run.

    python benchmarks/workers_check.py OUT_DIR [--device cuda] [--timer quick] [--dry]

1. One mixed sweep (matmul and add, 4 dtypes, 7 sizes, 2 seeds: 112 trials, the largest `add`
   trials run out of memory on purpose) with ``workers=1``, ``workers=2`` (when there are two
   GPUs or more) and ``workers=per_gpu``. For each: wall time of the command, trial span (first
   trial start to last trial end, from the rows), speed-ups over ``workers=1``, every
   worker's busy % (``worker_trial_wall_s``), rows per GPU, the same trial set, the start-up
   ("command → first trial", measured here and in parts by the run itself: job 0's
   ``startup`` metadata) and the end (last trial end → command exit: job file, merge, exit).
2. The same op pinned to every GPU at once (``device=[cuda:0,...] workers=per_gpu``): each
   GPU's median loop and device time, with its SM clock and throttle reasons.
3. A PASS/FAIL table last, against the targets: with N >= 2 GPUs, trial-span speed-up
   >= 0.9·N and wall speed-up >= 0.85·N (1.8x and 1.7x on two GPUs); start-up <= 4 s
   (``gpu_warmup_s=0``, the default); every GPU named; per-GPU device times within 3%, or
   their clocks shown. A target that needs more GPUs than the machine has reads N/A.

``--dry`` (CPU dry run): device=cpu, workers=1 and 2, tiny sizes, smoke timer; checks the
plumbing, not the targets. Logs of every command are written under OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runner.execution import timeline  # noqa: E402  (the summary lines the runner prints)
from runner.storage.files import METADATA_KEY  # noqa: E402

SIZES = [256, 512, 1024, 2048, 3072, 4096, 6144]
STARTUP_TARGET_S = 4.0
SPREAD_TARGET = 0.03


def gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except Exception:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run(out: Path, name: str, args: list[str]) -> dict[str, Any]:
    """One command: its rows, wall time, trial span, start-up (outside and inside), end."""
    command_at = time.time()
    proc = subprocess.run([sys.executable, "-m", "runner", f"results_dir={out}/{name}", *args],
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True,
                          text=True)
    ended_at = time.time()
    (out / f"{name}.log").write_text(" ".join(args) + "\n" + proc.stdout + proc.stderr)
    files = sorted((out / name).glob("*/results.parquet"))
    result: dict[str, Any] = {"name": name, "args": args, "wall_s": ended_at - command_at,
                              "rows": pd.DataFrame(), "exit": proc.returncode}
    if proc.returncode != 0 or not files:
        print(f"[{name}] exit {proc.returncode}\n{proc.stderr[-3000:]}", flush=True)
        return result
    df = pd.read_parquet(files[0])
    starts = pd.to_datetime(df["timestamp"], utc=True).map(pd.Timestamp.timestamp)
    ends = starts + df["worker_trial_wall_s"].fillna(0)
    job0 = files[0].parent / "jobs" / "0" / "trials.parquet"
    meta = json.loads(pq.read_schema(job0).metadata[METADATA_KEY]) if job0.exists() else {}
    merged_at = files[0].stat().st_mtime  # the sweep's results.parquet is written
    result.update(rows=df, span_s=ends.max() - starts.min(),
                  first_trial_s=starts.min() - command_at, end_s=ended_at - ends.max(),
                  merge_s=merged_at - ends.max(), exit_s=ended_at - merged_at,
                  startup=meta.get("startup") or {},
                  busy=timeline.busy(df.to_dict("records")))
    return result


def describe(r: dict[str, Any], base: dict[str, Any] | None) -> list[str]:
    df = r["rows"]
    if df.empty:
        return [f"{r['name']}: FAILED (exit {r['exit']}), see {r['name']}.log"]
    lines = [f"{r['name']} ({' '.join(a for a in r['args'] if a.startswith('workers'))}): "
             f"{len(df)} trials {dict(Counter(df['status']))}",
             f"  wall {r['wall_s']:.1f} s = start-up {r['first_trial_s']:.2f} + trials "
             f"{r['span_s']:.1f} + end {r['end_s']:.2f} (job file and merge "
             f"{r['merge_s']:.2f}, summary and exit {r['exit_s']:.2f})",
             f"  {int(df['n_samples'].sum())} timed "
             "samples (an adaptive timer takes more on a noisy GPU: compare like with like)"]
    if base is not None and not base["rows"].empty:
        lines.append(f"  speed-up over workers=1: wall {base['wall_s'] / r['wall_s']:.2f}x, "
                     f"trial span {base['span_s'] / r['span_s']:.2f}x; same trial set: "
                     f"{Counter(df['trial_id']) == Counter(base['rows']['trial_id'])}")
    lines.append("  " + (timeline.busy_line(df.to_dict("records")) or "busy: n/a"))
    lines.append("  " + (timeline.startup_line(r["startup"]) or "start-up: n/a"))
    per_gpu = {f"{index} {uuid}": n for (index, uuid), n in
               Counter(zip(df["gpu_index"].astype(str), df["gpu_uuid"].astype(str))).items()}
    lines.append(f"  rows per worker {dict(Counter(df['worker']))}; per GPU {per_gpu}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timer", default="quick")
    parser.add_argument("--dry", action="store_true", help="CPU dry run: tiny sizes, 2 workers")
    a = parser.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sizes, device, timer = SIZES, a.device, a.timer
    n_gpus = 0 if a.dry or device == "cpu" else gpu_count()
    if a.dry:
        sizes, device, timer = [8, 16, 32, 48, 64, 96, 128], "cpu", "smoke"
    mm = ",".join(f"{{op: matmul, shape: [{s},{s},{s}]}}" for s in sizes)
    add = ",".join(f"{{op: add, shape: [{s * 16},{s * 16}]}}" for s in sizes)
    dtypes = "dtype=[fp32,fp64]" if device == "cpu" else "dtype=[bf16,fp16,fp32,tf32]"
    sweep = [f"device={device}", f"timer={timer}", dtypes, "seed=[0,1]", f"cases=[{mm},{add}]"]
    counts = ["1", "2"] if n_gpus == 0 else ["1"] + (["2"] if n_gpus > 2 else []) + ["per_gpu"]
    lines = [f"machine: {n_gpus} GPU(s); mixed sweep, timer={timer}, gpu_warmup_s=0"]
    spread, p = None, pd.DataFrame()
    if n_gpus:
        # first: it also brings every GPU out of idle, so the first mixed run is not the one
        # that meets cold GPUs (a one-H200 run took 2.6x the samples in its first sweep)
        pinned = [f"device=[{','.join(f'cuda:{i}' for i in range(n_gpus))}]", "timer=default",
                  "op=matmul", "shape=[8192,8192,8192]", "dtype=bf16", "workers=per_gpu",
                  "gpu_warmup_s=5"]
        p = run(a.out, "pinned", pinned)["rows"]
    runs = {w: run(a.out, f"workers_{w}", sweep + [f"workers={w}"]) for w in counts}
    base = runs["1"]
    for w, r in runs.items():
        lines += describe(r, None if w == "1" else base)
    if not p.empty:
        lines.append("same op pinned to each GPU at once (bf16 matmul 8192^3, timer=default):")
        for _, r in p.sort_values("device").iterrows():
            lines.append(
                f"  {r['device']}: worker {r['worker']} gpu_index {r['gpu_index']} "
                f"{r['gpu_uuid']} loop median {r['time_median_us']:.1f} us, device "
                f"{r.get('gpu_time_median_us', float('nan')):.1f} us, SM clock "
                f"{r.get('sm_clock_mhz_timed')} MHz, throttle {r.get('throttle_reasons_timed')!r}")
        column = "gpu_time_median_us" if "gpu_time_median_us" in p else "time_median_us"
        if len(p) >= 2 and p[column].notna().all():
            spread = p[column].max() / p[column].min() - 1
            lines.append(f"  spread of {column} (max/min - 1): {spread:.2%}")

    many = runs.get("per_gpu") if n_gpus else runs.get("2")
    n = n_gpus if n_gpus else 2
    checks: list[tuple[str, str, str]] = []

    def check(name: str, ok: bool | None, value: str) -> None:
        checks.append((name, "N/A" if ok is None else ("PASS" if ok else "FAIL"), value))

    for w, r in runs.items():
        df = r["rows"]
        check(f"workers={w}: ran, same trial set as workers=1", not df.empty and Counter(
            df["trial_id"]) == Counter(base["rows"]["trial_id"]), f"{len(df)} rows")
        check(f"workers={w}: every row has worker_trial_wall_s", not df.empty and bool(
            df["worker_trial_wall_s"].notna().all()), "")
        if not df.empty and not a.dry:
            value = r["startup"].get("first_trial_at_s", r["first_trial_s"])
            check(f"workers={w}: command -> first trial <= {STARTUP_TARGET_S:g} s",
                  value <= STARTUP_TARGET_S, f"{value:.2f} s (outside: {r['first_trial_s']:.2f})")
    if many is not None and not many["rows"].empty and not base["rows"].empty:
        enough = n >= 2 and not a.dry
        span_x, wall_x = base["span_s"] / many["span_s"], base["wall_s"] / many["wall_s"]
        check(f"trial-span speed-up >= {0.9 * n:.2f}x ({n} workers)",
              span_x >= 0.9 * n if enough else None, f"{span_x:.2f}x")
        check(f"wall speed-up >= {0.85 * n:.2f}x ({n} workers)",
              wall_x >= 0.85 * n if enough else None, f"{wall_x:.2f}x")
        named = many["rows"]["gpu_uuid"].dropna().nunique()
        check(f"every GPU named ({n_gpus} GPUs)", named == n_gpus if n_gpus else None,
              f"{named} distinct gpu_uuid")
        busy = ", ".join(f"{w}: {b['fraction']:.0%}" for w, b in sorted(many["busy"].items(),
                                                                          key=str))
        check("per-worker busy time reported", bool(many["busy"]), busy)
    check(f"same op on every GPU within {SPREAD_TARGET:.0%} (device time)",
          None if spread is None else spread <= SPREAD_TARGET,
          "n/a" if spread is None else f"{spread:.2%} (clocks above)")
    width = max(len(name) for name, _, _ in checks)
    lines += ["", f"{'check':<{width}}  result  value"]
    lines += [f"{name:<{width}}  {status:<6}  {value}" for name, status, value in checks]
    print("\n".join(lines))
    return 1 if any(status == "FAIL" for _, status, _ in checks) else 0


if __name__ == "__main__":
    raise SystemExit(main())
