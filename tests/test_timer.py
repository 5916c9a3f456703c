"""``runner.timing.timer.measure`` driven by a fake clock: every number below is exact.

Durations are in seconds. Sample durations of 1 ms and more are above ``batch_below_us``
(10 µs), so each sample is one call unless a test is about batching.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

import pytest
from fakes import FakeClock

from runner.timing.clocks import HostClock
from runner.timing.heat import (
    HOT_CAPPED_MIN_S,
    HOT_GAP_S,
    HOT_MIN_S,
    RECOVERY_S,
    capped_min_s,
    heat_left,
    min_warmup_s,
)
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.sampler import sample
from runner.timing.series import OwnPower, Reading
from runner.timing.settle import (
    BAND_CAPPED_MIN_S,
    BAND_WATCH_S,
    CAPPED_MIN_S,
    CAPPED_SAMPLE_S,
    settle,
)
from runner.timing.stats import median_ci_ranks
from runner.timing.timer import LoopTimeOptions, choose_calls_per_sample, measure

MS = 1e-3
US = 1e-6


def plan(**overrides: float) -> TimerPlan:
    """A plan with no warm-up to speak of and caps that never trigger unless asked."""
    base = dict(warmup_calls=1, warmup_s=0.0, min_samples=3, max_samples=1000,
                target_rel=0.01, max_time_s=1e9, batch_below_us=10.0, batch_target_us=100.0,
                max_calls_per_sample=10000)
    base.update(overrides)
    return TimerPlan(**base)


def run(clock: FakeClock, timer_plan: TimerPlan, **kwargs: object) -> Measurement:
    return measure(clock.op(), timer_plan, clock, LoopTimeOptions(wall=clock.wall, **kwargs))


# ---------------------------------------------------------------------------------------
# Warm-up
# ---------------------------------------------------------------------------------------

def test_warmup_stops_after_warmup_calls_when_time_is_already_met() -> None:
    clock = FakeClock([MS] * 5 + [MS] * 3)  # 5 warm-up calls, then 3 identical samples
    m = run(clock, plan(warmup_calls=5, warmup_s=0.0, min_samples=3, max_samples=3))
    assert m.warmup_calls == 5
    assert m.warmup_s == pytest.approx(5 * MS)
    assert clock.calls_per_region == [1] * 8  # nothing else was timed
    assert m.samples_s == (MS, MS, MS)


def test_warmup_runs_until_warmup_s_when_calls_are_already_met() -> None:
    # 1 ms per call, warm-up of 9.5 ms: 9 calls give 9 ms (< 9.5), the 10th reaches 10 ms.
    clock = FakeClock([MS] * 10 + [2 * MS] * 3)
    m = run(clock, plan(warmup_calls=1, warmup_s=9.5 * MS, min_samples=3, max_samples=3))
    assert m.warmup_calls == 10
    assert m.warmup_s == pytest.approx(10 * MS)
    assert m.samples_s == (2 * MS, 2 * MS, 2 * MS)  # warm-up calls are not samples


def test_warmup_needs_both_limits() -> None:
    # 20 calls required, time met after 3: still 20 calls.
    clock = FakeClock([MS] * 20 + [MS] * 3)
    m = run(clock, plan(warmup_calls=20, warmup_s=2.5 * MS, min_samples=3, max_samples=3))
    assert m.warmup_calls == 20


def test_a_call_slower_than_max_time_ends_warmup_after_it() -> None:
    clock = FakeClock([6.0] + [MS] * 3)
    m = run(clock, plan(warmup_calls=10, warmup_s=10.0, max_time_s=2.0, min_samples=3,
                        max_samples=3))
    assert m.warmup_calls == 1


def test_at_least_one_warmup_call_runs() -> None:
    clock = FakeClock([MS] * 4)
    m = run(clock, plan(warmup_calls=0, warmup_s=0.0, min_samples=3, max_samples=3))
    assert m.warmup_calls == 1


# ---------------------------------------------------------------------------------------
# Batching of short ops
# ---------------------------------------------------------------------------------------

def test_short_op_is_batched_to_batch_target_us() -> None:
    # 1 µs per call, below batch_below_us=10: ceil(100 µs / 1 µs) = 100 calls per sample.
    clock = FakeClock(per_call_s=US)
    m = run(clock, plan(warmup_calls=5, min_samples=3, max_samples=3))
    assert m.calls_per_sample == 100
    assert clock.calls_per_region == [1] * 5 + [100] * 3  # warm-up calls are single
    # samples are per call: each region took 100 µs for 100 calls
    assert m.samples_s == pytest.approx((US, US, US), rel=1e-12)


def test_batch_size_rounds_up() -> None:
    # 3 µs per call, target 50 µs: ceil(50 / 3) = 17 calls; each region is 51 µs.
    clock = FakeClock(per_call_s=3 * US)
    m = run(clock, plan(warmup_calls=3, batch_target_us=50.0, min_samples=3, max_samples=3))
    assert m.calls_per_sample == 17
    assert m.samples_s == pytest.approx((3 * US,) * 3, rel=1e-12)


def test_batch_size_uses_the_median_of_the_last_five_warmup_calls() -> None:
    # A slow first call (1 ms, cold) must not decide the batch: the last five are 2 µs.
    clock = FakeClock([MS, MS, 2 * US, 2 * US, 2 * US, 2 * US, 2 * US], per_call_s=2 * US)
    m = run(clock, plan(warmup_calls=7, min_samples=3, max_samples=3))
    assert m.warmup_calls == 7
    assert m.calls_per_sample == 50  # ceil(100 / 2)


def test_batch_size_is_capped_by_max_calls_per_sample() -> None:
    clock = FakeClock(per_call_s=0.1 * US)  # would need 1000 calls
    m = run(clock, plan(warmup_calls=3, max_calls_per_sample=64, min_samples=3,
                        max_samples=3))
    assert m.calls_per_sample == 64
    assert clock.calls_per_region[-3:] == [64, 64, 64]


def test_op_at_or_above_batch_below_us_is_not_batched() -> None:
    clock = FakeClock(per_call_s=10 * US)
    m = run(clock, plan(warmup_calls=3, min_samples=3, max_samples=3))
    assert m.calls_per_sample == 1


@pytest.mark.parametrize(("per_call_s", "expected"), [
    (1 * US, 100), (3 * US, 34), (9.99 * US, 11), (10 * US, 1), (1.0, 1), (0.0, 10000),
])
def test_choose_calls_per_sample(per_call_s: float, expected: int) -> None:
    assert choose_calls_per_sample(per_call_s, plan()) == expected


# ---------------------------------------------------------------------------------------
# Stopping: converged, max_samples, max_time
# ---------------------------------------------------------------------------------------

def test_one_slow_sample_is_noisy_and_says_why() -> None:
    """A call slower than max_time_s stops the loop after one sample: fewer than min_samples,
    so the trial is noisy with the reason, and its CI is unbounded, not zero-wide."""
    clock = FakeClock([5.0] * 3)  # one warm-up call, one sample, each 5 s
    m = run(clock, plan(min_samples=10, max_time_s=2.0))
    assert len(m.samples_s) == 1 and m.stop_reason == "max_time"
    assert m.noisy
    assert m.noisy_reason == "1 sample < min_samples 10 (stopped: max_time)"
    assert m.stats.ci_rel_halfwidth == math.inf and m.stats.ci_high == math.inf


def test_identical_samples_converge_at_min_samples() -> None:
    clock = FakeClock([MS] + [5 * MS] * 100)
    m = run(clock, plan(min_samples=7))
    assert m.stop_reason == "converged"
    assert len(m.samples_s) == 7
    assert not m.noisy


def test_converges_exactly_when_the_median_ci_is_tight() -> None:
    # Samples 10, 20, 30 ms then 10 ms forever. Sorted, n samples are (n-2) tens, 20, 30.
    # The CI is [x_(low), x_(high)] with (low, high) = median_ci_ranks(n); it is all tens
    # (half-width 0) once high <= n - 2. median_ci_ranks: n=11 -> (2, 10), n=12 -> (3, 10).
    assert median_ci_ranks(11) == (2, 10) and median_ci_ranks(12) == (3, 10)
    clock = FakeClock([10 * MS] + [10 * MS, 20 * MS, 30 * MS] + [10 * MS] * 100)
    m = run(clock, plan(min_samples=3, target_rel=0.01))
    assert m.stop_reason == "converged"
    assert len(m.samples_s) == 12
    assert m.stats.ci_low == m.stats.ci_high == 10 * MS


def test_no_convergence_check_before_min_samples() -> None:
    clock = FakeClock([MS] + [MS] * 100)
    m = run(clock, plan(min_samples=25, target_rel=0.5))
    assert len(m.samples_s) == 25
    assert m.stop_reason == "converged"


def test_max_samples_caps_a_noisy_op() -> None:
    clock = FakeClock([MS] + [MS, 3 * MS] * 50)
    m = run(clock, plan(min_samples=3, max_samples=7, target_rel=1e-6))
    assert m.stop_reason == "max_samples"
    assert len(m.samples_s) == 7
    assert m.samples_s == (MS, 3 * MS, MS, 3 * MS, MS, 3 * MS, MS)
    assert m.noisy


def test_min_equal_max_samples_takes_exactly_that_many() -> None:
    clock = FakeClock([MS] + [MS, 3 * MS] * 10)
    m = run(clock, plan(min_samples=3, max_samples=3, target_rel=1e-6))
    assert len(m.samples_s) == 3
    assert m.stop_reason == "max_samples"


def test_max_time_stops_sampling_on_the_wall_clock() -> None:
    # Samples of 0.1 s and 0.3 s never converge (target 1e-9). Sampling time: 0.1, 0.4,
    # 0.5, 0.8 s ... the first check at or past 0.45 s is after the 3rd sample.
    clock = FakeClock([0.1] + [0.1, 0.3] * 50)
    m = run(clock, plan(min_samples=2, target_rel=1e-9, max_time_s=0.45))
    assert m.stop_reason == "max_time"
    assert m.samples_s == (0.1, 0.3, 0.1)


def test_max_time_counts_time_outside_the_timed_region() -> None:
    # flush takes 1 s of wall time each (outside the region): max_time_s=1.5 allows two.
    clock = FakeClock([MS] + [MS, 2 * MS] * 50)
    m = run(clock, plan(min_samples=2, target_rel=1e-9, max_time_s=1.5),
            flush=lambda: clock.advance(1.0))
    assert m.stop_reason == "max_time"
    assert len(m.samples_s) == 2


def test_max_time_starts_after_warmup() -> None:
    # 1 s of warm-up must not eat the sampling budget of 0.35 s (counted from the warm-up's
    # start, it would stop after one sample).
    clock = FakeClock([1.0] + [0.1, 0.3] * 50)
    m = run(clock, plan(warmup_calls=1, min_samples=2, target_rel=1e-9, max_time_s=0.35))
    assert m.stop_reason == "max_time"
    assert len(m.samples_s) == 2  # 0.1 + 0.3 = 0.4 >= 0.35 after two samples


# ---------------------------------------------------------------------------------------
# Hooks: before_sample and flush
# ---------------------------------------------------------------------------------------

def test_hooks_run_once_per_sample_and_never_inside_the_timed_region() -> None:
    clock = FakeClock(per_call_s=2 * MS)  # long enough not to be batched
    m = run(clock, plan(warmup_calls=2, min_samples=3, max_samples=3),
            before_sample=clock.hook("before"), flush=clock.hook("flush"))
    assert m.calls_per_sample == 1
    warmup = ["before", "start", "call", "stop"] * 2  # no flush in warm-up
    sample = ["before", "flush", "start", "call", "stop"]
    assert clock.events == warmup + sample * 3


def test_before_sample_runs_once_per_batched_sample() -> None:
    clock = FakeClock(per_call_s=2 * US)  # batched: ceil(100 / 2) = 50 calls per sample
    m = run(clock, plan(warmup_calls=2, min_samples=3, max_samples=3),
            before_sample=clock.hook("before"))
    assert m.calls_per_sample == 50
    warmup = ["before", "start", "call", "stop"] * 2
    sample = ["before", "start"] + ["call"] * 50 + ["stop"]
    assert clock.events == warmup + sample * 3


def test_flush_forces_one_call_per_sample() -> None:
    """After an L2 flush only the first call of a batch would run cold: a short op is then
    timed one call per sample, each after its own flush."""
    clock = FakeClock(per_call_s=2 * US)
    m = run(clock, plan(warmup_calls=2, min_samples=3, max_samples=3),
            flush=clock.hook("flush"))
    assert m.calls_per_sample == 1
    assert clock.events == (["start", "call", "stop"] * 2
                            + ["flush", "start", "call", "stop"] * 3)
    assert m.samples_s == pytest.approx((2 * US,) * 3, rel=1e-12)


def test_without_hooks_only_calls_are_timed() -> None:
    clock = FakeClock([MS] * 4)
    run(clock, plan(warmup_calls=1, min_samples=3, max_samples=3))
    assert clock.events == ["start", "call", "stop"] * 4


# ---------------------------------------------------------------------------------------
# Measurement statistics
# ---------------------------------------------------------------------------------------

def test_measurement_stats_are_exact() -> None:
    ms = [7, 3, 9, 1, 5, 2, 8, 4, 6, 10, 12, 11]  # milliseconds, all above batch_below_us
    # A 12x spread is a mixed series (runner.timing.spread): the block is re-measured once,
    # and the fresh block (the same values again) is what is reported.
    clock = FakeClock([MS] + [v * MS for v in ms] * 2)
    m = run(clock, plan(min_samples=12, max_samples=12, target_rel=1e-9))
    assert m.samples_s == tuple(v * MS for v in ms)  # raw, in call order
    s = m.stats
    assert s.n == 12
    assert s.median == pytest.approx(6.5 * MS)
    assert s.mean == pytest.approx(6.5 * MS)
    assert s.std == pytest.approx(statistics.stdev(ms) * MS)  # sample std (n-1)
    assert s.std == pytest.approx(math.sqrt(13) * MS)  # 1..12: variance n(n+1)/12 = 13
    assert (s.min, s.max) == (pytest.approx(MS), pytest.approx(12 * MS))
    # inclusive (numpy linear) quartiles of 1..12: positions 2.75 and 8.25 (0-based)
    assert s.q25 == pytest.approx(3.75 * MS)
    assert s.q75 == pytest.approx(9.25 * MS)
    # n = 12 -> exact ranks (3, 10): the 3rd and 10th smallest
    assert (s.ci_low, s.ci_high) == (pytest.approx(3 * MS), pytest.approx(10 * MS))
    assert s.ci_rel_halfwidth == pytest.approx((10 - 3) / (2 * 6.5))
    assert m.noisy  # 0.54 > target 1e-9
    assert m.stop_reason == "max_samples"


def test_noisy_compares_the_final_ci_with_target_rel() -> None:
    samples = [10, 10, 10, 10, 11, 10, 10]  # n = 7: ranks (1, 7) -> CI [10, 11]
    rel = (11 - 10) / (2 * 10)
    for target, noisy in ((rel * 0.99, True), (rel, False)):
        clock = FakeClock([MS] + [v * MS for v in samples])
        m = run(clock, plan(min_samples=7, max_samples=7, target_rel=target))
        assert m.stats.ci_rel_halfwidth == pytest.approx(rel)
        assert m.noisy is noisy


# ---------------------------------------------------------------------------------------
# TimerPlan validation and the host clock
# ---------------------------------------------------------------------------------------

def test_timer_plan_rejects_min_samples_above_max_samples() -> None:
    with pytest.raises(ValueError, match="min_samples"):
        TimerPlan(min_samples=11, max_samples=10)
    TimerPlan(min_samples=10, max_samples=10)  # equal is fine


@pytest.mark.parametrize("bad", [dict(min_samples=0), dict(max_samples=0),
                                 dict(max_calls_per_sample=0), dict(target_rel=0.0),
                                 dict(max_time_s=0.0), dict(target_rel=-0.1)])
def test_timer_plan_rejects_nonpositive_knobs(bad: dict) -> None:
    with pytest.raises(ValueError):
        TimerPlan(**bad)


def test_timer_plan_from_settings_copies_every_knob() -> None:
    from runner.config.schema import TimerSettings

    settings = TimerSettings(warmup_calls=2, warmup_s=0.5, min_samples=4, max_samples=9,
                             target_rel=0.2, max_time_s=3.0, batch_below_us=5.0,
                             batch_target_us=40.0, max_calls_per_sample=7)
    assert TimerPlan.from_settings(settings) == TimerPlan(2, 0.5, 4, 9, 0.2, 3.0, 5.0, 40.0, 7)


def test_timer_plan_and_timer_settings_defaults_agree() -> None:
    from runner.config.schema import TimerSettings

    assert TimerPlan.from_settings(TimerSettings()) == TimerPlan()


def test_host_clock_syncs_around_the_region_and_reads_nanoseconds() -> None:
    events: list[str] = []
    ticks = iter([1_000, 1_000 + 2_500_000])

    def now_ns() -> int:
        events.append("now")
        return next(ticks)

    clock = HostClock(sync=lambda: events.append("sync"), now_ns=now_ns)
    token = clock.start()
    events.append("work")
    assert clock.stop(token) == pytest.approx(2.5e-3)
    # sync before reading the start (drain earlier work), sync before reading the end
    assert events == ["sync", "now", "work", "sync", "now"]


# ---------------------------------------------------------------------------------------
# The settle rule (runner.timing.settle), driven by a fake wall clock
# ---------------------------------------------------------------------------------------

class Series:
    """A step that takes ``per_call(t)`` seconds on a fake wall clock, one sample per step;
    ``reading(t)`` is what the clock reader sees at time t."""

    def __init__(self, per_call: Any, reading: Any = None) -> None:
        self.now, self.per_call, self.reading = 0.0, per_call, reading

    def wall(self) -> float:
        return self.now

    def step(self) -> list[float]:
        duration = self.per_call(self.now)
        self.now += duration
        return [duration]

    def read(self) -> Any:
        return self.reading(self.now) if self.reading else None


def refreshed(reading: Any, before: float = 0.3, refresh_s: float = 0.01) -> Any:
    """``reading(t)`` as NVML shows it: its power is the work before's (``before``) until
    the first refresh, ``refresh_s`` into the series."""
    def read(t: float) -> Reading:
        now = reading(t)
        return now if t >= refresh_s else dataclasses.replace(now, power_share=before)
    return read


def test_a_steady_series_settles_as_soon_as_the_minimum_is_over() -> None:
    series = Series(lambda t: MS)
    points, verdict = settle(series.step, min_s=0.05, cap_s=3.0, wall=series.wall)
    assert verdict.settled and verdict.reason is None
    assert verdict.elapsed_s == pytest.approx(0.05)
    assert len(points) == 50


def test_a_falling_then_flat_series_settles_once_the_last_two_quarters_agree() -> None:
    # The clock falls for 0.2 s: 1.00 ms per call rising to 1.25 ms, then flat.
    series = Series(lambda t: MS * (1 + 1.25 * min(t, 0.2)))
    _, verdict = settle(series.step, min_s=0.05, cap_s=5.0, wall=series.wall)
    assert verdict.settled
    # Settled once the earlier window, (T/2, 3T/4], lies (nearly) past the fall.
    assert 0.3 <= verdict.elapsed_s < 0.45


def test_a_never_settling_series_hits_the_cap_and_says_why() -> None:
    series = Series(lambda t: MS * (1 + t))  # 1% slower every 10 ms, for ever
    _, verdict = settle(series.step, min_s=0.05, cap_s=0.5, wall=series.wall)
    assert not verdict.settled
    assert verdict.elapsed_s == pytest.approx(0.5, abs=2 * MS)
    assert verdict.reason.startswith("hit the 0.5 s cap: time per call moved +")


def test_a_falling_clock_keeps_a_flat_series_from_settling() -> None:
    # The time per call is flat (a memory-bound op), but the SM clock is still falling.
    clock = lambda t: Reading(clock_mhz=1980 - 2000 * min(t, 0.2))  # noqa: E731
    series = Series(lambda t: MS, clock)
    _, verdict = settle(series.step, min_s=0.05, cap_s=3.0, wall=series.wall,
                        read_clock=series.read)
    assert verdict.settled and 0.3 <= verdict.elapsed_s < 0.45
    flat = Series(lambda t: MS)  # the same series without the clock settles at once
    assert settle(flat.step, min_s=0.05, cap_s=3.0, wall=flat.wall)[1].elapsed_s < 0.06


def test_an_op_near_the_power_limit_warms_up_at_least_the_capped_minimum() -> None:
    # Flat at the boost clock at first (the power controller has not reacted yet).
    series = Series(lambda t: MS, refreshed(lambda t: Reading(clock_mhz=1980, power_share=0.99)))
    _, verdict = settle(series.step, min_s=0.05, cap_s=3.0, wall=series.wall,
                        read_clock=series.read)
    assert verdict.settled and CAPPED_MIN_S <= verdict.elapsed_s < 1.06 * CAPPED_MIN_S
    cool = Series(lambda t: MS, lambda t: Reading(clock_mhz=1980, power_share=0.2))
    _, verdict = settle(cool.step, min_s=0.05, cap_s=3.0, wall=cool.wall,
                        read_clock=cool.read)
    assert verdict.elapsed_s == pytest.approx(0.05)


def test_the_loop_time_warm_up_ends_on_settled_and_records_it() -> None:
    # Warm-up calls slow down for 0.3 s, then stay flat: the loop's warm-up runs past
    # warmup_s until settled, and the measurement says so.
    times = [MS * (1 + min(i, 300) / 1000) for i in range(2000)]
    clock = FakeClock(times[:1000] + [1.3 * MS] * 3)
    m = run(clock, plan(warmup_calls=1, warmup_s=0.05, min_samples=3, max_samples=3))
    assert m.settled is True and m.settle_reason is None
    assert m.warmup_s > 0.4  # not the 50 ms minimum
    assert m.samples_s == pytest.approx((1.3 * MS,) * 3)
    capped = run(FakeClock(times[:2000] + [1.3 * MS] * 3),
                 plan(warmup_calls=1, warmup_s=0.05, settle_max_s=0.1, min_samples=3,
                      max_samples=3))
    assert capped.settled is False and "hit the 0.1 s cap" in capped.settle_reason


# ---------------------------------------------------------------------------------------
# Power-capped ops, told by the clock their samples ran at (runner.timing.clock_probe)
# ---------------------------------------------------------------------------------------

class ProbedSeries(Series):
    """A series whose samples carry the effective clock they ran at, ``mhz(t)``."""

    def __init__(self, per_call: Any, mhz: Any, reading: Any = None) -> None:
        super().__init__(per_call, reading)
        self.mhz = mhz

    def step(self) -> list[Any]:
        duration = self.per_call(self.now)
        self.now += duration
        return [(duration, self.mhz(self.now))]


#: What NVML shows in an op's first 100 ms: the boost clock and a cool board (its fields
#: update every ~100 ms), while the SMs already run held down.
LAGGING_NVML = Reading(clock_mhz=1980, power_share=0.2, max_clock_mhz=1980)
#: NVML's clock still at the boost while the board draws its limit.
LAGGING_CLOCK = Reading(clock_mhz=1980, power_share=0.97, max_clock_mhz=1980)


def test_an_op_whose_samples_run_held_down_is_capped_from_its_first_samples() -> None:
    held = ProbedSeries(lambda t: MS, lambda t: 1450.0, lambda t: LAGGING_CLOCK)
    _, verdict = settle(held.step, min_s=0.05, cap_s=5.0, wall=held.wall, read_clock=held.read)
    assert verdict.settled and verdict.capped
    assert CAPPED_MIN_S <= verdict.elapsed_s < 1.06 * CAPPED_MIN_S
    free = ProbedSeries(lambda t: MS, lambda t: 1975.0, lambda t: LAGGING_NVML)
    _, verdict = settle(free.step, min_s=0.05, cap_s=5.0, wall=free.wall, read_clock=free.read)
    assert verdict.settled and not verdict.capped
    assert verdict.elapsed_s == pytest.approx(0.05)


def test_a_small_op_after_a_capped_one_pays_no_capped_minimum() -> None:
    # The trial before left the clock held down; this op draws a fifth of the limit and its
    # clock comes back up: not capped, judged by its trend alone.
    recovering = ProbedSeries(lambda t: MS * (1.02 if t < 0.01 else 1.0),
                              lambda t: 1800.0 if t < 0.01 else 1860.0,
                              lambda t: Reading(clock_mhz=1500, power_share=0.2,
                                                max_clock_mhz=1980))
    _, verdict = settle(recovering.step, min_s=0.02, cap_s=5.0, wall=recovering.wall,
                        read_clock=recovering.read, min_capped_s=CAPPED_MIN_S)
    assert verdict.settled and not verdict.capped
    # no capped minimum: the band's watch, then its trend
    assert verdict.elapsed_s <= BAND_WATCH_S + 0.01


def test_a_clock_between_deep_and_held_is_capped_while_it_falls_or_draws_the_limit() -> None:
    flat = ProbedSeries(lambda t: MS, lambda t: 1800.0, lambda t: LAGGING_NVML)
    _, verdict = settle(flat.step, min_s=0.02, cap_s=5.0, wall=flat.wall, read_clock=flat.read)
    assert not verdict.capped and verdict.elapsed_s <= BAND_WATCH_S + 0.01
    # Falling from its first clocks into the band: capped, and being pulled down: the full
    # minimum.
    falling = ProbedSeries(lambda t: MS, lambda t: 1900.0 if t < 0.01 else 1800.0,
                           lambda t: LAGGING_NVML)
    _, verdict = settle(falling.step, min_s=0.02, cap_s=5.0, wall=falling.wall,
                        read_clock=falling.read)
    assert verdict.capped and verdict.elapsed_s >= CAPPED_MIN_S
    # Flat in the band but drawing the limit: capped, and held only lightly: the band's
    # minimum, from cold too.
    drawing = ProbedSeries(lambda t: MS, lambda t: 1750.0, refreshed(lambda t: LAGGING_CLOCK))
    _, verdict = settle(drawing.step, min_s=0.02, cap_s=5.0, wall=drawing.wall,
                        read_clock=drawing.read)
    assert verdict.capped and BAND_CAPPED_MIN_S <= verdict.elapsed_s < CAPPED_MIN_S
    # Pulled from the top into the band and still sliding there (40 MHz/s, under the
    # windows' 1% clock tolerance): being pulled down, not held lightly: the full minimum.
    sliding = ProbedSeries(lambda t: MS, lambda t: 1980.0 if t < 0.01 else 1760.0 - 40.0 * t,
                           refreshed(lambda t: LAGGING_CLOCK))
    _, verdict = settle(sliding.step, min_s=0.02, cap_s=5.0, wall=sliding.wall,
                        read_clock=sliding.read)
    assert verdict.capped and verdict.elapsed_s >= CAPPED_MIN_S
    # A tf32 2048³ matmul's first 60 ms in the band, then held deep below it: the full minimum.
    deeper = ProbedSeries(lambda t: MS, lambda t: 1750.0 if t < 0.06 else 1550.0,
                          refreshed(lambda t: LAGGING_CLOCK))
    _, verdict = settle(deeper.step, min_s=0.02, cap_s=5.0, wall=deeper.wall,
                        read_clock=deeper.read)
    assert verdict.capped and verdict.elapsed_s >= CAPPED_MIN_S
    # Deep below the maximum it is capped whatever power NVML reports (an averaged reading).
    deep = ProbedSeries(lambda t: MS, lambda t: 1450.0, lambda t: LAGGING_NVML)
    _, verdict = settle(deep.step, min_s=0.02, cap_s=5.0, wall=deep.wall, read_clock=deep.read)
    assert verdict.capped and verdict.elapsed_s >= CAPPED_MIN_S


def test_the_power_that_the_work_before_left_in_nvml_does_not_cap_a_light_op() -> None:
    # A small tf32 matmul after a capped one: flat in the band from its first sample, while
    # NVML still shows the capped op's 0.83 of the limit for 65 ms (it refreshes every
    # ~100 ms), then its own 0.43. The stale reading is not the op's: no capped minimum,
    # no longer watch than the band's.
    def band_op(before: float, own: float) -> Any:
        """Flat at 1794 MHz; NVML shows ``before`` for 65 ms, then the op's ``own`` power."""
        series = ProbedSeries(lambda t: MS, lambda t: 1794.0,
                              refreshed(lambda t: Reading(clock_mhz=1700, power_share=own,
                                                          max_clock_mhz=1980),
                                        before=before, refresh_s=0.065))
        return settle(series.step, min_s=0.02, cap_s=5.0, wall=series.wall,
                      read_clock=series.read, min_capped_s=HOT_CAPPED_MIN_S)[1]

    verdict = band_op(before=0.83, own=0.43)
    assert verdict.settled and not verdict.capped
    assert verdict.elapsed_s <= BAND_WATCH_S + 0.01
    # The same op really drawing 0.83 once NVML refreshes is capped.
    verdict = band_op(before=0.43, own=0.83)
    assert verdict.capped and verdict.elapsed_s >= HOT_CAPPED_MIN_S


