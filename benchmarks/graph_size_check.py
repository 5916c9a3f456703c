"""Does a small op's time per call depend on how many calls one CUDA graph holds? One call:

    python benchmarks/graph_size_check.py

For the small ops of benchmarks/sustained_check.py, back-to-back replays of graphs of K calls
(each replay between two events, no sync between replays), for K from 8 to 32768, against
``triton.testing.do_bench_cudagraph`` in the same process. Prints µs per call; a table last.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

KS = (8, 32, 128, 512, 2048, 8192, 32768)



def main() -> None:
    from graph_replays import per_call_us
    from sustained_check import FLOOR, MEMORY, workloads
    from triton.testing import do_bench_cudagraph

    ops = workloads()
    rows = []
    for name in (MEMORY[2], FLOOR):
        fn = ops[name]
        ref = statistics.median(do_bench_cudagraph(fn, rep=500, return_mode="median") * 1e3
                                for _ in range(3))
        by_k = {k: per_call_us(fn, k) for k in KS}
        rows.append((name, ref, by_k))
        print(name, f"cudagraph {ref:.3f}", by_k, flush=True)
    print("\n| op | do_bench_cudagraph | " + " | ".join(f"K={k}" for k in KS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in KS) + " |")
    for name, ref, by_k in rows:
        print(f"| {name} | {ref:.3f} | " + " | ".join(f"{by_k[k]:.3f}" for k in KS) + " |")


if __name__ == "__main__":
    main()
