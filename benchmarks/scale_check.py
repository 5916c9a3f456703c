"""What a sweep costs besides its trials, as the sweep grows: 10 to 5000 trials in one job and
a 100-job multirun, on CPU (``op=add``, smoke timer), each a real ``python -m runner``.

Prints, per sweep: wall time, the first trial's start after the command, the driver's
overhead per trial (the interval between trial starts less the trial's own wall time), the
driver's peak RSS, journal bytes per trial and the end phase (last trial's start to exit).

    python benchmarks/scale_check.py                 # 10, 100, 1000, 5000 trials; 100 jobs
    python benchmarks/scale_check.py --trials 10 100 --jobs 0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

BASE = ["op=add", "device=cpu", "timer=smoke", "check_accuracy=false"]


def _peak_rss_mb(pid: int, out: list[float], done: threading.Event) -> None:
    """VmHWM of the driver, read until it exits (the worker processes are not counted)."""
    while not done.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]) / 1024)
        except OSError:
            return
        time.sleep(0.05)


def run(args: list[str], root: Path, sweep_id: str) -> dict[str, float]:
    command = [sys.executable, "-m", "runner", *args, f"results_dir={root}",
               f"sweep_id={sweep_id}"]
    start_utc = datetime.now(timezone.utc)
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    rss: list[float] = []
    done = threading.Event()
    watcher = threading.Thread(target=_peak_rss_mb, args=(proc.pid, rss, done), daemon=True)
    watcher.start()
    _, err = proc.communicate()
    wall_s = time.monotonic() - start
    end_utc = datetime.now(timezone.utc)
    done.set()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{err[-3000:]}")
    sweep = root / sweep_id
    table = pq.read_table(sweep / "results.parquet",
                          columns=["timestamp", "worker_trial_wall_s"]).to_pandas()
    starts = sorted(table["timestamp"])
    n = len(table)
    interval_s = (starts[-1] - starts[0]).total_seconds() / max(n - 1, 1)
    own_s = float(table["worker_trial_wall_s"].fillna(0).mean())
    journal_bytes = sum(p.stat().st_size for p in sweep.glob("jobs/*/journal/*"))
    return {
        "trials": n,
        "wall_s": wall_s,
        "first_trial_s": (starts[0].to_pydatetime() - start_utc).total_seconds(),
        "overhead_ms": max(interval_s - own_s, 0.0) * 1e3,
        "rss_mb": max(rss, default=float("nan")),
        "journal_kb_per_trial": journal_bytes / n / 1024,
        "end_phase_s": (end_utc - starts[-1].to_pydatetime()).total_seconds(),
    }


def shapes(n: int) -> str:
    return "shape=[" + ",".join(f"[{i}]" for i in range(1, n + 1)) + "]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="*", default=[10, 100, 1000, 5000])
    parser.add_argument("--jobs", type=int, default=100, help="multirun jobs (0: none)")
    args = parser.parse_args(argv)
    header = ("sweep", "trials", "wall_s", "first_trial_s", "overhead_ms", "rss_mb",
              "journal_kb_per_trial", "end_phase_s")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    with tempfile.TemporaryDirectory(prefix="scale_check_") as tmp:
        root = Path(tmp)
        cases = [(f"{n} trials", [*BASE, shapes(n)]) for n in args.trials]
        if args.jobs:
            cases.append((f"{args.jobs} jobs (-m)",
                          [*BASE, "shape=[64]", f"seed=range({args.jobs})", "-m"]))
        for number, (name, sweep_args) in enumerate(cases):
            got = run(sweep_args, root, f"s{number}")
            print(" | ".join([name, *(f"{got[k]:.3g}" if isinstance(got[k], float)
                                      else str(got[k]) for k in header[1:])]), flush=True)
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs; overhead_ms: interval "
          "between trial starts less the trial's own wall time)")


if __name__ == "__main__":
    main()