def test_own_power_counts_a_series_readings_from_nvml_s_first_refresh() -> None:
    power = OwnPower(keep=3)
    power.add(0.83)  # the work before's
    power.add(0.83)  # the same refresh, read again
    assert power.most() is None
    assert power.most(or_first=True) == pytest.approx(0.83)  # no probe: all there is
    for share in (0.43, 0.43, 0.41, 0.40):
        power.add(share)
    assert power.most() == pytest.approx(0.43)  # the last three of its own
    power.add(None)  # unread: nothing changes
    assert power.most() == pytest.approx(0.43)


def test_a_clock_coming_back_up_is_not_settled_until_it_stops() -> None:
    # After a capped trial a small op's clock climbs back over 0.1 s: its time per call falls
    # with it, and the warm-up must not end before the climb does.
    def mhz(t: float) -> float:
        return min(1900.0, 1700.0 + 2000 * t)

    climbing = ProbedSeries(lambda t: MS * 1900 / mhz(t), mhz, lambda t: LAGGING_NVML)
    _, verdict = settle(climbing.step, min_s=0.02, cap_s=5.0, wall=climbing.wall,
                        read_clock=climbing.read)
    assert verdict.settled and not verdict.capped and verdict.elapsed_s >= 0.1


def test_a_capped_op_after_a_capped_one_settles_sooner_than_after_an_idle_gap() -> None:
    ended = 10.0
    hot = capped_min_s(heat_left(True, ended), ended + 0.05)
    cold = capped_min_s(heat_left(True, ended), ended + HOT_GAP_S + 0.5)
    after_small = capped_min_s(heat_left(False, ended), ended + 0.05)
    assert hot == HOT_CAPPED_MIN_S < CAPPED_MIN_S
    assert cold == after_small == capped_min_s(None, ended) == CAPPED_MIN_S
    # The rule reaches the warm-up: a hot start settles at HOT_CAPPED_MIN_S, a cold one later.
    for min_capped, expected in ((hot, HOT_CAPPED_MIN_S), (cold, CAPPED_MIN_S)):
        held = ProbedSeries(lambda t: MS, lambda t: 1450.0, lambda t: LAGGING_CLOCK)
        _, verdict = settle(held.step, min_s=0.02, cap_s=5.0, wall=held.wall,
                            read_clock=held.read, min_capped_s=min_capped)
        assert verdict.capped and expected <= verdict.elapsed_s < expected + 0.1


