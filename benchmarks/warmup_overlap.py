"""Does a worker's CUDA warm-up on a thread beside its trial-code import save time? One call on
a CUDA machine:

    python benchmarks/warmup_overlap.py [--rounds 4]

Fresh processes, alternating: after ``import torch``, either as a worker does it
(``runner.execution.warmup.start_cuda`` on a thread, then the trial code's import, then
``warm``), or one after the other (the import, then ``warm`` doing the CUDA part itself).
Prints the medians of the import, the warm-up and their total, seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE = r"""
import json, sys, time
import torch
begin = time.perf_counter()
from runner.execution import warmup
early = warmup.start_cuda((0,)) if sys.argv[1] == "thread" else {}
import runner.execution.trial
imported = time.perf_counter()
warmup.warm(("cuda:0",), early)
done = time.perf_counter()
print(json.dumps({"imports_s": imported - begin, "warm_s": done - imported,
                  "total_s": done - begin}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    rows: dict[str, list[dict[str, float]]] = {"thread": [], "sequential": []}
    for _ in range(args.rounds):
        for way in rows:
            out = subprocess.run([sys.executable, "-c", ONE, way], env=env, capture_output=True,
                                 text=True, check=True)
            rows[way].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print("| way | imports s | warm-up s | total s | totals |")
    print("|---|---:|---:|---:|---|")
    for way, runs in rows.items():
        medians = [statistics.median(r[key] for r in runs)
                   for key in ("imports_s", "warm_s", "total_s")]
        totals = ", ".join(f"{r['total_s']:.3f}" for r in runs)
        print(f"| {way} | " + " | ".join(f"{m:.3f}" for m in medians) + f" | {totals} |")


if __name__ == "__main__":
    main()
