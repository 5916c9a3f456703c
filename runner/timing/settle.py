"""When a warm-up is over: the settle rule, a pure function over a series of samples.

A compute-bound op near the board's power cap (a bf16 8192³ matmul on an H200, ~690 W of
700) starts at the boost clock (1980 MHz) and is pulled towards ~1450 MHz by the power
controller within a second or two; a sample taken in that second reads up to 20% faster than
what a job running the op back to back sustains. A small or memory-bound op draws far less
power and is at its steady speed after its first calls. A fixed warm-up is either too short
for the first or a waste for the second, so the warm-up runs until the series says it is over:

*settled* means the per-call time shows no trend and the SM clock (where it can be read) has
stopped moving. Both are judged on two windows of the series: the last quarter of the
elapsed time against the quarter before it. The power controller is slow: an op drawing near
the board's limit still runs flat at the boost clock for its first few hundred milliseconds
(an H200 bmm read 34 µs there, 39.6 µs sustained), so a power-capped series (:func:`capped`)
is not settled before ``min_capped_s``: :data:`CAPPED_MIN_S` from cold, less when earlier
work left the device hot (``runner.timing.heat``: settling is paid once per heat) or the
clock is held only lightly (:data:`BAND_CAPPED_MIN_S`).
Comparing quarters of the *elapsed* time (not a fixed span) makes the test more sensitive
the longer the fall lasts, so a slow tail is not mistaken for a plateau, while an op that is
flat from the start, far below the power limit, settles as soon as the minimum warm-up is
over. ``cap_s`` bounds it; hitting the cap is recorded, never hidden.

Everything is injected (the work, the wall clock, the clock reader), so tests drive the rule
with fake clocks.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runner.timing.series import OwnPower, Point, Reading, windows
from runner.timing.stats import median_ci_rel_halfwidth

#: Medians of the two windows may differ by this share and still be "no trend".
TIME_TOL = 0.01
#: The SM clock may move by this share between the two windows and still be "stopped
#: moving" (NVML reports it in ~15 MHz bins: 1% of 1980 MHz is 20 MHz).
CLOCK_TOL = 0.01
#: Seconds between two reads of the SM clock (tens of µs each) and two judgements.
CLOCK_READ_S = JUDGE_EVERY_S = 0.005
#: Board power, as a share of its limit, from which the controller pulls the clock down (an
#: H200 ran capped bmm, linear, matmuls at 671-705 W of 700; a 2048² sum at 274 W).
POWER_NEAR_CAP = 0.9
#: An effective SM clock (``runner.timing.clock_probe``) below this share of the GPU's maximum
#: means the power controller is holding the SMs down: the op is power-capped. A memory-bound
#: add drawing 660 W of 700 ran at 1973 of 1980 MHz; every compute-bound op near the cap ran
#: below 1750 MHz within its first milliseconds, while NVML still reported 1980.
HELD_DOWN_SHARE = 0.95
#: Shortest warm-up (s) of a power-capped series. The controller keeps moving the clock for
#: seconds: on an H200, tf32 4096³ read 400 µs for 1.5 s, dipped to 424 µs, and held 414 µs
#: from 2 s on; a fp16 bmm slid from 37.5 to 39.3-39.9 µs over 3 s (benchmarks/power_trace.py).
CAPPED_MIN_S = 2.5
#: Shortest warm-up (s) of a capped series held only lightly (its clock in the band from
#: :data:`DEEP_HELD_SHARE` to :data:`HELD_DOWN_SHARE`), from cold too: on four H200s tf32,
#: bf16 and fp16 1024³ ran at 1717-1832 MHz of 1980 and read the same within 1% whether
#: called capped (2.6-2.8 s of warm-up from cold) or light (0.08 s); an H100's bf16 1024³
#: read within 2% of 15 s back to back after 0.09 s and 1.6 s. Below the band: the full minimum.
BAND_CAPPED_MIN_S = 1.0
#: A series whose clock runs between :data:`DEEP_HELD_SHARE` and :data:`HELD_DOWN_SHARE` is
#: watched this long (s) before it may settle: long enough for the cap to show (tf32 2048³
#: ran at 1750 MHz for 60 ms, then at 1550), short enough that a light load in the band (an
#: H100's small matmuls at 1850-1890 of 1980 MHz) settles within 0.1 s.
BAND_WATCH_S = 0.075
#: Below this share of the maximum the clock is held down by the power cap, whatever else
#: is seen (capped ops run at 1270-1550 MHz of 1980). Between it and :data:`HELD_DOWN_SHARE`
#: light loads run too, flat (an H200's 2.6-13 µs matmuls at 1750-1830 MHz and ~150 W): there
#: the series is capped only while its clock falls from its first clocks
#: (:data:`CLOCK_FALL_SHARE`) or the board draws :data:`HELD_POWER_SHARE` of its limit.
DEEP_HELD_SHARE = 0.85
#: A clock this share below the series' first clocks is being pulled down.
CLOCK_FALL_SHARE = 0.03
#: In that band, this share of the limit (NVML's instantaneous power) is the cap's doing.
HELD_POWER_SHARE = 0.8
#: Effective clocks (and power readings), the most recent, that :func:`capped` judges.
RECENT_CLOCKS = 8
#: Shortest span (s) of the samples of a power-capped series, the settled half of its
#: warm-up included (``runner.timing.sampler.settled_tail``). Once settled, the clock still
#: cycles with a period near one second (an H200's fp16 4096³ between 213 and 224 µs): with
#: 0.3 s of samples, two processes read fp16 4096³ 4.5% apart.
CAPPED_SAMPLE_S = 1.0
#: A power-capped series is not settled while the board's *averaged* power (NVML's
#: one-second average, what the power controller holds to the limit) still rises by more than
#: this share between the two windows. After an idle gap the average is low and the
#: controller lets the clock run high until the average catches up: on an H100, bf16 4096³
#: 0.5 s after bf16 8192³ drew an average of 0.58 → 0.92 of the limit over its first second,
#: ran 181-192 µs a call against 200 µs sustained, dipped to 234 µs as the average reached the
#: limit and held 197-200 µs only from 2 s on. A flat average is the device's own word that
#: the controller has no headroom left to give, on any GPU.
POWER_RISE_TOL = 0.02
#: A power-capped series is not settled while the GPU's temperature rises faster than this
#: (°C per second, between the two windows): a board still heating sustains a clock it will
#: not hold, since a hotter chip leaks more of the same power budget. From a cool H100, bf16
#: 4096³ read 195 µs a call in its first 2.5 s, 204 µs at 7 s and 205-207 µs from 10 s to
#: 40 s (60 → 70 °C); an already warm board rose 0.2 °C/s with its time flat.
THERMAL_RISE_C_PER_S = 0.5
#: ... and only once the windows' mean temperatures are this far apart (°C): NVML reads whole
#: degrees, so one step of a steady board (69 → 70) between windows 0.25 s apart reads as
#: 4 °C/s, while a cool board under a capped op heats 5 °C/s and more.
THERMAL_RISE_MIN_C = 1.5
#: Most points of a window that :func:`judge` compares: sorting the tens of thousands of a
#: 50 µs op's warm-up took 18 ms, and the device idled inside the warm-up that judged it.
JUDGE_POINTS = 2048


@dataclass(frozen=True)
class Settled:
    """The verdict: whether the series settled, when, and, if not, why."""

    settled: bool
    elapsed_s: float
    reason: str | None = None
    #: whether the series was power-capped (:func:`capped`): its samples then span
    #: :data:`CAPPED_SAMPLE_S`; None where it could not be told
    capped: bool | None = None


def capped(recent_mhz: Sequence[float], power_share: float | None,
           max_clock_mhz: float | None, first_mhz: Sequence[float] = ()) -> bool | None:
    """Whether the power controller holds this series down: its most recent effective clocks
    ran below :data:`DEEP_HELD_SHARE` of the maximum, or below :data:`HELD_DOWN_SHARE` while
    falling from its first clocks (``first_mhz``) or drawing :data:`HELD_POWER_SHARE` of the
    limit (``power_share``: the most of the recent readings); or, where no probe read the
    clocks, it drew :data:`POWER_NEAR_CAP` of the limit (a memory-bound op can draw that at
    full clock). None: neither could be read (no probe, no NVML), so nobody can tell."""
    if recent_mhz and max_clock_mhz:
        now = statistics.median(recent_mhz)
        if now >= HELD_DOWN_SHARE * max_clock_mhz:
            return False
        if now < DEEP_HELD_SHARE * max_clock_mhz:
            return True
        falling = bool(first_mhz) and now < (1 - CLOCK_FALL_SHARE) * statistics.median(first_mhz)
        return falling or (power_share is not None and power_share >= HELD_POWER_SHARE)
    if power_share is None:
        return None
    return power_share >= POWER_NEAR_CAP


def judge(points: Sequence[Point], elapsed_s: float, power_share: float | None = None, *,
          max_clock_mhz: float | None = None,
          recent_mhz: Sequence[float] | None = None,
          min_capped_s: float = CAPPED_MIN_S, first_mhz: Sequence[float] = ()) -> str | None:
    """None when the series is settled at ``elapsed_s``, else what is still moving.
    ``power_share``: the most power the series drew recently, over the limit (None: not
    known); ``recent_mhz``: its last effective clocks (default: from
    ``points``); ``min_capped_s``: the shortest warm-up if it is power-capped
    (``runner.timing.heat.capped_min_s``); ``first_mhz``: its first effective clocks."""
    if recent_mhz is None:
        recent_mhz = [p.effective_mhz for p in points if p.effective_mhz is not None]
        recent_mhz = recent_mhz[-RECENT_CLOCKS:]
    is_capped = capped(recent_mhz, power_share, max_clock_mhz, first_mhz)
    if _held_lightly(recent_mhz, first_mhz, max_clock_mhz):
        min_capped_s = min(min_capped_s, BAND_CAPPED_MIN_S)
    if is_capped and elapsed_s < min_capped_s:
        return (f"power-capped: the controller may still move the clock (at least "
                f"{min_capped_s:g} s)")
    if (recent_mhz and max_clock_mhz and elapsed_s < BAND_WATCH_S
            and statistics.median(recent_mhz) < HELD_DOWN_SHARE * max_clock_mhz):
        return (f"the SM clock runs below {HELD_DOWN_SHARE:.0%} of the maximum: watching "
                f"whether the power cap pulls it down (at least {BAND_WATCH_S:g} s)")
    earlier, recent = (_thinned(window) for window in windows(points, elapsed_s))
    if not earlier or not recent:
        return "too few samples to compare two windows"
    if is_capped and (rising := _average_power_rising(earlier, recent)
                      or _warming(earlier, recent, elapsed_s)):
        return rising
    before_sorted = sorted(p.per_call_s for p in earlier)
    now_sorted = sorted(p.per_call_s for p in recent)
    before, now = statistics.median(before_sorted), statistics.median(now_sorted)
    # A noisy series (a 1 µs op on a busy host) moves its window medians by chance: a move
    # within the two medians' CIs is noise, not a trend.
    tol = TIME_TOL
    if len(before_sorted) >= 6 and len(now_sorted) >= 6:
        tol = max(tol, median_ci_rel_halfwidth(before_sorted)
                  + median_ci_rel_halfwidth(now_sorted))
    if before > 0 and abs(now / before - 1) > tol:
        return f"time per call moved {100 * (now / before - 1):+.1f}% between the last windows"
    clocks_before = [p.best_mhz for p in earlier if p.best_mhz is not None]
    clocks_now = [p.best_mhz for p in recent if p.best_mhz is not None]
    if clocks_before and clocks_now:
        mhz_before, mhz_now = statistics.median(clocks_before), statistics.median(clocks_now)
        # Either way: a clock coming back up after earlier work (or out of a dip of the
        # controller's) speeds the op up as much as a falling one slows it down.
        if abs(mhz_now / mhz_before - 1) > CLOCK_TOL:
            moving = "falling" if mhz_now < mhz_before else "rising"
            return f"SM clock still {moving} ({mhz_before:.0f} → {mhz_now:.0f} MHz)"
    return None


def _held_lightly(recent_mhz: Sequence[float], first_mhz: Sequence[float],
                  max_clock_mhz: float | None) -> bool:
    """Whether the clock is held only lightly (:data:`BAND_CAPPED_MIN_S`): in the band above
    :data:`DEEP_HELD_SHARE` and not :data:`CLOCK_FALL_SHARE` below its first clocks. One
    still sliding down through the band is being pulled down: a 1 s minimum read it fast."""
    if not recent_mhz or not max_clock_mhz:
        return False
    now = statistics.median(recent_mhz)
    fell = bool(first_mhz) and now < (1 - CLOCK_FALL_SHARE) * statistics.median(first_mhz)
    return now >= DEEP_HELD_SHARE * max_clock_mhz and not fell


def _average_power_rising(earlier: Sequence[Point], recent: Sequence[Point]) -> str | None:
    """Why a capped series' averaged board power is still rising between its two windows
    (:data:`POWER_RISE_TOL`), or None (flat, falling, or not read)."""
    before = [p.power_avg_share for p in earlier if p.power_avg_share is not None]
    now = [p.power_avg_share for p in recent if p.power_avg_share is not None]
    if not before or not now:
        return None
    share_before, share_now = statistics.median(before), statistics.median(now)
    if share_before > 0 and share_now > (1 + POWER_RISE_TOL) * share_before:
        return (f"averaged board power still rising ({share_before:.0%} → {share_now:.0%} of "
                "the limit): the power controller still has headroom to take back")
    return None


def _warming(earlier: Sequence[Point], recent: Sequence[Point], elapsed_s: float
             ) -> str | None:
    """Why a capped series' board is still heating too fast to hold its clock
    (:data:`THERMAL_RISE_C_PER_S`), or None (steady, cooling, or not read). The windows'
    windows are a quarter of ``elapsed_s`` apart. Their means, not medians: NVML reads whole
    degrees, and a median of 0.3 s of a board heating 2 °C/s moves by none."""
    before = [p.temperature_c for p in earlier if p.temperature_c is not None]
    now = [p.temperature_c for p in recent if p.temperature_c is not None]
    if not before or not now or elapsed_s <= 0:
        return None
    rise_c = statistics.fmean(now) - statistics.fmean(before)
    rise_c_per_s = rise_c / (elapsed_s / 4)
    if rise_c >= THERMAL_RISE_MIN_C and rise_c_per_s > THERMAL_RISE_C_PER_S:
        return (f"the board is still heating ({rise_c_per_s:.1f} °C/s, at "
                f"{statistics.fmean(now):.0f} °C): a hotter chip sustains a lower clock")
    return None


def _thinned(window: Sequence[Point]) -> Sequence[Point]:
    """At most :data:`JUDGE_POINTS` of ``window``'s points, evenly spread by index. Not every
    k-th: a k that is a multiple of the samples per chunk would take the same place in every
    chunk (its first sample, say)."""
    if len(window) <= JUDGE_POINTS:
        return window
    return [window[i * len(window) // JUDGE_POINTS] for i in range(JUDGE_POINTS)]


def settle(step: Callable[[], Sequence[float | tuple[float, float | None]]], *,
           min_s: float, cap_s: float, min_calls: int = 1,
           wall: Callable[[], float] = time.perf_counter,
           read_clock: Callable[[], Reading | None] | None = None,
           handover: bool = False,
           min_capped_s: float = CAPPED_MIN_S) -> tuple[list[Point], Settled]:
    """Run ``step`` (one call, or one chunk of back-to-back samples; it returns their times
    per call in seconds, or (seconds, effective MHz) pairs) until the series has settled, at
    least ``min_s`` and ``min_calls`` samples in, or ``cap_s`` is reached (at least one step
    always runs). ``min_s=0`` asks for no warm-up to speak of (``timer=smoke``):
    ``min_calls`` samples, not judged. ``handover``: the op
    has just settled in another warm-up (the loop time's), so ``min_calls`` samples are enough
    unless they show it :func:`capped`, in which case they are judged as usual.
    ``min_capped_s``: the shortest warm-up of a power-capped series
    (``runner.timing.heat.capped_min_s``: shorter when the device starts hot)."""
    start = wall()
    points: list[Point] = []
    reading, next_read, next_judge = Reading(), start, 0.0
    max_mhz: float | None = None
    recent: deque[float] = deque(maxlen=RECENT_CLOCKS)  # the last effective clocks
    first: list[float] = []  # and the first ones
    # The last power readings: the series' own draw now, not what earlier work left.
    powers = OwnPower(keep=RECENT_CLOCKS)
    moving = "minimum warm-up not reached"
    while True:
        now = wall()
        if read_clock is not None and now >= next_read:
            reading, next_read = read_clock() or Reading(), now + CLOCK_READ_S
            max_mhz = reading.max_clock_mhz or max_mhz
            powers.add(reading.power_share)
        power = powers.most(or_first=not recent)
        times = step()
        elapsed = wall() - start
        for item in times:
            per_call, mhz = item if isinstance(item, tuple) else (item, None)
            points.append(Point(elapsed, per_call, reading.clock_mhz, reading.power_share, mhz,
                                reading.power_avg_share, reading.temperature_c))
            if mhz is not None:
                recent.append(mhz)
                if len(first) < RECENT_CLOCKS:
                    first.append(mhz)
        # Judged every JUDGE_EVERY_S or 5% of the elapsed time, whichever is longer: a
        # judgement sorts two windows, which hold tens of thousands of calls of a 1 µs op.
        if len(points) >= min_calls and elapsed >= min_s and (
                elapsed >= next_judge or elapsed >= cap_s):
            judged = min_s > 0 or (handover and capped(recent, power, max_mhz, first))
            moving = (judge(points, elapsed, power, max_clock_mhz=max_mhz, recent_mhz=recent,
                            min_capped_s=min_capped_s, first_mhz=first) if judged else None)
            next_judge = elapsed + max(JUDGE_EVERY_S, elapsed / 20)
            if moving is None:
                return points, Settled(True, elapsed,
                                       capped=capped(recent, power, max_mhz, first))
        if elapsed >= cap_s:
            return points, Settled(False, elapsed, f"hit the {cap_s:g} s cap: {moving}",
                                   capped=capped(recent, power, max_mhz, first))