def test_work_at_full_clock_leaves_the_next_capped_op_a_cold_start() -> None:
    """An H200's tf32 4096³ right after fp32 4096³ (full clock, ~680 W of 700), warmed up as
    if hot, read 4.3% fast: only capped work leaves the clock held down."""
    from runner.execution import timed

    ended = 10.0
    assert capped_min_s(heat_left(True, ended), ended + 0.05) == HOT_CAPPED_MIN_S
    for uncapped in (False, None):
        assert capped_min_s(heat_left(uncapped, ended), ended + 0.05) == CAPPED_MIN_S
        assert min_warmup_s(heat_left(uncapped, ended), ended + 0.05, 0.02) == 0.02

    # Every trial records its heat: an uncapped trial after a capped one clears it.
    def done(capped: bool | None) -> Measurement:
        return Measurement(samples_s=(1e-3,), calls_per_sample=1, warmup_calls=1,
                           warmup_s=0.0, stop_reason="converged", target_rel=0.01,
                           power_capped=capped)

    state = timed.WorkerTiming()
    assert state.record_heat("cuda:7", done(True), None).hot
    after = state.record_heat("cuda:7", done(False), done(None))
    assert state.heat.before("cuda:7") == after
    assert not after.hot
    # ... but the clock that capped work held down may still be coming back: the next op, of
    # any kind, gets the hot floor, while a capped one still warms up as from cold
    now = after.capped_ended_s + 0.05
    assert min_warmup_s(after, now, 0.02) == HOT_MIN_S
    assert capped_min_s(after, now) == CAPPED_MIN_S
    assert min_warmup_s(after, after.capped_ended_s + RECOVERY_S + 0.1, 0.02) == 0.02


