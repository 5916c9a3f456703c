"""Does opsweep's own sampling regime read a capped op faster than plain back-to-back work?
One call on a CUDA machine:

    python benchmarks/regime_check.py --out DIR [--cases bf16:4096 bf16:2048] [--seconds 15]

On some H100s a capped trial's device-time samples ran 5-15% faster than a 15 s back-to-back
reference, at the same averaged power and temperature, while the loop time taken right after
them read the reference (docs/timing.md, "The H100 fast state"). This asks whether the device
time's regime itself (chunks with a clock probe between samples, an NVML read per chunk) is
the cause: per case, opsweep's device time sampled for ``--seconds`` back to back
(``timer.max_time_s``, a CI target it cannot meet), its samples' first and last thirds, then
``long_reference.py``'s plain CUDA-graph replays for as long, on the same GPU. If the last
thirds differ by more than 3%, the regime reads differently from plain work in steady state.
Logs and Parquet go to DIR; a table last.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from long_reference import parse_case, reference  # benchmarks/: this script's folder
from time_to_result import run_opsweep


def thirds(samples: list[float]) -> tuple[float, float]:
    """Medians of the first and the last third (samples of one trial are equal in size,
    so a third by count is a third by time)."""
    third = max(1, len(samples) // 3)
    return statistics.median(samples[:third]), statistics.median(samples[-third:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", nargs="+", default=["bf16:4096", "bf16:2048"])
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in args.cases:
        size, dtype = parse_case(case)
        frame, _, _ = run_opsweep(args.out, f"regime_{dtype}_{size}", [
            "op=matmul", f"dtype={dtype}", f"shape=[[{size},{size},{size}]]",
            f"timer.max_time_s={args.seconds}", "timer.target_rel=0.0001",
            "timer.max_samples=1000000"])
        row = frame.iloc[0]
        first, last = thirds(list(row["gpu_time_samples_us"]))
        ref = reference(size, dtype, "cuda:0", args.seconds)
        rows.append({"case": case, "samples": len(row["gpu_time_samples_us"]), "first": first,
                     "last": last, "ref": ref["ref_us"], "loop": row["time_median_us"],
                     "mhz": row["sm_clock_mhz_samples_median"],
                     "share": row["power_share_samples"], "method": row["gpu_time_method"],
                     "note": "; ".join(text[:100] for text in (row.get("gpu_time_reason"),
                                                               row.get("sustained_flag"))
                                       if isinstance(text, str))})
    # The method and its note say how the samples were held: a replay ("graph") keeps the
    # GPU at the op's own power; "blocked" (the replay fell behind the host) spins.
    print("\n| case | samples | opsweep first third µs | last third µs | plain back to back, "
          "last third µs | gap | loop µs | MHz | power share | method | note, flag |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['samples']} | {r['first']:.2f} | {r['last']:.2f} | "
              f"{r['ref']:.2f} | {(r['last'] / r['ref'] - 1) * 100:+.2f}% | {r['loop']:.2f} | "
              f"{r['mhz']:.0f} | {r['share']:.2f} | {r['method']} | {r['note']} |")

if __name__ == "__main__":
    sys.exit(main())
