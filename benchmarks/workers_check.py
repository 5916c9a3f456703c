"""Check of in-job workers on this machine's GPUs: the same sweep on 1 GPU and on N.

    python benchmarks/workers_check.py --out OUT_DIR [--gpus 2 4 8] [--seeds 1]
                                       [--timer default] [--pinned] [--dry]

Runs from a checkout (``python benchmarks/workers_check.py``) or with the packages on
``PYTHONPATH``; every command's log is written under ``--out``.

1. The mixed sweep of 46 trials (24 matmuls 256³-8192³ × bf16/fp16/fp32/tf32, plus sdpa,
   layer_norm, softmax and linear; ``--seeds K`` runs it K times over, for a sweep of minutes)
   with ``workers=1``, then ``workers=N`` for each ``--gpus N`` (default: 2, 4 and 8, those
   the machine has, and all of its GPUs).
2. For each N: wall time of the command, trial span (first trial start to last trial end),
   speed-ups over ``workers=1``, each GPU's rows, busy % and first trial (seconds after the
   command), its sustained capped clock and temperature (the run's own summary lines,
   ``runner.execution.gpu_compare``), the start-up in parts (job 0's ``startup``
   metadata), and each trial's device time against the one-GPU run: the ratio, and every
   trial beyond 3% with its GPU's clock and temperature.
3. ``--pinned``: first, the same bf16 8192³ matmul pinned to every GPU at once
   (``device=[cuda:0,...]``, 20 s of heat): each GPU's device time, clock and temperature.
4. A short table last: each target, PASS/FAIL/N/A and the value. Targets: trial-span
   speed-up >= 0.9·N and wall speed-up >= 0.85·N, every worker busy >= 90%, first trial
   <= 4.5 s after the command, each trial's device time within 3% of the one-GPU run. The
   46-trial mix alone (``--seeds 1``) wants a wall speed-up of 1.8× on 2 GPUs and 3.0× on 4.

``--dry`` (CPU dry run): device=cpu, workers=1 and 2, tiny sizes, smoke timer; checks the
plumbing, not the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from runner.execution import gpu_compare, timeline  # noqa: E402  (the runner's own lines)
from runner.storage.columns import REPEAT_FLAGS  # noqa: E402
from runner.storage.files import METADATA_KEY  # noqa: E402

STARTUP_TARGET_S = 4.5
#: Wall speed-up wanted of the 46-trial mix on N GPUs (``--seeds 1``): its start-up and end
#: are a larger share of its wall than of a sweep of minutes, whose target is 0.85·N.
MIX_WALL_TARGETS = {2: 1.8, 4: 3.0}
SPREAD_TARGET = 0.03
BUSY_TARGET = 0.9
SHOWN = 15


def gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except Exception:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0


def mixed_cases(dry: bool) -> tuple[str, str]:
    """The mixed sweep's ``cases`` and ``dtype`` overrides (tiny sizes for ``--dry``)."""
    if dry:
        mm = [f"{{op: matmul, shape: [{s},{s},{s}]}}" for s in (8, 16, 32, 48, 64, 96)]
        rest = [f"{{op: softmax, shape: [{r},64]}}" for r in (8, 64, 256)]
        return f"cases=[{','.join(mm + rest)}]", "dtype=[fp32,fp64]"
    mm = [f"{{op: matmul, shape: [{s},{s},{s}]}}" for s in (256, 512, 1024, 2048, 4096, 8192)]
    rest = [f"{{op: sdpa, dtype: [bf16,fp16], shape: [8,16,{s},64]}}" for s in (1024, 2048, 4096)]
    rest += [f"{{op: {op}, dtype: [bf16,fp32], shape: [{r},4096]}}"
             for op in ("layer_norm", "softmax") for r in (1024, 4096, 16384)]
    rest += [f"{{op: linear, dtype: [bf16,fp32], shape: [{n},4096,4096]}}" for n in (8192, 32768)]
    return f"cases=[{','.join(mm + rest)}]", "dtype=[bf16,fp16,fp32,tf32]"


