"""The columns of the passes a trial may run after its timed samples (``profile=true``,
``energy=true``: ``runner.execution.insight``). Kept apart from
:mod:`runner.storage.columns`, the one table of every column, which merges them in their
place."""

from __future__ import annotations

from runner.storage.arrow_names import ARROW_FLOAT as _F
from runner.storage.arrow_names import ARROW_INT as _I
from runner.storage.arrow_names import ARROW_STRING as _S

# profile=true (runner.execution.profiling): a torch.profiler pass after timing
PROFILE_COLUMNS: dict[str, tuple[str, str]] = {
    "trace_path": (_S, "Chrome/Perfetto trace of the profiled pass, relative to the sweep "
                       "folder (open in ui.perfetto.dev)"),
    "profile_calls": (_I, "calls in the profiled pass (the kernel columns are per call)"),
    "kernel_count": (_F, "kernels per call (profiled pass)"),
    "kernel_time_sum_us": (_F, "summed kernel duration per call, µs"),
    "memop_count": (_F, "memcpy/memset device activities per call"),
    "memop_time_sum_us": (_F, "summed memcpy/memset duration per call, µs"),
    "kernel_span_us": (_F, "first activity start to last end, per call, µs (device time "
                           "of the profiled pass)"),
    "gpu_idle_fraction": (_F, "share of the timed median per call with no kernel/memop "
                              "running: 1 − busy / median (launch gaps)"),
    "top_kernel": (_S, "name of the activity with the most time"),
    "top_kernel_share": (_F, "top_kernel's share of the device's busy time"),
    "top_kernels_json": (_S, "top 5 activities: name, count_per_call, time_us_per_call, "
                             "share (on CPU: aten operators by self CPU time)"),
    "profile_reason": (_S, "why the kernel columns are null (e.g. cpu)"),
}

# energy=true: NVML over the device time's own samples (runner.execution.energy_samples),
# else over a back-to-back window after timing (runner.execution.energy)
ENERGY_COLUMNS: dict[str, tuple[str, str]] = {
    "energy_method": (_S, "samples (read over the device time's own samples) | graph (the "
                          "replay method, as in gpu_time_method) | eager | unavailable"),
    "energy_reason": (_S, "why the energy columns are null, or why the window ran eagerly"),
    "energy_counter_s": (_F, "seconds between the first and last counter step used"),
    "energy_counter_steps": (_I, "NVML energy-counter steps in the window (~10/s)"),
    "energy_calls": (_I, "calls run in the window"),
    "energy_busy_fraction": (_F, "device time of the window's chunks over its wall time "
                                 "(< 0.99: idle gaps inside the window)"),
    "energy_time_per_call_us": (_F, "time per call during the window, µs (sustained clocks)"),
    "energy_per_call_mJ": (_F, "board energy per call, mJ (avg_power_W × gpu_time_us "
                               "where there is one, else the window's time per call)"),
    "energy_above_idle_per_call_mJ": (_F, "(avg_power_W − idle_power_W) × the same time per "
                                          "call, mJ"),
    "avg_power_W": (_F, "board power over the window, from the energy counter, W"),
    "idle_power_W": (_F, "board power with no work, just before the window, W"),
    "power_instant_median_W": (_F, "median of NVML_FI_DEV_POWER_INSTANT samples in the window"),
    "power_instant_max_W": (_F, "largest instantaneous power sample in the window, W"),
    "tflops_per_joule": (_F, "TFLOP per joule of board energy"),
    "gb_per_joule": (_F, "GB (1e9 bytes) moved per joule of board energy"),
    "energy_sm_clock_mhz_median": (_F, "median SM clock over the window, MHz"),
    "energy_sm_clock_mhz_min": (_F, "lowest SM clock seen in the window, MHz"),
    "energy_mem_clock_mhz_median": (_F, "median memory clock over the window, MHz"),
    "energy_temperature_c_start": (_I, "GPU temperature at the window's start, °C"),
    "energy_temperature_c_end": (_I, "GPU temperature at the window's end, °C"),
    "energy_throttle_reasons": (_S, "every clock-event (throttle) reason seen in the window"),
}
