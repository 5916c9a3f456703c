"""Cross-check opsweep's timer against triton.testing.do_bench and torch.utils.benchmark.

    python benchmarks/timer_crosscheck.py            # on a CUDA machine

Builds a few ops with opsweep's builders and times the same zero-argument callable three
ways, in one process, back to back. If opsweep's median differs from both references by more
than their mutual spread, the timer is wrong. Prints one table: median µs per tool and the
ratios opsweep/do_bench and opsweep/torch.utils.benchmark.

Expected differences, by design: do_bench zeroes a 256 MB buffer before every call, so short
ops run cold and the host gets a head start (launch overhead hidden); torch.utils.benchmark
synchronises around blocks of calls with a host clock, so it includes one sync per block.

    python benchmarks/timer_crosscheck.py --cold      # the cold (L2-flushed) offset

``--cold`` times short kernels cold with *method-matched* references, to
find where the 1-2 µs between opsweep's flushed median and do_bench's comes from:

* ``queued``: do_bench's own loop (flush, start event, call, end event, for every sample,
  and one synchronisation at the end), median of the event pairs;
* ``per-sample``: the same loop, synchronised after every sample (as opsweep's timer);
* both again without any flush, each held by a spin kernel so that no sample waits on the
  host (the queue's depth is then the only difference);
* opsweep's loop time and device time (flush, sync, spin, events: nvbench's cold protocol),
  and do_bench asked for its median (its default is the mean). docs/timing.md reads the
  table.
"""

from __future__ import annotations

import statistics
import sys

import torch
import torch.utils.benchmark as tub

from ops import batched_dot, elementwise, matmul, pointwise_chain
from ops import copy as memcopy
from ops import sum as sum_op
from ops.base import OpContext
from runner.timing.clocks import CudaEventClock, L2Flusher
from runner.timing.cuda_device import CudaDevice
from runner.timing.device_plan import DeviceTimeOptions
from runner.timing.device_time import measure_device_time
from runner.timing.measurement import TimerPlan
from runner.timing.timer import LoopTimeOptions, measure

CASES = [
    ("add 1 elem in-place fp32", elementwise.build_add, (1,), torch.float32, {"inplace": True}),
    ("pointwise_chain [5] x500", pointwise_chain.build, (5,), torch.float32, {"iterations": 500}),
    ("batched_dot mul_sum 10000x1024", batched_dot.build, (10000, 1024), torch.float32,
     {"impl": "mul_sum"}),
    ("matmul bf16 4096^3", matmul.build, (4096, 4096, 4096), torch.bfloat16, {}),
    ("copy d2d 1 GiB fp32", memcopy.build, (268435456,), torch.float32, {"direction": "d2d"}),
]


#: Kernels of 3-50 µs, where the cold offset shows.
COLD_CASES = [
    ("add 1M fp32", elementwise.build_add, (1 << 20,), torch.float32, {}),
    ("sum transposed 2048^2 fp32", sum_op.build, (2048, 2048), torch.float32,
     {"layout": "transposed"}),
    ("matmul fp16 1001^3", matmul.build, (1001, 1001, 1001), torch.float16, {}),
    ("batched_dot einsum 10000x1024", batched_dot.build, (10000, 1024), torch.float32,
     {"impl": "einsum"}),
]


