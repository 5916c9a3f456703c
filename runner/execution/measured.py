"""A trial's measurements as result columns: the loop time, the device time, throughput, and
the clock the samples ran at.

One function per group of columns, each deriving everything from the frozen measurement (raw
samples in, statistics out); the column names and types are declared in
:mod:`runner.storage.columns`.
"""

from __future__ import annotations

from typing import Any

from runner.execution.environment import gpu_state
from runner.storage import columns as result_columns
from runner.timing.device_time import DeviceTime
from runner.timing.timer import SETTLED_WARMUP_S, Measurement, TimerPlan


def clock_columns(device: str, plan: TimerPlan) -> dict[str, Any]:
    """The GPU's state right after the last loop-time sample, and a note when the samples'
    clock was set by the power cap.

    Why (``docs/insight.md``): a compute-bound op at the power cap (an H200 bf16
    8192³ matmul) runs at whatever clock the power controller has reached, 1980 MHz in the
    first tenths of a second and ~1500 MHz once capped. With a short warm-up the samples land
    on either side of the drop, and two processes read 1.41 or 1.60 ms. The row says so;
    ``timer=sustained`` (1.5 s warm-up) samples the capped, repeatable state.
    """
    state = gpu_state(device)
    out: dict[str, Any] = {f"{k}_timed": state[k]
                           for k in ("sm_clock_mhz", "power_w", "throttle_reasons")}
    capped = "SwPowerCap" in (state.get("throttle_reasons") or "")
    out["clock_note"] = None
    if capped and plan.warmup_s < SETTLED_WARMUP_S:
        out["clock_note"] = (f"samples ended at the power cap (SwPowerCap, "
                             f"{state.get('sm_clock_mhz')} MHz) after a {plan.warmup_s:g} s "
                             "warm-up: the clock may still have been falling; "
                             f"timer=sustained (warm-up >= {SETTLED_WARMUP_S:g} s) settles it")
    return out


def timing_columns(measurement: Measurement | None, ops_per_sample: int,
                   time: str = "loop") -> dict[str, Any]:
    """One time's statistics as columns (``runner.storage.columns.timing_columns``), in µs.
    Raw samples kept; the rest is derived. ``None``: every column null."""
    if time not in result_columns.TIMES:
        raise ValueError(f"time={time!r}: expected one of {', '.join(result_columns.TIMES)}")
    if measurement is None:
        return dict.fromkeys(result_columns.timing_columns(time))
    stats = measurement.stats
    us = 1e6
    values = {
        "n_samples": stats.n, "calls_per_sample": measurement.calls_per_sample,
        "warmup_calls": measurement.warmup_calls, "warmup_time_s": measurement.warmup_s,
        "stop_reason": measurement.stop_reason,
        "samples_us": [s * us for s in measurement.samples_s],
        "median_us": stats.median * us, "mean_us": stats.mean * us, "std_us": stats.std * us,
        "min_us": stats.min * us, "max_us": stats.max * us, "q25_us": stats.q25 * us,
        "q75_us": stats.q75 * us, "ci_low_us": stats.ci_low * us,
        "ci_high_us": stats.ci_high * us, "ci_rel_halfwidth": stats.ci_rel_halfwidth,
        "noisy": measurement.noisy, "per_op_us": stats.median * us / ops_per_sample,
    }
    return {result_columns.time_column(time, stat): value for stat, value in values.items()}


def device_time_columns(device_time: DeviceTime, ops_per_sample: int,
                        time_per_op_us: float) -> dict[str, Any]:
    """The device time's statistics, how it was taken, and the loop/device ratio."""
    out = timing_columns(device_time.measurement, ops_per_sample, "gpu")
    gpu_us = out["gpu_time_per_op_us"]
    out.update({"gpu_time_method": device_time.method, "gpu_time_reason": device_time.reason,
                "host_overhead_ratio": time_per_op_us / gpu_us if gpu_us else None})
    return out


def throughput_columns(flops: float | None, bytes_moved: float | None,
                       median_s: float) -> dict[str, Any]:
    """TFLOP/s, GB/s (1e9 bytes/s) and arithmetic intensity (FLOP/byte) at the median."""
    return {
        "flops": flops, "bytes_moved": bytes_moved,
        "tflops": flops / median_s / 1e12 if flops and median_s > 0 else None,
        "gbps": bytes_moved / median_s / 1e9 if bytes_moved and median_s > 0 else None,
        "arithmetic_intensity": flops / bytes_moved if flops and bytes_moved else None,
    }
