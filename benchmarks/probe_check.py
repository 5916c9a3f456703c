"""The clock probe (a PTX kernel loaded by the CUDA driver) against the same probe written in
Triton (``power_trace.probe_kernel``): what each costs a fresh process, and whether they read
the same clock. One call on a CUDA machine:

    python benchmarks/probe_check.py --out DIR [--rounds 3]

1. **Start cost.** Fresh processes, alone and four at once on the GPU, each: ``import torch``,
   the CUDA context, then the probe built and one pair read (``probe_s``). Triton's is timed
   with an empty cache (``cold``: its first compile on a host) and a filled one (``warm``).
2. **Agreement.** In one process, both probes queued around the same work, alternately:
   2 ms spins and bf16 8192³ matmuls back to back (a power-capped clock that moves). The
   ratio of their clocks per sample; and each probe's host cost per launch.
3. **Capture.** The PTX probe inside a CUDA graph, replayed: a clock per replay.

Logs to DIR/probe_check.log; tables last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: One fresh process: torch, the context, then the probe built and read once (``probe_s``).
START = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.ones(64, 64, device="cuda:0"); torch.cuda.synchronize()
t2 = time.perf_counter()
if sys.argv[1] == "ptx":
    from runner.timing.clock_probe import clock_probe
    ok = clock_probe("cuda:0") is not None  # builds it and reads one pair
else:
    from power_trace import probe_kernel
    stamps = torch.zeros(4, dtype=torch.int64, device="cuda:0")
    grid = (torch.cuda.get_device_properties(0).multi_processor_count,)
    kernel = probe_kernel()
    kernel[grid](stamps, 0); torch.cuda._sleep(1_000_000); kernel[grid](stamps, 1)
    ok = stamps[3].item() > stamps[1].item()
torch.cuda.synchronize()
print(json.dumps({"torch_s": t1 - t0, "context_s": t2 - t1,
                  "probe_s": time.perf_counter() - t2, "ok": ok}))
"""


def start_costs(rounds: int, log: Any) -> list[dict[str, Any]]:
    rows = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]))
    for round_ in range(rounds):
        for kind, caches in (("triton", ("cold", "warm")), ("ptx", ("-",))):
            for at_once in (1, 4):
                env["TRITON_CACHE_DIR"] = tempfile.mkdtemp()  # empty: cold, then filled
                for cache in caches:
                    procs = [subprocess.Popen([sys.executable, "-c", START, kind], env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True) for _ in range(at_once)]
                    for proc in procs:
                        out, err = proc.communicate()
                        try:
                            row = json.loads(out.strip().splitlines()[-1])
                        except (IndexError, json.JSONDecodeError):
                            row = {"error": err[-500:]}
                        row.update(kind=kind, at_once=at_once, cache=cache, round=round_)
                        rows.append(row)
                        print(json.dumps(row), file=log, flush=True)
    return rows


def agreement(log: Any) -> dict[str, Any]:
    import torch
    from power_trace import probe_kernel

    from runner.timing.clock_probe import clock_probe, effective_mhz

    ptx = clock_probe("cuda:0")
    triton = probe_kernel()
    grid = (torch.cuda.get_device_properties(0).multi_processor_count,)
    out: dict[str, Any] = {}
    buffer = torch.zeros(2 * 2000, dtype=torch.int64, device="cuda:0")
    launches = {"triton": lambda slot: triton[grid](buffer, slot),
                "ptx": lambda slot: ptx.record(buffer, slot)}
    for name, launch in launches.items():
        for _ in range(2):  # the first pass compiles Triton's slot variants
            torch.cuda.synchronize()
            begin = time.perf_counter()
            for slot in range(2000):
                launch(slot)
            host_us = (time.perf_counter() - begin) / 2000 * 1e6
        out[f"host_us_per_launch_{name}"] = host_us
    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    works = {"spin 2 ms": (200, lambda: torch.cuda._sleep(2_000_000)),
             "bf16 8192³": (400, lambda: a @ a)}
    for label, (samples, work) in works.items():
        ours = torch.zeros(2 * (samples + 1), dtype=torch.int64, device="cuda:0")
        theirs = torch.zeros_like(ours)
        for slot in range(samples + 1):
            ptx.record(ours, slot)
            triton[grid](theirs, slot)
            if slot < samples:
                work()
        torch.cuda.synchronize()
        mine, other = effective_mhz(ours.tolist()), effective_mhz(theirs.tolist())
        ratios = [m / o for m, o in zip(mine, other) if m and o]
        out[label] = {"ptx_mhz": statistics.median(m for m in mine if m),
                      "triton_mhz": statistics.median(o for o in other if o),
                      "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                      "ratio_max": max(ratios), "pairs": len(ratios)}
    graph, stamps = torch.cuda.CUDAGraph(), ptx.stamps(3)
    with torch.cuda.graph(graph):
        ptx.record(stamps, 0)
        a @ a
        ptx.record(stamps, 1)
        a @ a
        ptx.record(stamps, 2)
    out["graph_mhz"] = []
    for _ in range(2):
        stamps.zero_()
        graph.replay()
        torch.cuda.synchronize()
        out["graph_mhz"].append(effective_mhz(stamps.tolist()))
    print(json.dumps(out), file=log, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sys.path[:0] = [str(ROOT), str(HERE)]
    with open(args.out / "probe_check.log", "w") as log:
        rows = start_costs(args.rounds, log)
        result = agreement(log)
    import torch

    print(f"{torch.cuda.get_device_name(0)}; medians over {args.rounds} rounds")
    print("| probe | processes at once | Triton cache | torch import s | context s | probe s |")
    print("|---|---:|---|---:|---:|---:|")
    groups = sorted({(r["kind"], r["at_once"], r["cache"]) for r in rows if "error" not in r})
    for kind, at_once, cache in groups:
        sel = [r for r in rows if (r["kind"], r["at_once"], r["cache"]) == (kind, at_once, cache)
               and "error" not in r and r["ok"]]
        print(f"| {kind} | {at_once} | {cache} | "
              + " | ".join(f"{statistics.median(r[k] for r in sel):.3f}"
                           for k in ("torch_s", "context_s", "probe_s")) + " |")
    failed = [r for r in rows if "error" in r or not r.get("ok")]
    print(f"processes that failed or read no clock: {len(failed)}")
    print("| work | PTX MHz | Triton MHz | ratio median | min | max | pairs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label in ("spin 2 ms", "bf16 8192³"):
        r = result[label]
        print(f"| {label} | {r['ptx_mhz']:.1f} | {r['triton_mhz']:.1f} | {r['ratio_median']:.6f}"
              f" | {r['ratio_min']:.6f} | {r['ratio_max']:.6f} | {r['pairs']} |")
    print(f"host µs per launch: PTX {result['host_us_per_launch_ptx']:.1f}, "
          f"Triton {result['host_us_per_launch_triton']:.1f}; "
          f"captured probes, MHz per replay: {result['graph_mhz']}")


if __name__ == "__main__":
    main()
