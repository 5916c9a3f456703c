"""A trial's measurements as result columns: the loop time, the device time, the burst time,
throughput, the clock the samples ran at, and the check that the derived columns agree.

One function per group of columns, each deriving everything from the frozen measurement (raw
samples in, statistics out); the column names and types are declared in
:mod:`runner.storage.columns`.
"""

from __future__ import annotations

import statistics
from typing import Any

from runner.execution.environment import gpu_state
from runner.storage import columns as result_columns
from runner.timing.device_time import DeviceTime
from runner.timing.measurement import Measurement


def clock_columns(device: str) -> dict[str, Any]:
    """The GPU's state right after the last loop-time sample."""
    state = gpu_state(device)
    return {f"{k}_timed": state[k]
            for k in ("sm_clock_mhz", "power_w", "temperature_c", "throttle_reasons")}


#: The samples' SM clock is worth a note when it moved by more than this share during the
#: samples (max − min over median), or sits this far from the clock the warm-up settled at.
CLOCK_MOVED_SHARE = 0.03


def samples_clock_columns(measurement: Measurement | None) -> dict[str, Any]:
    """The SM clock during the device-time samples, and ``clock_note`` only when it moved.

    A compute-bound op near the power cap runs at whatever clock the power controller has
    reached; the settled warm-up samples the capped, repeatable state, so a note here means
    the state changed under the samples (another process's load, a thermal limit), not that
    the op is power-capped, which is normal and not worth a warning."""
    out: dict[str, Any] = {"sm_clock_mhz_samples_median": None, "sm_clock_mhz_samples_min": None,
                           "clock_note": None}
    clocks = list(measurement.clock_mhz) if measurement is not None else []
    if not clocks:
        return out
    median = statistics.median(clocks)
    out.update(sm_clock_mhz_samples_median=median, sm_clock_mhz_samples_min=min(clocks))
    notes = []
    # A move is a drift between the first and the last third of the samples. Under the power
    # cap the clock swings ±2-4% from sample to sample around a steady level (an H200's bmm
    # read 1272-1381 MHz over one second of samples), which is the sustained state, not news.
    third = max(1, len(clocks) // 3)
    first, last = statistics.median(clocks[:third]), statistics.median(clocks[-third:])
    if abs(last / first - 1) > CLOCK_MOVED_SHARE:
        notes.append(f"the SM clock moved from {first:.0f} to {last:.0f} MHz during the "
                     "samples")
    settled = measurement.settled_clock_mhz
    if settled and abs(median / settled - 1) > CLOCK_MOVED_SHARE:
        notes.append(f"the samples ran at {median:.0f} MHz, the warm-up settled at "
                     f"{settled:.0f} MHz")
    if notes:
        out["clock_note"] = (f"{'; '.join(notes)} (more than {CLOCK_MOVED_SHARE:.0%}): the "
                             "device's state changed under the samples")
    return out


def settle_columns(loop: Measurement, device: Measurement | None) -> dict[str, Any]:
    """How long each warm-up ran to settle, and whether it settled or hit the cap."""
    capped = [m.power_capped for m in (device, loop) if m is not None
              and m.power_capped is not None]
    return {"warmup_settled": loop.settled, "power_capped": capped[0] if capped else None,
            "gpu_time_settle_s": device.warmup_s if device is not None else None,
            "gpu_time_settled": device.settled if device is not None else None,
            "gpu_time_settled_samples": device.settled_samples if device is not None else None,
            "settle_reason": "; ".join(
                f"{name}: {m.settle_reason}" for name, m in (("loop", loop), ("gpu", device))
                if m is not None and m.settle_reason) or None}


def cost_columns(times: Any, accuracy_s: float) -> dict[str, Any]:
    """Where the trial's seconds went (``runner.storage.columns.COST_COLUMNS``; ``times``: a
    ``runner.execution.timed.TrialTimes``): settling is each warm-up's own wall time, the
    loop and the device time are the rest of theirs. ``cost_other_s`` is what is left of the
    whole trial, filled in by ``runner.execution.trial.run_trial``."""
    device = times.device.measurement
    device_settle_s = device.warmup_s if device is not None else 0.0
    # A block the noise rules set aside (runner.timing.spread) is counted as warm-up in
    # ``warmup_time_s``, but it was sampling: its seconds are the loop time's, not settling.
    loop_settle_s = times.loop.warmup_s - times.loop.set_aside_s
    return {"cost_settle_s": loop_settle_s + device_settle_s,
            "cost_loop_s": max(0.0, times.loop_s - loop_settle_s),
            "cost_device_s": max(0.0, times.device_s - device_settle_s),
            "cost_accuracy_s": accuracy_s}


def burst_columns(burst: Measurement | None) -> dict[str, Any]:
    """The burst time (gapped samples at the boost clock): median and its CI, µs per call."""
    if burst is None:
        return dict.fromkeys(("gpu_burst_time_median_us", "gpu_burst_time_ci_low_us",
                              "gpu_burst_time_ci_high_us"))
    stats = burst.stats
    return {"gpu_burst_time_median_us": stats.median * 1e6,
            "gpu_burst_time_ci_low_us": stats.ci_low * 1e6,
            "gpu_burst_time_ci_high_us": stats.ci_high * 1e6}


#: ``avg_power_W`` may exceed the board's power limit by this share (sensor and counter
#: tolerance) before the row is flagged: above it the power and the time come from different
#: moments.
POWER_LIMIT_TOL = 1.03
#: ``energy_time_per_call_us`` and ``gpu_time_us`` may differ by this share.
ENERGY_TIME_TOL = 0.03


def consistency_flag(row: dict[str, Any]) -> str | None:
    """Why the row's derived columns disagree with each other, or None when they agree.

    Every column derived from a time (TFLOP/s, GB/s, energy per call, the roofline) must be
    about one moment: the energy window runs back to back like the steady-state device time,
    so its time per call must match the device time and its power must fit under the cap."""
    flags = []
    power, limit = row.get("avg_power_W"), row.get("power_limit_w")
    if power is not None and limit and power > POWER_LIMIT_TOL * limit:
        flags.append(f"avg_power_W {power:.0f} W is above {POWER_LIMIT_TOL:g} × the "
                     f"{limit:.0f} W power limit")
    energy_us, gpu_us = row.get("energy_time_per_call_us"), row.get("gpu_time_us")
    if energy_us and gpu_us and abs(energy_us / gpu_us - 1) > ENERGY_TIME_TOL:
        flags.append(f"energy_time_per_call_us {energy_us:.4g} and gpu_time_us "
                     f"{gpu_us:.4g} differ by {100 * (energy_us / gpu_us - 1):+.1f}% "
                     f"(more than {ENERGY_TIME_TOL:.0%})")
    return "; ".join(flags) or None


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
        "noisy": measurement.noisy, "noisy_reason": measurement.noisy_reason,
        "per_op_us": measurement.time_s * us / ops_per_sample,
    }
    return {result_columns.time_column(time, stat): value for stat, value in values.items()}