def test_any_op_after_hot_work_warms_up_long_enough_to_see_the_clock_come_back() -> None:
    """An H200's fp32 2048³ right after fp16 2048³ ran 6% slow in its first 10 ms and came
    back within ~0.1 s: uncapped, but a 20 ms warm-up read it slow."""
    ended = 10.0
    hot = min_warmup_s(heat_left(True, ended), ended + 0.05, 0.02)
    assert hot == HOT_MIN_S
    assert min_warmup_s(heat_left(True, ended), ended + HOT_GAP_S + 0.5, 0.02) == 0.02
    assert min_warmup_s(heat_left(False, ended), ended + 0.05, 0.02) == 0.02
    assert min_warmup_s(None, ended, 0.02) == 0.02

    def per_call(t: float) -> float:
        return MS * (1 + 0.06 * max(0.0, 1 - t / 0.1))

    read: dict[float, float] = {}
    for min_s in (0.02, hot):
        recovering = ProbedSeries(per_call, lambda t: 1960.0, lambda t: LAGGING_NVML)
        points, verdict = settle(recovering.step, min_s=min_s, cap_s=5.0,
                                 wall=recovering.wall, read_clock=recovering.read)
        assert verdict.settled and not verdict.capped
        read[min_s] = points[-1].per_call_s
    assert read[0.02] > 1.03 * MS  # the cold minimum ends inside the climb
    assert read[hot] < 1.01 * MS  # the hot one sees it and waits it out


