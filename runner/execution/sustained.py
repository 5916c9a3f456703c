"""Whether a row's device time is the sustained number it claims, and the heat it began in.

The device time is what the GPU sustains back to back (docs/timing.md#headroom-after-a-gap-any-gpu).
The settle rule makes that so wherever it can tell (``runner.timing.settle``), but a row must
never claim a sustained number it did not measure: these columns say what the trial before
left the GPU in and the clock capped work last sustained there, and flag a device time that
may be a burst number after all, with the reason:

* its samples were power-capped, yet the board's averaged power (read once per sampled chunk)
  stayed well under its limit across them (:data:`HEADROOM_SHARE`): the controller still had
  headroom to give, or the board ran the op at a clock it does not hold, as after
  an idle gap (on an H100, bf16 4096³ 0.5 s after bf16 8192³ drew 0.58-0.92 of the limit
  over its first second and ran 4-10% fast);
* its samples were power-capped and its warm-up hit ``timer.settle_max_s`` before it settled:
  what was still moving is in ``settle_reason``;
* its samples were power-capped and it reads well faster than the loop time taken right
  after it on the same op (:data:`LOOP_GAP_SHARE`), where the GPU, not the host, sets the
  loop's pace (:data:`LOOP_CHECK_MIN_S`): the device's clock moved between the two, and the
  later, slower one is nearer what a long job sustains. On an H100 whose capped samples ran
  at 1500-1750 MHz at the power limit, the loop time right after agreed with a 15 s
  back-to-back reference within 3% where the device time read 8-15% fast;
* it reads faster than the same op's burst time (``timer.burst=true``), which runs at the
  boost clock by construction;
* the other way round: its samples were not power-capped, yet the board's averaged power
  stood at its limit across them (:data:`HELD_SHARE`, the work before's), and it reads slower
  than the loop time right after it (:data:`LOOP_SLOWER_SHARE`). The controller still held
  the clock down for that work: on four H200s an fp32 linear (32768×4096→4096, 85-90% of the
  limit on its own) read 22.2 ms at 1902 MHz right after capped work and 21.4 ms at 1979 MHz
  elsewhere, its loop time 21.6 ms either way;
* its warm-up called it light, and its samples then ran more than
  ``runner.execution.measured.CLOCK_MOVED_SHARE`` below the clock the warm-up settled at: the
  power cap took the clock during the samples (:func:`fell_under_samples`). On four H200s
  bf16 2048³ right after tf32 2048³ settled at 1694 MHz in 90 ms, sampled at 1610, and read
  3.2% faster than the same trial run on one GPU;
* its warm-up called it light, yet its samples ran held by the power cap: below
  ``runner.timing.settle.HELD_DOWN_SHARE`` of the maximum clock with the board's averaged
  power at its limit (:func:`held_at_the_limit`), on an op of :data:`HELD_FLAG_MIN_S` or
  more. The controller sets such an op's clock, and a warm-up of a tenth of a second after
  capped work may end before it settles: on a 4×H200 host sdpa fp16 8×16×1024×64 right
  after capped work, called light in 0.09 s, ran at 1706 MHz at 97% of the limit and read
  4.2% faster than the same trial called capped on one GPU (1624 MHz, 1.2 s of warm-up);
* the GPU was lowering its clock for its temperature as the trial's timing ended (NVML's
  :data:`THERMAL_REASONS`, read right after the loop time that follows the samples): its
  clock then follows how hot the board is, which a longer job makes hotter still. On a poorly
  cooled H100 at 86-89 °C, 15 of 48 trials (the 24-trial sweep, twice) read 4-16% faster
  than 15 s of each op back to back, fp32 too, with the power at 50-85% of its limit: neither
  the settle rule nor the power flags could see it
  (docs/timing.md#a-gpu-at-its-thermal-limit).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from runner.execution.measured import CLOCK_MOVED_SHARE
from runner.timing.measurement import Measurement
from runner.timing.settle import HELD_DOWN_SHARE

#: A power-capped op's samples drawing less than this share of the power limit (NVML's
#: one-second average) ran while the controller still had headroom. Settled capped ops draw
#: 0.96-1.0 of it.
HEADROOM_SHARE = 0.93
#: A power-capped device time this much faster than the loop time right after it is flagged.
#: Settled capped rows read within 7% of their loop time even on an H100 whose clock swung
#: ±5% under load; the fast state read 8-21% apart.
LOOP_GAP_SHARE = 0.08
#: An uncapped op's samples at this averaged share of the power limit or more ran while the
#: work before still held the clock down (uncapped ops on their own drew up to 0.96 of it).
HELD_SHARE = 0.97
#: ... and a device time this much slower than the loop time right after it is flagged: on
#: an H200 uncapped GPU-paced rows read 0.79-1.01 of their loop time, except those held
#: down (1.016-1.032).
LOOP_SLOWER_SHARE = 0.015
#: Only a call at least this long (s) is compared with its loop time: a shorter one's loop is
#: paced by the host's launches (a bf16 1024³ matmul: 5.7 µs of GPU, 15.9 µs a loop call).
LOOP_CHECK_MIN_S = 20e-6
#: Light samples held by the power cap (:func:`held_at_the_limit`) are flagged from this time
#: per call (s): on five H200s bf16, fp16 and tf32 1024³ (5-13 µs) so held right after
#: capped work read within 3% of 15 s of each op back to back (18 rows of the timing
#: gates); sdpa 8×16×1024×64 (87 µs) so held read up to 4.2% faster than the same trial
#: called capped (7 rows of two 4×H200 hosts' sweeps). No op between 13 and 87 µs has been
#: seen so held: the bound sits at the loop witness's (:data:`LOOP_CHECK_MIN_S`).
HELD_FLAG_MIN_S = LOOP_CHECK_MIN_S
#: NVML's clock-event reasons for a clock lowered for the GPU's temperature, not its power.
THERMAL_REASONS = ("SwThermalSlowdown", "HwThermalSlowdown")


def held_at_the_limit(device: Measurement, max_clock_mhz: float | None) -> bool:
    """Whether samples the settle rule did not call power-capped still ran held by the power
    cap: the board's averaged power at the limit (:data:`HEADROOM_SHARE`) and the clock below
    ``runner.timing.settle.HELD_DOWN_SHARE`` of ``max_clock_mhz``. The device is then as hot
    as after capped work: the controller has no headroom left to give the next trial.
    On four H200s a bf16 1024³ matmul ran at 1717 MHz and 97% of the limit, judged light;
    the fp16 1024³ after it, judged capped, warmed up as from cold for 2.7 s. Power alone
    is not heat: an fp32 matmul at full clock draws as much (``runner.timing.heat.heat_left``).
    The average is NVML's one-second one, so after a light trial shorter than that it is
    partly the work before's. That is the quantity the controller holds to the limit: while
    it stands there, the next capped op gets no headroom, whoever drew it. A light trial long
    enough to let it fall below :data:`HEADROOM_SHARE` leaves the device cold."""
    share = device.power_avg_share
    if device.power_capped or share is None or share < HEADROOM_SHARE:
        return False
    return bool(device.clock_mhz and max_clock_mhz) and (
        statistics.median(device.clock_mhz) < HELD_DOWN_SHARE * max_clock_mhz)


def fell_under_samples(device: Measurement) -> bool:
    """Whether samples of an op the warm-up called light (not power-capped) ran more than
    ``CLOCK_MOVED_SHARE`` below the clock that warm-up settled at."""
    settled = device.settled_clock_mhz
    return (device.power_capped is False and bool(settled and device.clock_mhz)
            and statistics.median(device.clock_mhz) < (1 - CLOCK_MOVED_SHARE) * settled)


def drew_headroom(device: Measurement) -> bool:
    """Whether power-capped samples drew under :data:`HEADROOM_SHARE` of the power limit:
    the controller still had headroom (False where power was not read)."""
    share = device.power_avg_share
    return bool(device.power_capped) and share is not None and share < HEADROOM_SHARE


def sustained_columns(times: Any, burst: Measurement | None,
                      gpu_after: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``heat_before``, ``sm_clock_mhz_capped_sustained``, ``power_share_samples`` and
    ``sustained_flag`` of a trial whose times are ``times``
    (``runner.execution.timed.TrialTimes``); ``gpu_after``: the GPU's state read right after
    them (``runner.execution.measured.clock_columns``)."""
    heat, device = times.heat_before, times.device.measurement
    return {"heat_before": None if heat is None else heat.label,
            "sm_clock_mhz_capped_sustained": None if heat is None else heat.sustained_mhz,
            "power_share_samples": None if device is None else device.power_avg_share,
            "sustained_flag": sustained_flag(device, burst, times.loop, gpu_after,
                                             times.max_clock_mhz)}


