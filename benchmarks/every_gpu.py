"""``time_to_result.py --gpus N``: the same capped ops pinned to every GPU of a host at once,
each trial against its own GPU's long reference (``long_reference.py``), taken on all GPUs
at once after the sweep, so every board is as hot as it was in the sweep.

The sweep: bf16 and tf32 matmuls, 8192³ then 4096³ in heat order on each GPU
(``device=[cuda:0,...] workers=per_gpu``): a capped op right after a bigger capped op is the
case where a GPU's controller may give the clock back between trials.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIZES = (8192, 4096)
DTYPES = ("bf16", "tf32")


def references_on_every_gpu(gpus: int, seconds: float) -> dict[tuple[str, int, str], dict]:
    """``{(device, size, dtype): reference}``, the GPUs' references run at once, one process
    per GPU."""
    cases = [f"{dtype}:{size}" for dtype in DTYPES for size in SIZES]
    procs = [subprocess.Popen([sys.executable, str(HERE / "long_reference.py"),
                               "--device", f"cuda:{i}", "--seconds", str(seconds),
                               "--cases", *cases], stdout=subprocess.PIPE, text=True)
             for i in range(gpus)]
    refs = {}
    for proc in procs:
        out, _ = proc.communicate()
        for line in out.splitlines():
            ref = json.loads(line)
            dtype, size = ref["case"].split(":")
            refs[(ref["device"], int(size), dtype)] = ref
    return refs


def every_gpu(run_opsweep: Any, out: Path, gpus: int, seconds: float,
              pct: Any) -> list[tuple[str, bool, str]]:
    """Run the pinned sweep, then the references; print a table per trial and return the
    gate's checks."""
    devices = ",".join(f"cuda:{i}" for i in range(gpus))
    shapes = "[" + ",".join(f"[{s},{s},{s}]" for s in SIZES) + "]"
    frame, wall, first = run_opsweep(out, "every_gpu", [
        "op=matmul", f"shape={shapes}", f"dtype=[{','.join(DTYPES)}]", f"device=[{devices}]",
        "workers=per_gpu"])
    refs = references_on_every_gpu(gpus, seconds)
    print(f"\n## Every GPU at once ({gpus} GPUs, wall {wall:.1f} s, first trial {first:.2f} s)\n")
    print("| GPU | trial | gpu µs | ref µs (last third) | Δ | samples MHz | sustained MHz before "
          "| °C timed | ref °C | flag |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    worst = 0.0
    for _, row in frame.sort_values(["device", "trial_index"]).iterrows():
        size = int(row["shape_str"].split("x")[0])
        ref = refs[(row["device"], size, row["dtype"])]
        delta = pct(row["gpu_time_us"], ref["ref_us"])
        worst = max(worst, abs(delta)) if ref["capped"] else worst
        print(f"| {row['device']} | {row['dtype']} {size}³ | {row['gpu_time_us']:.1f} | "
              f"{ref['ref_us']:.1f} | {delta:+.2f}% | "
              f"{row.get('sm_clock_mhz_samples_median') or float('nan'):.0f} | "
              f"{row.get('sm_clock_mhz_capped_sustained') or float('nan'):.0f} | "
              f"{row.get('temperature_c_timed')} | {ref['temperature_c']} | "
              f"{row.get('sustained_flag') or ''} |")
    return [(f"every GPU within 3% of its own {seconds:g} s reference (capped cases)",
             worst <= 3.0, f"max |Δ| {worst:.2f}% over {len(frame)} trials on {gpus} GPUs")]