def test_drawing_near_the_power_limit_is_capped_only_where_no_probe_read_the_clock() -> None:
    # A memory-bound add draws 94% of the limit at full clock: not held down.
    board = refreshed(lambda t: Reading(clock_mhz=1980, power_share=0.94, max_clock_mhz=1980))
    add = ProbedSeries(lambda t: MS, lambda t: 1976.0, board)
    _, verdict = settle(add.step, min_s=0.05, cap_s=5.0, wall=add.wall, read_clock=add.read)
    assert not verdict.capped and verdict.elapsed_s == pytest.approx(0.05)
    unprobed = Series(lambda t: MS, board)
    _, verdict = settle(unprobed.step, min_s=0.05, cap_s=5.0, wall=unprobed.wall,
                        read_clock=unprobed.read)
    assert verdict.capped and verdict.elapsed_s >= CAPPED_MIN_S


def test_a_handover_takes_one_step_unless_that_step_shows_the_op_capped() -> None:
    free = ProbedSeries(lambda t: MS, lambda t: 1975.0, lambda t: LAGGING_NVML)
    points, verdict = settle(free.step, min_s=0.0, cap_s=5.0, wall=free.wall,
                             read_clock=free.read, handover=True)
    assert verdict.settled and len(points) == 1
    # A launch-bound op the loop left idle half the time reaches the cap back to back.
    held = ProbedSeries(lambda t: MS, lambda t: 1450.0, lambda t: LAGGING_CLOCK)
    _, verdict = settle(held.step, min_s=0.0, cap_s=5.0, wall=held.wall, read_clock=held.read,
                        handover=True)
    assert verdict.capped and verdict.elapsed_s >= CAPPED_MIN_S


