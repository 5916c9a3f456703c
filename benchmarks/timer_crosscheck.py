"""Cross-check opsweep's timer against triton.testing.do_bench and torch.utils.benchmark.

    python benchmarks/timer_crosscheck.py            # on a CUDA machine

Builds a few ops with opsweep's builders and times the same zero-argument callable three
ways, in one process, back to back. If opsweep's median differs from both references by more
than their mutual spread, the timer is wrong. Prints one table: median µs per tool and the
ratios opsweep/do_bench and opsweep/torch.utils.benchmark.

Expected differences, by design: do_bench zeroes a 256 MB buffer before every call, so short
ops run cold and the host gets a head start (launch overhead hidden); torch.utils.benchmark
synchronises around blocks of calls with a host clock, so it includes one sync per block.
"""

from __future__ import annotations

import statistics

import torch
import torch.utils.benchmark as tub

from ops import batched_dot, elementwise, matmul, memcopy, pointwise_chain
from ops.base import OpContext
from runner.timing.timer import CudaEventClock, TimerPlan, measure

CASES = [
    ("add 1 elem in-place fp32", elementwise.build_add, (1,), torch.float32, {"inplace": True}),
    ("pointwise_chain [5] x500", pointwise_chain.build, (5,), torch.float32, {"iterations": 500}),
    ("batched_dot mul_sum 10000x1024", batched_dot.build, (10000, 1024), torch.float32,
     {"impl": "mul_sum"}),
    ("matmul bf16 4096^3", matmul.build, (4096, 4096, 4096), torch.bfloat16, {}),
    ("copy d2d 1 GiB fp32", memcopy.build, (268435456,), torch.float32, {"direction": "d2d"}),
]


def main() -> None:
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
