"""How an op's time per call, clock and power move under back-to-back load. One CUDA call:

    python benchmarks/power_trace.py --out DIR [--seconds 8] [--rest 5]

For each compute-bound op near the power cap (and one memory-bound control), after ``--rest``
seconds idle: ``--seconds`` of back-to-back graph replays, each sample between two CUDA events,
with a probe kernel between samples that reads ``%globaltimer`` and ``%clock64`` on SM 0
(nvbench's way of reading the clock the samples really ran at: cycles per ns). A host thread
polls NVML every 5 ms: SM clock, instantaneous power, temperature. Then, at the op's
sustained state, the same op is timed three ways in alternation (eager calls back to back,
one-call graph replays, a many-call graph) to tell a different kernel from a different clock:
cycles per call (time × effective clock) must agree.

Writes ``trace_<op>.csv`` and ``nvml_<op>.csv`` under DIR; prints a table per op, binned in
time, and a summary last.

Kept as it ran for the table in docs/timing.md, with two known flaws: it reads each 10 ms
chunk's stamps back with a blocking copy (a short idle before the next chunk is queued), and
its probe is specialised on the slot number (its first chunk compiles variants, so the first
0.25 s bin of the first op is empty). The device time itself has neither
(``runner.timing.cuda_device``). A version run on the device time's own chunks read bmm and
linear with implausible clocks (1738-1793 MHz) on the one run there was time for: not yet
understood.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BINS_S = (0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 30.0)


def probe_kernel() -> Any:
    """A Triton kernel that stores (%globaltimer, %clock64) of SM 0 at ``slot``."""
    import triton
    import triton.language as tl

    @triton.jit
    def probe(out_ptr, slot):
        smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                         is_pure=False, pack=1)
        gt = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                       is_pure=False, pack=1)
        ck = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64,
                                       is_pure=False, pack=1)
        if smid == 0:
            tl.store(out_ptr + 2 * slot, gt)
            tl.store(out_ptr + 2 * slot + 1, ck)

    return probe


class NvmlPoller(threading.Thread):
    """Reads SM clock, instantaneous power and temperature every ``interval_s``."""

    def __init__(self, interval_s: float = 0.005) -> None:
        super().__init__(daemon=True)
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.interval_s = interval_s
        self.rows: list[tuple[float, float, float, float]] = []
        self.stop_flag = threading.Event()
        self.instant = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", 186)

    def read(self) -> tuple[float, float, float, float]:
        n, h = self.nvml, self.handle
        mhz = n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)
        value = n.nvmlDeviceGetFieldValues(h, [self.instant])[0]
        watts = value.value.uiVal / 1000 if value.nvmlReturn == 0 else float("nan")
        temp = n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)
        return time.perf_counter(), float(mhz), float(watts), float(temp)

    def run(self) -> None:
        while not self.stop_flag.is_set():
            self.rows.append(self.read())
            time.sleep(self.interval_s)


def trace(fn: Any, seconds: float, poller: NvmlPoller, probe: Any) -> dict[str, list[float]]:
    """Back-to-back graph replays of K calls for ``seconds``: per sample µs per call and the
    effective SM clock (MHz) over it, with its host time (s since the trace began)."""
    import torch

    from runner.timing.cuda_device import capture_graph

    _, _, _ = capture_graph(fn, torch.device("cuda"), 1)
    start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start_ev.record()
    fn()
    end_ev.record()
    end_ev.synchronize()
    calls = max(1, round(1.0 / max(start_ev.elapsed_time(end_ev), 1e-3)))  # ~1 ms samples
    replay, _, _ = capture_graph(fn, torch.device("cuda"), calls)
    per_chunk = max(2, round(10.0 / max(calls * start_ev.elapsed_time(end_ev), 1e-3)))
    slots = torch.zeros(2 * (per_chunk + 1), dtype=torch.int64, device="cuda")
    grid = (torch.cuda.get_device_properties(0).multi_processor_count,)
    out: dict[str, list[float]] = {"t_s": [], "us_per_call": [], "eff_mhz": []}
    # Calibrate globaltimer against the host clock.
    probe[grid](slots, 0)
    torch.cuda.synchronize()
    host0, gt0 = time.perf_counter(), int(slots[0].item())
    begin = host0
    pending: list[tuple[list[Any], Any]] = []

    def enqueue() -> None:
        buf = torch.zeros_like(slots)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(per_chunk + 1)]
        probe[grid](buf, 0)
        events[0].record()
        for i in range(per_chunk):
            replay()
            events[i + 1].record()
            probe[grid](buf, i + 1)
        pending.append((events, buf))

    while time.perf_counter() - begin < seconds:
        while len(pending) < 3:
            enqueue()
        events, buf = pending.pop(0)
        events[-1].synchronize()
        stamps = buf.view(-1, 2).tolist()
        for i in range(per_chunk):
            ms = events[i].elapsed_time(events[i + 1])
            (g0, c0), (g1, c1) = stamps[i], stamps[i + 1]
            out["t_s"].append(host0 - begin + (g1 - gt0) / 1e9)
            out["us_per_call"].append(ms * 1e3 / calls)
            out["eff_mhz"].append((c1 - c0) / (g1 - g0) * 1e3 if g1 > g0 else float("nan"))
    for events, _ in pending:
        events[-1].synchronize()
    out["calls"] = [calls]
    return out


def three_ways(fn: Any, seconds_each: float, rounds: int) -> dict[str, list[float]]:
    """µs per call of eager calls back to back, one-call graph replays and a many-call graph,
    in alternating blocks of ``seconds_each`` (same thermal state for all three)."""
    import torch
    from sustained_check import back_to_back_us

    from runner.timing.cuda_device import capture_graph

    one, _, _ = capture_graph(fn, torch.device("cuda"), 1)
    many, _, _ = capture_graph(fn, torch.device("cuda"), 20)
    ways = {"eager": (fn, 1), "graph_k1": (one, 1), "graph_k20": (many, 20)}
    result: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, (work, calls) in ways.items():
            begin = time.perf_counter()
            while time.perf_counter() - begin < seconds_each:
                result[name].append(back_to_back_us(work, 10, calls))
    return result


def binned(t_s: list[float], values: list[float], lo: float, hi: float) -> float:
    inside = [v for t, v in zip(t_s, values) if lo <= t < hi and v == v]
    return statistics.median(inside) if inside else float("nan")


def main() -> None:
    from sustained_check import COMPUTE, MEMORY, workloads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rest", type=float, default=5.0)
    parser.add_argument("--ops", default="all")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    ops = workloads()
    names = [*COMPUTE, MEMORY[0]] if args.ops == "all" else args.ops.split(",")
    probe = probe_kernel()
    summary = []
    for name in names:
        fn = ops[name]
        if "tf32" in name:
            torch.backends.cuda.matmul.allow_tf32 = True
        time.sleep(args.rest)
        poller = NvmlPoller()
        poller.start()
        tr = trace(fn, args.seconds, poller, probe)
        ways = three_ways(fn, 0.3, 3)
        poller.stop_flag.set()
        poller.join()
        torch.backends.cuda.matmul.allow_tf32 = False
        slug = name.replace(" ", "_")
        with open(args.out / f"trace_{slug}.csv", "w") as f:
            f.write("t_s,us_per_call,eff_mhz\n")
            for row in zip(tr["t_s"], tr["us_per_call"], tr["eff_mhz"]):
                f.write(",".join(f"{v:.6g}" for v in row) + "\n")
        nv = poller.rows
        t0 = nv[0][0]
        with open(args.out / f"nvml_{slug}.csv", "w") as f:
            f.write("t_s,sm_mhz,power_w,temp_c\n")
            for t, mhz, w, c in nv:
                f.write(f"{t - t0:.4f},{mhz},{w},{c}\n")
        nt = [r[0] - t0 for r in nv]
        print(f"\n### {name} (K={tr['calls'][0]}, {len(tr['t_s'])} samples)\n")
        print("| window s | µs/call | eff MHz | cycles/call (M) | NVML MHz | W | °C |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for lo, hi in zip(BINS_S, BINS_S[1:]):
            if lo >= args.seconds:
                break
            us = binned(tr["t_s"], tr["us_per_call"], lo, hi)
            mhz = binned(tr["t_s"], tr["eff_mhz"], lo, hi)
            print(f"| {lo:g}-{hi:g} | {us:.2f} | {mhz:.0f} | {us * mhz / 1e6:.4f} | "
                  f"{binned(nt, [r[1] for r in nv], lo, hi):.0f} | "
                  f"{binned(nt, [r[2] for r in nv], lo, hi):.0f} | "
                  f"{binned(nt, [r[3] for r in nv], lo, hi):.0f} |")
        way_medians = {k: statistics.median(v) for k, v in ways.items()}
        print("three ways at the sustained state (µs/call): "
              + ", ".join(f"{k} {v:.2f}" for k, v in way_medians.items()))
        late = [(u, m) for t, u, m in zip(tr["t_s"], tr["us_per_call"], tr["eff_mhz"])
                if t >= args.seconds / 2]
        us_late = statistics.median(u for u, _ in late)
        spread = (max(u for u, _ in late) / min(u for u, _ in late) - 1) * 100
        summary.append((name, us_late, statistics.median(m for _, m in late), spread,
                        way_medians))
    print("\n## Summary (second half of each trace)\n")
    print("| op | µs/call | eff MHz | max/min % | eager | graph K=1 | graph K=20 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, us, mhz, spread, ways in summary:
        print(f"| {name} | {us:.2f} | {mhz:.0f} | {spread:.1f} | {ways['eager']:.2f} | "
              f"{ways['graph_k1']:.2f} | {ways['graph_k20']:.2f} |")


if __name__ == "__main__":
    main()
