"""Do two identical runs agree? The same trials in K fresh processes, one after another:

    python benchmarks/process_spread.py --out DIR [--runs 5] \\
        --case "op=layer_norm dtype=fp32 'shape=[[1024,4096],[16384,4096]]' device=cuda:0" \\
        --case "... timer.flush_l2=true"

Each ``--case`` is one command line of ``python -m runner`` overrides. The cases run
interleaved (case 1, case 2, case 1, ...), so a drift of the machine over the minute spreads
over all of them alike. For each trial (matched by op, dtype, shape and L2 flush, not by its
place in a process's order): its device time in every process, the spread between
processes (max over min, minus one) against the spread its own samples allow (the widest
median CI of one process, twice over: two CIs that just touch). A spread well over that is
a property of the process, not of the samples: what ran before the trial, or where its bytes
live (docs/timing.md). Logs and results under DIR; the table last.
"""

from __future__ import annotations

import argparse
import glob
import math
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from runner.storage.columns import REPEAT_FLAGS  # noqa: E402

#: What names a trial across processes (a trial's index is its place in one process's order).
TRIAL = ("op", "dtype", "shape_str", "l2_flush")
#: The median over the allocations of an L2-resident op's inputs (runner.execution.allocations).
ALLOCATIONS = "gpu_time_allocations_median_us"


def run_case(out: Path, overrides: list[str]) -> pd.DataFrame:
    """One fresh process of ``python -m runner`` with ``overrides`` (results under ``out``,
    which must not exist yet: results of an earlier run would be read as this one's); its
    rows."""
    if out.exists():
        sys.exit(f"{out} exists: give --out a folder of its own")
    cmd = [sys.executable, "-m", "runner", *overrides, f"results_dir={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    (out.parent / f"{out.name}.log").write_text(proc.stdout + proc.stderr)
    found = glob.glob(str(out / "**" / "results.parquet"), recursive=True)
    if proc.returncode != 0 or len(found) != 1:
        sys.exit(f"{shlex.join(cmd)} failed ({proc.returncode}; {len(found)} results files, "
                 "expected 1):\n" + (proc.stdout + proc.stderr)[-3000:])
    return pd.read_parquet(found[0])


def spread_rows(frames: list[pd.DataFrame], case: int) -> list[dict[str, object]]:
    """Per trial of one case's processes: the device times (the loop times where a process
    has none, as on a CPU; ``time`` says which), their spread, the CI bound, and how many
    processes' rows carry a flag that says the number may not repeat (``REPEAT_FLAGS``). A
    trial timed on several allocations of its inputs gets a second line: the median over
    them (``gpu_time_allocations_median_us``). A trial without a finite time in every
    process is shown with what it has, its spread left blank."""
    rows = []
    for trial, group in pd.concat(frames).groupby(list(TRIAL), dropna=False):
        device = group["gpu_time_us"].notna().all()
        prefix = "gpu_time_" if device else ""
        cis = [c for c in group[f"{prefix}ci_rel_halfwidth"] if math.isfinite(c)]
        flags = group.reindex(columns=list(REPEAT_FLAGS))
        flagged = int(flags.apply(lambda col: col.map(lambda f: isinstance(f, str)))
                      .any(axis=1).sum())
        lines = [("device" if device else "loop", "gpu_time_us" if device else "time_median_us",
                  2 * max(cis) if len(cis) == len(frames) else None)]
        if group.reindex(columns=[ALLOCATIONS]).iloc[:, 0].notna().any():
            lines.append(("over allocations", ALLOCATIONS, None))
        for time, column, allow in lines:
            times_us = [t for t in group[column] if math.isfinite(t)]
            whole = len(times_us) == len(frames)
            rows.append({"case": case, "trial": " ".join(str(v) for v in trial[:3]),
                         "flush_l2": trial[3], "time": time, "runs_us": times_us,
                         "spread": max(times_us) / min(times_us) - 1 if whole else None,
                         "samples_allow": allow, "flagged": flagged,
                         "median_us": statistics.median(times_us) if times_us else None})
    return rows


def share(value: object) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--case", action="append", required=True,
                        help="one command line of runner overrides (repeatable)")
    args = parser.parse_args()
    args.out = args.out.resolve()  # the processes run from the repository's root
    args.out.mkdir(parents=True, exist_ok=True)
    cases = [shlex.split(case) for case in args.case]
    frames: dict[int, list[pd.DataFrame]] = {i: [] for i in range(len(cases))}
    for run in range(args.runs):
        for i, overrides in enumerate(cases):
            frames[i].append(run_case(args.out / f"case{i}_run{run}", overrides))
    rows = [row for i in frames for row in spread_rows(frames[i], i)]
    print("| case | trial | L2 flushed | time | median µs | each process, µs | spread | its "
          "samples allow | rows flagged |")
    print("| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: |")
    for row in rows:
        each = ", ".join(f"{t:.4g}" for t in row["runs_us"])
        median = "n/a" if row["median_us"] is None else f"{row['median_us']:.4g}"
        print(f"| {row['case']} | {row['trial']} | {row['flush_l2']} | {row['time']} | {median} "
              f"| {each} | {share(row['spread'])} | {share(row['samples_allow'])} "
              f"| {row['flagged']} |")


if __name__ == "__main__":
    main()