def sustained_flag(device: Measurement | None, burst: Measurement | None,
                   loop: Measurement | None = None,
                   gpu_after: Mapping[str, Any] | None = None,
                   max_clock_mhz: float | None = None) -> str | None:
    """Why the device time ``device`` may not be what the GPU sustains (mostly: may read
    faster), or None.
    ``burst``: the same op's burst time (None: not taken); ``loop``: its loop time, taken
    right after the device time (None: not taken); ``gpu_after``: the ``*_timed`` columns;
    ``max_clock_mhz``: the GPU's maximum SM clock (None: not read)."""
    if device is None:
        return None
    reasons = [] if gpu_after is None else thermal_reasons(gpu_after)
    if (device.power_capped is False and held_at_the_limit(device, max_clock_mhz)
            and device.time_s >= HELD_FLAG_MIN_S):
        reasons.append(held_light_reason(device, max_clock_mhz, gpu_after or {}))
    if device.power_capped and device.settled is False:
        reasons.append("its power-capped warm-up hit timer.settle_max_s before it settled "
                       f"({device.settle_reason}): it may not be the sustained number")
    if drew_headroom(device):
        reasons.append(f"its power-capped samples drew {device.power_avg_share:.0%} of the "
                       "power limit (one-second average): the controller still had headroom, "
                       "so it may read faster than a job running it back to back")
    if fell_under_samples(device):
        reasons.append(f"its warm-up called it light at {device.settled_clock_mhz:.0f} MHz, "
                       f"then its samples ran at {statistics.median(device.clock_mhz):.0f} "
                       "MHz: the power cap took the clock during the samples, so it may read "
                       "faster than a job running it back to back")
    device_s = device.time_s  # the row's number (gpu_time_us)
    paced_by_gpu = device.power_capped and device_s >= LOOP_CHECK_MIN_S
    if (paced_by_gpu and loop is not None and loop.samples_s
            and loop.stats.median > (1 + LOOP_GAP_SHARE) * device_s):
        loop_s = loop.stats.median
        reasons.append(f"it reads {device_s * 1e6:.4g} µs, {1 - device_s / loop_s:.0%} faster "
                       f"than the loop time right after it ({loop_s * 1e6:.4g} µs) on an op "
                       "the GPU paces: the clock moved between the two, so it may not be the "
                       "sustained number")
    held = (device.power_capped is False and device.power_avg_share is not None
            and device.power_avg_share >= HELD_SHARE and device_s >= LOOP_CHECK_MIN_S)
    if (held and loop is not None and loop.samples_s
            and device_s > (1 + LOOP_SLOWER_SHARE) * loop.stats.median):
        loop_s = loop.stats.median
        reasons.append(f"it reads {device_s * 1e6:.4g} µs, {device_s / loop_s - 1:.1%} slower "
                       f"than the loop time right after it ({loop_s * 1e6:.4g} µs), not "
                       "power-capped itself while the board's averaged power stood at "
                       f"{device.power_avg_share:.0%} of the limit: the work before still held "
                       "the clock down, and a job running it back to back runs it faster")
    if burst is not None and device_s < burst.stats.ci_low:
        reasons.append(f"it reads {device_s * 1e6:.4g} µs, faster than its own "
                       f"burst time ({burst.stats.median * 1e6:.4g} µs, CI low "
                       f"{burst.stats.ci_low * 1e6:.4g}): not a sustained number")
    return "; ".join(reasons) or None


