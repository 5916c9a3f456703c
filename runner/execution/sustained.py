"""Whether a row's device time is the sustained number it claims, and the heat it began in.

The device time is what the GPU sustains back to back (docs/timing.md#sustained-or-burst).
The settle rule makes that so wherever it can tell (``runner.timing.settle``), but a row must
never claim a sustained number it did not measure: these columns say what the trial before
left the GPU in, the clock capped work sustained there, and flag a device time that may be
a burst number after all, with the reason:

* its samples were power-capped, yet ran above the clock capped work had just sustained on
  the same GPU (``runner.timing.settle.SUSTAINED_CLOCK_TOL``): the controller still had
  headroom to give (on an H100, bf16 4096³ after bf16 8192³ ran at 1575 MHz against 1405,
  and read 11% fast);
* it reads faster than the same op's burst time (``timer.burst=true``), which runs at the
  boost clock by construction.
"""

from __future__ import annotations

import statistics
from typing import Any

from runner.timing.measurement import Measurement
from runner.timing.settle import CappedFloor


def sustained_columns(times: Any, burst: Measurement | None) -> dict[str, Any]:
    """``heat_before``, ``sm_clock_mhz_capped_sustained`` and ``sustained_flag`` of a trial
    whose times are ``times`` (``runner.execution.timed.TrialTimes``)."""
    heat = times.heat_before
    return {"heat_before": None if heat is None else heat.label,
            "sm_clock_mhz_capped_sustained": None if heat is None else heat.sustained_mhz,
            "sustained_flag": sustained_flag(times.device.measurement, burst,
                                             None if heat is None else heat.sustained_mhz)}


def sustained_flag(device: Measurement | None, burst: Measurement | None,
                   sustained_mhz: float | None) -> str | None:
    """Why the device time ``device`` may read faster than what the GPU sustains, or None."""
    if device is None:
        return None
    reasons = []
    clocks = list(device.clock_mhz)
    if device.power_capped and clocks:
        clock = statistics.median(clocks)
        if CappedFloor(sustained_mhz=sustained_mhz).above_sustained(clock):
            reasons.append(f"its power-capped samples ran at {clock:.0f} MHz, above the "
                           f"{sustained_mhz:.0f} MHz capped work had just sustained on this "
                           "GPU: it may read faster than a job running it back to back")
    if burst is not None and device.stats.median < burst.stats.ci_low:
        reasons.append(f"it reads {device.stats.median * 1e6:.4g} µs, faster than its own "
                       f"burst time ({burst.stats.median * 1e6:.4g} µs, CI low "
                       f"{burst.stats.ci_low * 1e6:.4g}): not a sustained number")
    return "; ".join(reasons) or None