def event_loop(fn, n: int, flush=None, sync_each: bool = False, hold_s: float = 0.0,
               spin=None) -> float:
    """Median µs of ``n`` event-timed single calls.

    ``sync_each=False`` is do_bench's loop: every sample queued, one synchronisation at the
    end. ``sync_each=True`` is opsweep's: each sample waited for. ``hold_s`` holds the stream
    with a spin kernel so no sample waits on the host: before every sample (per-sample) or
    once before all of them (queued; it must outlast the host's enqueue of every sample)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    if hold_s and not sync_each:
        torch.cuda._sleep(spin.spin_cycles(hold_s))
    for i in range(n):
        if flush:
            flush()
        if hold_s and sync_each:
            torch.cuda._sleep(spin.spin_cycles(hold_s))
        starts[i].record()
        fn()
        ends[i].record()
        if sync_each:
            ends[i].synchronize()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def cold_offset(n: int = 200) -> list[dict]:
    """One row per COLD_CASES kernel: its median by every method (µs). With a flush (cold):
    opsweep's loop and device time, do_bench (median and mean), do_bench's loop and the same
    loop synchronised per sample. Without (warm), both loops held by a spin so that neither
    waits on the host: the queue depth is then the only difference."""
    from triton.testing import do_bench

    device = torch.device("cuda:0")
    plan = TimerPlan(warmup_calls=10, warmup_s=0.05, min_samples=20, max_samples=n,
                     target_rel=0.005, max_time_s=2.0)
    flush = L2Flusher(device)
    spin = CudaDevice(device)
    rows = []
    for name, builder, shape, dtype, params in COLD_CASES:
        generator = torch.Generator(device=device).manual_seed(0)
        ctx = OpContext(shape=shape, dtype=dtype, device=device, generator=generator)
        fn = builder(ctx, **params).fn
        for _ in range(10):
            fn()
        loop = measure(fn, plan, CudaEventClock(device), LoopTimeOptions(flush=flush))
        gpu = measure_device_time(fn, plan, loop, spin, DeviceTimeOptions(flush=flush))
        rows.append({
            "case": name,
            "opsweep_loop": loop.stats.median * 1e6,
            "opsweep_gpu": gpu.measurement.stats.median * 1e6 if gpu.measurement else None,
            "do_bench_median": do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3,
            "do_bench_mean": do_bench(fn, warmup=25, rep=100) * 1e3,
            "queued_flush": event_loop(fn, n, flush),
            "per_sample_flush": event_loop(fn, n, flush, sync_each=True),
            "queued_held": event_loop(fn, n, hold_s=n * 50e-6, spin=spin),
            "per_sample_held": event_loop(fn, n, sync_each=True, hold_s=50e-6, spin=spin),
        })
        del fn
        torch.cuda.empty_cache()
    return rows


def print_cold_offset(rows: list[dict]) -> None:
    keys = ["opsweep_loop", "opsweep_gpu", "do_bench_median", "do_bench_mean", "queued_flush",
            "per_sample_flush", "queued_held", "per_sample_held"]
    print("cold offset: median µs per call. *_flush: L2 flushed before every sample (cold); "
          "*_held: no flush, the stream held by a spin (warm). queued = do_bench's loop "
          "(one sync at the end); per_sample = a sync after every sample")
    print(f"{'case':30} " + " ".join(f"{k:>16}" for k in keys) + "  queued - per_sample")
    for row in rows:
        cells = " ".join(f"{row[k]:16.2f}" if row[k] is not None else f"{'-':>16}"
                         for k in keys)
        flushed = row["queued_flush"] - row["per_sample_flush"]
        held = row["queued_held"] - row["per_sample_held"]
        print(f"{row['case']:30} {cells}  cold {flushed:+.2f} / warm {held:+.2f}")


def main() -> None:
    if "--cold" in sys.argv[1:]:
        print_cold_offset(cold_offset())
        return
    from triton.testing import do_bench

    device = torch.device("cuda:0")
    plan = TimerPlan(warmup_calls=10, warmup_s=0.1, min_samples=20, max_samples=2000,
                     target_rel=0.005, max_time_s=3.0)
    print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    header = (f"{'case':34} {'opsweep µs':>11} {'do_bench µs':>12} {'tub µs':>10} "
              f"{'ops/db':>7} {'ops/tub':>8}")
    print(header)
    print("-" * len(header))
    for name, builder, shape, dtype, params in CASES:
        generator = torch.Generator(device=device).manual_seed(0)
        ctx = OpContext(shape=shape, dtype=dtype, device=device, generator=generator)
        fn = builder(ctx, **params).fn
        ours_us = measure(fn, plan, CudaEventClock(device)).stats.median * 1e6
        db_us = do_bench(fn, warmup=100, rep=1000, return_mode="median") * 1e3
        timer = tub.Timer(stmt="fn()", globals={"fn": fn})
        tub_us = statistics.median(timer.blocked_autorange(min_run_time=1.0).times) * 1e6
        print(f"{name:34} {ours_us:11.2f} {db_us:12.2f} {tub_us:10.2f} "
              f"{ours_us / db_us:7.3f} {ours_us / tub_us:8.3f}")
        del fn
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