def run(out: Path, name: str, args: list[str]) -> dict[str, Any]:
    """One command: its rows, wall time, trial span, start-up (outside and inside)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    # A results folder left by an earlier call (the same --out on a warm machine) would be
    # read as this run's: start from an empty one.
    shutil.rmtree(out / name, ignore_errors=True)
    command_at = time.time()
    proc = subprocess.run([sys.executable, "-m", "runner", f"results_dir={out}/{name}", *args],
                          env=env, capture_output=True, text=True)
    ended_at = time.time()
    (out / f"{name}.log").write_text(" ".join(args) + "\n" + proc.stdout + proc.stderr)
    files = sorted((out / name).glob("*/results.parquet"))
    result: dict[str, Any] = {"name": name, "args": args, "wall_s": ended_at - command_at,
                              "rows": pd.DataFrame(), "exit": proc.returncode,
                              "summary": [line for line in proc.stderr.splitlines()
                                          if line.startswith(("busy:", "per GPU", "  GPU",
                                                              "start-up:", "time:"))]}
    if proc.returncode != 0 or not files:
        print(f"[{name}] exit {proc.returncode}\n{proc.stderr[-3000:]}", flush=True)
        return result
    df = pd.read_parquet(files[0])
    df["start_s"] = pd.to_datetime(df["timestamp"], utc=True).map(pd.Timestamp.timestamp)
    df["end_s"] = df["start_s"] + df["worker_trial_wall_s"].fillna(0)
    job0 = files[0].parent / "jobs" / "0" / "trials.parquet"
    meta = json.loads(pq.read_schema(job0).metadata[METADATA_KEY]) if job0.exists() else {}
    result.update(rows=df, span_s=df["end_s"].max() - df["start_s"].min(),
                  first_trial_s=df["start_s"].min() - command_at,
                  first_by_worker={int(w): s - command_at for w, s in
                                   df.groupby(df["worker"].fillna(-1))["start_s"].min().items()},
                  startup=meta.get("startup") or {},
                  estimated=meta.get("estimated_worker_s"),
                  busy=timeline.busy(df.to_dict("records")))
    return result


def device_ratios(many: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """Each trial's device time (else loop time) on N GPUs over the one-GPU run's, and
    whether it is flagged: either row carries one of ``REPEAT_FLAGS`` (the row says it may
    not be the sustained number, or depends on where its process put the op's bytes), or
    the N-GPU row's ``gpu_time_vs_host`` is beyond 3% (the row says its GPU ran the same
    trial, at another seed, that much apart from the host's other GPUs)."""
    column = "gpu_time_us" if many.get("gpu_time_us") is not None and \
        many["gpu_time_us"].notna().any() else "time_median_us"
    keep = ["trial_id", "op", "dtype", "shape_str", "gpu_index", column, "power_capped",
            "sm_clock_mhz_samples_median", "temperature_c_end", gpu_compare.COLUMN,
            gpu_compare.TIME_COLUMN, *REPEAT_FLAGS]
    base_keep = base[[c for c in ("trial_id", column, *REPEAT_FLAGS) if c in base]].rename(
        columns={column: "base", **{flag: f"base_{flag}" for flag in REPEAT_FLAGS}})
    joined = many[[c for c in keep if c in many]].merge(base_keep, on="trial_id")
    joined["ratio"] = joined[column] / joined["base"]
    marks = joined.reindex(  # absent: no flags
        columns=[*REPEAT_FLAGS, *(f"base_{flag}" for flag in REPEAT_FLAGS)])
    joined["flagged"] = marks.apply(lambda col: col.map(lambda f: isinstance(f, str))).any(axis=1)
    apart = joined.reindex(columns=[gpu_compare.TIME_COLUMN]).iloc[:, 0]
    joined["flagged"] |= ((apart - 1).abs() > SPREAD_TARGET).fillna(False)
    return joined


def tail_line(df: pd.DataFrame) -> str | None:
    """Which worker ended last, how long after the others, and the trial it ended on: the
    tail of a pool is one trial's doing more often than not (on four H200s, a tf32 1024³
    estimated light, taken last and warmed up from cold as a capped op, ended 1.3-2.0 s
    after the others in four runs of eight). None with fewer than two workers."""
    ends = df.groupby(df["worker"].fillna(-1))["end_s"].max()
    if len(ends) < 2:
        return None
    worker = ends.idxmax()
    last = df[df["worker"].fillna(-1) == worker].sort_values("end_s").iloc[-1]
    capped = {True: "capped", False: "light"}.get(last.get("power_capped"), "capped n/a")
    settle = last.get("gpu_time_settle_s")
    settled = f", warm-up {settle:.2f} s" if settle == settle and settle is not None else ""
    return (f"  tail: worker {int(worker)} ended {ends.max() - ends.drop(worker).max():.2f} s "
            f"after the others, on {last['op']} {last['dtype']} {last['shape_str']} "
            f"({last['worker_trial_wall_s']:.2f} s, {capped}, heat before "
            f"{last.get('heat_before')}{settled})")


def describe(r: dict[str, Any], base: dict[str, Any]) -> list[str]:
    df = r["rows"]
    if df.empty:
        return [f"{r['name']}: FAILED (exit {r['exit']}), see {r['name']}.log"]
    lines = [f"{r['name']}: {len(df)} trials {dict(Counter(df['status']))}",
             f"  wall {r['wall_s']:.1f} s = first trial {r['first_trial_s']:.2f} + trials "
             f"{r['span_s']:.1f} + end {r['wall_s'] - r['first_trial_s'] - r['span_s']:.2f}"]
    if r is not base and not base["rows"].empty:
        lines.append(f"  speed-up over workers=1: wall {base['wall_s'] / r['wall_s']:.2f}x, "
                     f"trial span {base['span_s'] / r['span_s']:.2f}x")
    firsts = ", ".join(f"worker {w} {s:.2f} s" for w, s in sorted(r["first_by_worker"].items()))
    lines.append(f"  first trial after the command: {firsts}")
    if r["estimated"]:
        lines.append("  estimated seconds per worker (placement): "
                     + ", ".join(f"{s:.1f}" for s in r["estimated"]))
    lines += [f"  {line}" for line in r["summary"]]
    lines += [line for line in [tail_line(df), allocations_line(df)] if line]
    if r is not base and not base["rows"].empty:
        ratios = device_ratios(df, base["rows"])
        off = ratios[(ratios["ratio"] - 1).abs() > SPREAD_TARGET]
        lines.append(f"  device time against workers=1: {len(ratios) - len(off)} of "
                     f"{len(ratios)} within {SPREAD_TARGET:.0%} ({int(off['flagged'].sum())} "
                     "of the rest flagged in one run or the other); ratio min "
                     f"{ratios['ratio'].min():.3f}, median {ratios['ratio'].median():.3f}, "
                     f"max {ratios['ratio'].max():.3f}")
        off = off.reindex((off["ratio"] - 1).abs().sort_values(ascending=False).index)
        if len(off) > SHOWN:
            lines.append(f"    the {SHOWN} furthest of {len(off)} beyond {SPREAD_TARGET:.0%}:")
        for _, row in off.head(SHOWN).iterrows():
            lines.append(f"    {row['op']} {row['dtype']} {row['shape_str']}: x{row['ratio']:.3f}"
                         f" on GPU {row['gpu_index']} (capped {row.get('power_capped')}, "
                         f"clock {row.get('sm_clock_mhz_samples_median', float('nan')):.0f} "
                         f"MHz, {row.get(gpu_compare.COLUMN, float('nan')):.3f} of the "
                         f"host's, {row.get('temperature_c_end')} °C, device time "
                         f"{row.get(gpu_compare.TIME_COLUMN, float('nan')):.3f} of the host's"
                         f"{', flagged' if row['flagged'] else ''})")
    return lines


def allocations_line(df: pd.DataFrame) -> str | None:
    """The rows timed on several allocations of their inputs (an op whose bytes stay in L2,
    runner.execution.allocations), how far apart those read, and how many are flagged."""
    found = df.reindex(columns=["allocations", "allocation_spread", "allocation_flag"])
    taken = df[(pd.to_numeric(found["allocations"], errors="coerce") > 1)
               & pd.to_numeric(found["allocation_spread"], errors="coerce").notna()]
    if taken.empty:
        return None
    flagged = found.loc[taken.index, "allocation_flag"].map(lambda f: isinstance(f, str))
    spreads = ", ".join(f"{row['op']} {row['dtype']} {row['shape_str']} "
                        f"{row['allocation_spread']:.1%}" for _, row in taken.iterrows())
    return (f"  timed on several allocations: {len(taken)} rows, {int(flagged.sum())} flagged; "
            f"spread {spreads}")


def pinned_lines(p: pd.DataFrame) -> list[str]:
    lines = ["same op pinned to each GPU at once (bf16 matmul 8192^3, 20 s of heat first):"]
    for _, r in p.sort_values("device").iterrows():
        lines.append(f"  {r['device']}: gpu_index {r['gpu_index']} device "
                     f"{r.get('gpu_time_us', float('nan')):.1f} us, clock "
                     f"{r.get('sm_clock_mhz_samples_median')} MHz, "
                     f"{r.get('temperature_c_end')} °C, "
                     f"throttle {r.get('throttle_reasons_timed')!r}")
    return lines


def wall_target(n: int, seeds: int) -> float:
    """The wall speed-up wanted on ``n`` GPUs: the mix's own (:data:`MIX_WALL_TARGETS`),
    else 0.85·N."""
    return MIX_WALL_TARGETS.get(n, 0.75 * n) if seeds == 1 else 0.85 * n


def checks_for(runs: dict[str, dict[str, Any]], dry: bool,
               seeds: int = 1) -> list[tuple[str, str, str]]:
    base = runs["1"]
    checks: list[tuple[str, str, str]] = []

    def check(name: str, ok: bool | None, value: str) -> None:
        checks.append((name, "N/A" if ok is None else ("PASS" if ok else "FAIL"), value))

    for w, r in runs.items():
        df = r["rows"]
        check(f"workers={w}: ran, same trial set as workers=1", not df.empty and Counter(
            df["trial_id"]) == Counter(base["rows"]["trial_id"]), f"{len(df)} rows")
        if df.empty or base["rows"].empty or w == "1":
            continue
        n = int(w)
        span_x, wall_x = base["span_s"] / r["span_s"], base["wall_s"] / r["wall_s"]
        check(f"N={n}: trial-span speed-up >= {0.9 * n:.2f}x", None if dry else
              span_x >= 0.9 * n, f"{span_x:.2f}x")
        wanted = wall_target(n, seeds)
        check(f"N={n}: wall speed-up >= {wanted:.2f}x", None if dry else
              wall_x >= wanted, f"{wall_x:.2f}x")
        fractions = [b["fraction"] or 0.0 for b in r["busy"].values()]
        check(f"N={n}: every worker busy >= {BUSY_TARGET:.0%}", None if dry else
              min(fractions) >= BUSY_TARGET, ", ".join(f"{f:.0%}" for f in fractions))
        last_first = max(r["first_by_worker"].values())
        check(f"N={n}: first trial <= {STARTUP_TARGET_S:g} s (every worker)", None if dry else
              last_first <= STARTUP_TARGET_S, f"{last_first:.2f} s")
        joined = device_ratios(df, base["rows"])
        gap = (joined["ratio"] - 1).abs()
        unflagged = gap[~joined["flagged"]]
        worst = unflagged.max() if len(unflagged) else 0.0
        check(f"N={n}: device time within {SPREAD_TARGET:.0%} of workers=1, or flagged",
              None if dry else worst <= SPREAD_TARGET, f"worst unflagged {worst:.2%}, "
              f"{int((gap <= SPREAD_TARGET).sum())}/{len(gap)} within, "
              f"{int(((gap > SPREAD_TARGET) & joined['flagged']).sum())} beyond it flagged")
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", type=Path, help="same as --out")
    parser.add_argument("--out", type=Path, help="where results and every command's log go")
    parser.add_argument("--gpus", type=int, nargs="+", help="worker counts to run (each N "
                        "uses the first N visible GPUs); default 2, 4, 8 and all")
    parser.add_argument("--seeds", type=int, default=1, help="run the mix this many times")
    parser.add_argument("--timer", default="default")
    parser.add_argument("--pinned", action="store_true", help="also the pinned run")
    parser.add_argument("--dry", action="store_true", help="CPU dry run: tiny sizes, 2 workers")
    a = parser.parse_args()
    out = a.out or a.out_dir
    if out is None:
        parser.error("--out is required")
    out.mkdir(parents=True, exist_ok=True)
    n_gpus = 0 if a.dry else gpu_count()
    counts = a.gpus or ([2] if a.dry else sorted({n for n in (2, 4, 8) if n <= n_gpus}
                                                  | ({n_gpus} if n_gpus > 1 else set())))
    if not a.dry and any(n > n_gpus for n in counts):
        parser.error(f"--gpus {max(counts)}: this machine has {n_gpus} GPU(s)")
    cases, dtypes = mixed_cases(a.dry)
    device, timer = ("cpu", "smoke") if a.dry else ("cuda", a.timer)
    sweep = [f"device={device}", f"timer={timer}", dtypes, cases,
             f"seed=[{','.join(str(s) for s in range(a.seeds))}]"]
    lines = [f"machine: {n_gpus} GPU(s); mixed sweep x{a.seeds}, timer={timer}; "
             f"workers=1 then {counts}"]
    if a.pinned and n_gpus:
        pinned = [f"device=[{','.join(f'cuda:{i}' for i in range(n_gpus))}]", "timer=default",
                  "op=matmul", "shape=[8192,8192,8192]", "dtype=bf16", "workers=per_gpu",
                  "gpu_warmup_s=20"]
        p = run(out, "pinned", pinned)["rows"]
        lines += pinned_lines(p) if not p.empty else ["pinned run failed: see pinned.log"]
    runs = {"1": run(out, "workers_1", sweep + ["workers=1"])}
    for n in counts:
        runs[str(n)] = run(out, f"workers_{n}", sweep + [f"workers={n}"])
    for r in runs.values():
        lines += describe(r, runs["1"])
    checks = checks_for(runs, a.dry, a.seeds)
    width = max(len(name) for name, _, _ in checks)
    lines += ["", f"{'check':<{width}}  result  value"]
    lines += [f"{name:<{width}}  {status:<6}  {value}" for name, status, value in checks]
    print("\n".join(lines))
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 1 if any(status == "FAIL" for _, status, _ in checks) else 0


if __name__ == "__main__":
    raise SystemExit(main())