def test_the_loop_time_after_the_device_time_aims_lower_and_a_capped_one_samples_longer(
) -> None:
    from runner.execution.timed import CAPPED_LOOP_SAMPLE_US, handover_plan
    from runner.timing.heat import (
        HANDOVER_CAPPED_MIN_S,
        LOOP_HANDOVER_MAX_S,
        LOOP_HANDOVER_TARGET_SHARE,
    )

    base = TimerPlan(target_rel=0.01, max_time_s=10.0)

    def device_time(capped: bool | None) -> Measurement:
        return Measurement(samples_s=(1e-3,), calls_per_sample=1, warmup_calls=1,
                           warmup_s=0.0, stop_reason="converged", target_rel=0.01,
                           power_capped=capped)

    # No device time (the CPU, timer.device_time=false): the timer's own plan, a full warm-up.
    assert handover_plan(base, None) == (base, LoopTimeOptions())
    free_plan, free = handover_plan(base, device_time(False))
    assert free.handover and free.min_warmup_s == 0.0 and free.min_span_s == 0.0
    assert free_plan.target_rel == pytest.approx(0.01 * LOOP_HANDOVER_TARGET_SHARE)
    # a quarter of a long budget (base: 10 s, as timer=precise), LOOP_HANDOVER_MAX_S at least
    assert free_plan.max_time_s == 2.5
    default = TimerPlan(target_rel=0.01, max_time_s=2.0)  # timer=default's budget
    assert handover_plan(default, device_time(False))[0].max_time_s == LOOP_HANDOVER_MAX_S
    assert free_plan.batch_target_us == base.batch_target_us
    capped_plan, capped_warmup = handover_plan(base, device_time(True))
    assert capped_warmup.min_warmup_s == HANDOVER_CAPPED_MIN_S and capped_warmup.min_span_s > 0
    assert capped_plan.batch_below_us == capped_plan.batch_target_us == CAPPED_LOOP_SAMPLE_US
    # A timer that asks for less than the handover keeps its own, shorter budget.
    quick = TimerPlan(target_rel=0.05, max_time_s=0.2)
    assert handover_plan(quick, device_time(False))[0].max_time_s == 0.2