def device_time_columns(device_time: DeviceTime, ops_per_sample: int,
                        time_per_op_us: float) -> dict[str, Any]:
    """The device time's statistics, its number (``gpu_time_us``: the median, or the mean of
    a power-capped series, ``runner.timing.measurement.Measurement.statistic``), how it was
    taken, and the loop/device ratio."""
    out = timing_columns(device_time.measurement, ops_per_sample, "gpu")
    measured = device_time.measurement
    gpu_us = out["gpu_time_per_op_us"]
    out.update({"gpu_time_us": None if measured is None else measured.time_s * 1e6,
                "gpu_time_statistic": None if measured is None else measured.statistic,
                "gpu_time_method": device_time.method, "gpu_time_reason": device_time.reason,
                "host_overhead_ratio": time_per_op_us / gpu_us if gpu_us else None})
    return out


def throughput_columns(flops: float | None, bytes_moved: float | None,
                       per_call_s: float) -> dict[str, Any]:
    """TFLOP/s, GB/s (1e9 bytes/s) and arithmetic intensity (FLOP/byte) at ``per_call_s``
    (the measurement's number, ``Measurement.time_s``)."""
    return {
        "flops": flops, "bytes_moved": bytes_moved,
        "tflops": flops / per_call_s / 1e12 if flops and per_call_s > 0 else None,
        "gbps": bytes_moved / per_call_s / 1e9 if bytes_moved and per_call_s > 0 else None,
        "arithmetic_intensity": flops / bytes_moved if flops and bytes_moved else None,
    }
