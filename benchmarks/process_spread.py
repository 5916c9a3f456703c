"""Do two identical runs agree? The same trials in K fresh processes, one after another:

    python benchmarks/process_spread.py --out DIR [--runs 5] \\
        --case "op=layer_norm dtype=fp32 'shape=[[1024,4096],[16384,4096]]' device=cuda:0" \\
        --case "... timer.flush_l2=true"

Each ``--case`` is one command line of ``python -m runner`` overrides. The cases run
interleaved (case 1, case 2, case 1, ...), so a drift of the machine over the minute spreads
over all of them alike. For each trial: its device time in every process, the spread between
processes (max over min, minus one) against the spread its own samples allow (the widest
median CI of one process, twice over: two CIs that just touch). A spread well over that is
a property of the process, not of the samples: what ran before the trial, or where its bytes
live (docs/timing.md). Logs and results under DIR; the table last.
"""

from __future__ import annotations

import argparse
import glob
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def run_case(out: Path, overrides: list[str]) -> pd.DataFrame:
    """One fresh process of ``python -m runner`` with ``overrides``; its rows."""
    cmd = [sys.executable, "-m", "runner", *overrides, f"results_dir={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    (out.parent / f"{out.name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{shlex.join(cmd)} failed ({proc.returncode}):\n"
                 + (proc.stdout + proc.stderr)[-3000:])
    return pd.read_parquet(glob.glob(str(out / "**" / "results.parquet"), recursive=True)[0])


def spread_rows(frames: list[pd.DataFrame], case: int) -> list[dict[str, object]]:
    """Per trial of one case's processes: the device times (the loop times on a CPU, which
    has none), their spread, the CI bound."""
    rows = []
    for _, group in pd.concat(frames).groupby("trial_index"):
        prefix = "gpu_time_" if group["gpu_time_median_us"].notna().all() else ""
        times_us = list(group[f"{prefix or 'time_'}median_us"])
        ci = max(group[f"{prefix}ci_rel_halfwidth"].fillna(0.0))
        first = group.iloc[0]
        rows.append({"case": case, "trial": f"{first['op']} {first['dtype']} "
                                             f"{first['shape_str']}",
                     "flush_l2": bool(first["l2_flush"]), "runs_us": times_us,
                     "spread": max(times_us) / min(times_us) - 1, "samples_allow": 2 * ci,
                     "median_us": statistics.median(times_us)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--case", action="append", required=True,
                        help="one command line of runner overrides (repeatable)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cases = [shlex.split(case) for case in args.case]
    frames: dict[int, list[pd.DataFrame]] = {i: [] for i in range(len(cases))}
    for run in range(args.runs):
        for i, overrides in enumerate(cases):
            frames[i].append(run_case(args.out / f"case{i}_run{run}", overrides))
    rows = [row for i in frames for row in spread_rows(frames[i], i)]
    print("| case | trial | L2 flushed | median µs | each process, µs | spread | its samples "
          "allow |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: |")
    for row in rows:
        each = ", ".join(f"{t:.4g}" for t in row["runs_us"])
        print(f"| {row['case']} | {row['trial']} | {row['flush_l2']} | {row['median_us']:.4g} "
              f"| {each} | {row['spread']:.2%} | {row['samples_allow']:.2%} |")


if __name__ == "__main__":
    main()