def test_a_handover_keeps_the_sample_hooks_and_reads_no_clock() -> None:
    """The loop after the device time runs the same hooks (grads reset, L2 flush) and judges
    its warm-up by time alone; on its own it keeps the clock reader it was given."""
    from runner.execution.timed import handover_plan

    def reset() -> None: ...

    def flush() -> None: ...

    def read() -> Reading:
        return Reading()

    given = LoopTimeOptions(before_sample=reset, flush=flush, read_clock=read)
    base = TimerPlan(target_rel=0.01, max_time_s=10.0)
    sustained = Measurement(samples_s=(1e-3,), calls_per_sample=1, warmup_calls=1,
                            warmup_s=0.0, stop_reason="converged", target_rel=0.01,
                            power_capped=False)
    _, after = handover_plan(base, sustained, given)
    assert after.before_sample is reset and after.flush is flush
    assert after.read_clock is None and after.handover
    assert handover_plan(base, None, given) == (base, given)


def test_the_samples_of_a_capped_op_span_capped_sample_s() -> None:
    now = [0.0]

    def take() -> float:
        now[0] += MS
        return MS

    taken = sample(take, plan(max_samples=5000), lambda: now[0], min_s=CAPPED_SAMPLE_S)
    assert taken[1] == "converged"
    assert len(taken[0]) == pytest.approx(CAPPED_SAMPLE_S / MS, abs=2)
    quick = sample(take, plan(max_samples=5000), lambda: now[0])
    assert len(quick[0]) < 10  # converged as soon as the CI allows