def held_light_reason(device: Measurement, max_clock_mhz: float,
                      gpu_after: Mapping[str, Any]) -> str:
    """The flag's reason for light samples that ran held by the power cap
    (:func:`held_at_the_limit`): their clock against the maximum, the power they drew and
    the temperature as the timing ended (where read)."""
    clock_mhz = statistics.median(device.clock_mhz)
    temperature_c = gpu_after.get("temperature_c_timed")
    at = "" if temperature_c is None else f", {temperature_c:.0f} °C"
    return (f"its warm-up called it light, yet its samples ran held by the power cap "
            f"({clock_mhz:.0f} MHz, {clock_mhz / max_clock_mhz:.0%} of the maximum, at "
            f"{device.power_avg_share:.0%} of the power limit{at}): the controller sets its "
            f"clock, and a warm-up of {device.warmup_s:.2g} s may end before it settles, so a "
            "job running it back to back may read it a few percent apart")


def thermal_reasons(gpu_after: Mapping[str, Any]) -> list[str]:
    """The flag's reason where the GPU was lowering its clock for its temperature as the
    trial's timing ended (:data:`THERMAL_REASONS` in ``throttle_reasons_timed``), else none."""
    active = (gpu_after.get("throttle_reasons_timed") or "").split(",")
    thermal = [reason for reason in THERMAL_REASONS if reason in active]
    if not thermal:
        return []
    temperature_c = gpu_after.get("temperature_c_timed")
    at = "" if temperature_c is None else f" at {temperature_c:.0f} °C"
    return [f"the GPU was lowering its clock for its temperature as its timing ended "
            f"({', '.join(thermal)}{at}): its clock follows how hot the board is, and a job "
            "running it back to back heats the board further and reads slower; compare it "
            "only with rows at the same temperature_c_timed"]