class ProbingClock(FakeClock):
    """A clock with a probe: ``last_mhz`` is the clock of the last region; it logs whether
    the probe was on, region by region."""

    def __init__(self, mhz: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.probing, self.last_mhz, self.probed = False, mhz, []

    def start(self) -> int:
        self.probed.append(self.probing)
        return super().start()


def test_measure_probes_the_warm_up_only_and_samples_a_capped_op_for_longer() -> None:
    clock = ProbingClock(1450.0, per_call_s=MS)
    m = run(clock, plan(warmup_s=0.05, max_samples=5000, settle_max_s=5.0),
            read_clock=lambda: LAGGING_CLOCK)
    assert m.power_capped and m.warmup_s >= CAPPED_MIN_S
    assert sum(m.samples_s) >= CAPPED_SAMPLE_S
    warm = m.warmup_calls
    assert all(clock.probed[:warm]) and not any(clock.probed[warm:])
    free = run(ProbingClock(1975.0, per_call_s=MS), plan(warmup_s=0.05, settle_max_s=5.0),
               read_clock=lambda: LAGGING_NVML)
    assert free.power_capped is False and free.warmup_s < 0.1 and len(free.samples_s) < 10



def test_the_settled_half_of_a_capped_warm_up_opens_its_samples() -> None:
    from runner.timing.sampler import after_warm_up, settled_tail
    from runner.timing.series import Point
    from runner.timing.settle import Settled

    points = [Point(i / 1000, MS) for i in range(1, 2501)]  # 2.5 s of warm-up, 1 ms each
    tail = settled_tail(points, Settled(True, 2.5, capped=True))
    # exactly the two quarters the settle rule compared: after the half, as its windows
    assert tail[0].t_s == pytest.approx(1.251) and tail[-1].t_s == pytest.approx(2.5)
    assert settled_tail(points, Settled(True, 2.5, capped=False)) == ()  # needs no span
    assert settled_tail(points, Settled(False, 2.5, "hit the cap", capped=True)) == ()
    settled = Settled(True, 2.5, capped=True)
    sample_plan, min_s, seeded = after_warm_up(plan(max_samples=100, warmup_s=0.05), settled,
                                               points)
    assert min_s == CAPPED_SAMPLE_S and seeded == tail
    assert sample_plan.max_samples == 100 + len(tail)  # the fresh samples keep their budget
    _, watched_s, none = after_warm_up(plan(warmup_s=0.05), settled, points, 3.0)
    assert watched_s == 3.0 and none == ()  # a watch's window counts only its own samples
    # timer=smoke: the warm-up was never judged, so nothing of it is "settled"
    assert after_warm_up(plan(warmup_s=0.0), settled, points)[2] == ()


def test_seeded_samples_count_toward_the_span_and_open_the_list() -> None:
    now = [0.0]

    def take() -> float:
        now[0] += MS
        return MS

    seed = [MS] * 1200
    taken, reason = sample(take, plan(max_samples=5000), lambda: now[0],
                           min_s=CAPPED_SAMPLE_S, seed=seed, seed_s=1.2)
    assert reason == "converged" and taken[:1200] == seed
    assert len(taken) - len(seed) < 10  # the span was already there
    short, _ = sample(take, plan(max_samples=5000), lambda: now[0], min_s=CAPPED_SAMPLE_S,
                      seed=[MS] * 200, seed_s=0.2)
    assert (len(short) - 200) * MS == pytest.approx(CAPPED_SAMPLE_S - 0.2, abs=2 * MS)
    # max_time_s is the new samples' own budget: a seed of half the span does not use it up
    quick, reason = sample(take, plan(max_samples=5000, max_time_s=0.5), lambda: now[0],
                           min_s=CAPPED_SAMPLE_S, seed=[MS] * 500, seed_s=0.5)
    assert reason == "converged" and (len(quick) - 500) * MS == pytest.approx(0.5, abs=2 * MS)


def test_the_tail_s_clocks_are_recorded_as_the_samples_own() -> None:
    from runner.timing.sampler import tail_clocks
    from runner.timing.series import Point

    # two chunks without a probe (NVML's clock, the same for each of a chunk's points): one
    # reading per chunk; a probed chunk: each sample's effective clock
    tail = [Point(1.0, MS, 1980), Point(1.0, MS, 1980), Point(1.1, MS, 1965),
            Point(1.1, MS, 1965), Point(1.2, MS, 1980, None, 1450), Point(1.2, MS, 1980, None,
                                                                            1460)]
    assert tail_clocks(tail) == [1980, 1965, 1450, 1460]


def test_a_long_warm_up_is_judged_on_a_thinned_series_that_still_sees_a_trend() -> None:
    from runner.timing.series import Point
    from runner.timing.settle import JUDGE_POINTS, judge

    flat = [Point(i * 2.5 / 40000, MS * (1 + 0.002 * (i % 7))) for i in range(40000)]
    assert judge(flat, 2.5, min_capped_s=0.0) is None
    # 2% slower in the last quarter than in the quarter before
    rising = [Point(p.t_s, p.per_call_s * (1.02 if p.t_s > 1.875 else 1.0)) for p in flat]
    assert "moved" in judge(rising, 2.5, min_capped_s=0.0)
    from runner.timing import settle as settle_module

    thinned = settle_module._thinned(flat[:10000])
    assert len(thinned) == JUDGE_POINTS and thinned[0] == flat[0]
    # evenly spread, not every k-th: no two picks the same distance apart for long
    steps = {flat.index(b) - flat.index(a) for a, b in zip(thinned[:50], thinned[1:51])}
    assert steps == {4, 5}
    assert settle_module._thinned(flat[:100]) == flat[:100]
    seen: list[int] = []
    real = settle_module._thinned

    def counting(window: list) -> list:
        seen.append(len(window))
        return real(window)

    import unittest.mock

    with unittest.mock.patch.object(settle_module, "_thinned", counting):
        judge(flat, 2.5, min_capped_s=0.0)
    assert len(seen) == 2 and min(seen) > JUDGE_POINTS  # both windows go through it


def test_a_handover_of_a_long_uncapped_call_runs_no_warm_up_call() -> None:
    from runner.execution.timed import handover_plan

    def device_time(per_call_s: float, capped: bool) -> Measurement:
        return Measurement(samples_s=(per_call_s,) * 3, calls_per_sample=1, warmup_calls=3,
                           warmup_s=0.06, stop_reason="converged", target_rel=0.01,
                           power_capped=capped)

    base = TimerPlan(target_rel=0.01, max_time_s=10.0)
    assert handover_plan(base, device_time(21 * MS, False))[1].calls_per_sample == 1
    # a short call's K comes from the loop's own call (the host may be slower than the GPU);
    # a capped one warms up in the loop's regime first
    assert handover_plan(base, device_time(2 * US, False))[1].calls_per_sample is None
    assert handover_plan(base, device_time(21 * MS, True))[1].calls_per_sample is None
    clock = FakeClock(per_call_s=21 * MS)
    m = run(clock, plan(max_samples=5), handover=True, min_warmup_s=0.0, calls_per_sample=1)
    assert m.warmup_calls == 0 and m.warmup_s == 0.0 and m.calls_per_sample == 1
    assert clock.calls_per_region == [1] * len(m.samples_s)  # every call it made is a sample
    one = run(FakeClock(per_call_s=21 * MS), plan(max_samples=5), handover=True,
              min_warmup_s=0.0)
    assert one.warmup_calls == 1  # without ``calls``, one call sizes K


def test_each_device_settles_its_graph_state_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's first CUDA graphs run small kernels faster than its later ones (up to 8%
    on an H100), so the worker settles that state on each GPU once, before its first trial
    there; a CPU trial has none to settle."""
    import torch

    from runner.execution import timed

    settled: list[str] = []
    monkeypatch.setattr(timed, "settle_graph_state", lambda d: settled.append(str(d)))
    state = timed.WorkerTiming()
    for device in ("cuda:0", "cuda:0", "cuda:1", "cpu", "cuda:1", "cuda:0"):
        state.settle_graphs(torch.device(device))
    assert settled == ["cuda:0", "cuda:1"]


def test_a_trial_settles_the_graph_state_before_it_builds_or_captures_anything(
        compose: Any, plan_trials: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settling comes first: a graph captured before it (``graph=cuda_graph`` composes
    one in step 3) would be one of the process's fast first graphs, and the peaks are reset
    only after the workloads are built."""
    from runner.execution import trial
    from runner.execution.task import TrialTask, TrialTimer

    cfg = compose("op=vector_add", "shape=[8]", "device=cpu", "timer=smoke")
    [(_, spec)] = plan_trials(cfg)
    steps: list[str] = []

    class State:  # the worker's WorkerTiming, as far as this step goes
        def settle_graphs(self, device: Any) -> None:
            steps.append(f"settle {device}")

    def build(spec: Any, device: Any) -> Any:
        steps.append(f"build {device}")
        raise RuntimeError("stop here")

    monkeypatch.setattr(trial, "build_checked", build)
    with pytest.raises(RuntimeError, match="stop here"):
        trial._measure_trial(TrialTask(0, spec, TrialTimer.from_settings(cfg.timer)), State())
    assert steps == ["settle cpu", "build cpu"]
