"""Which sample series one median can describe (``runner.timing.spread``), and what the timer
does with one it cannot: extend past a tight CI, re-measure once in a fresh block, and report
``noisy`` with what it saw. Synthetic series in seconds; the timer runs on a fake clock."""

from __future__ import annotations

import random

import pytest
from fakes import FakeClock
from test_timer import plan as timer_plan

from runner.execution.measured import cost_columns
from runner.execution.timed import TrialTimes
from runner.timing.device_time import UNAVAILABLE, DeviceTime
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.sampler import sample
from runner.timing.spread import far_fewer_calls, mixed_reason
from runner.timing.timer import LoopTimeOptions, measure

US = 1e-6
MS = 1e-3


def quiet(n: int, centre_s: float = 30 * US, seed: int = 0, rel: float = 0.02) -> list[float]:
    rng = random.Random(seed)
    return [centre_s * rng.lognormvariate(0, rel) for _ in range(n)]


def shuffled(values: list[float], seed: int = 1) -> list[float]:
    random.Random(seed).shuffle(values)
    return values


@pytest.mark.parametrize("seed", range(40))
def test_a_quiet_series_with_a_stray_outlier_stays_one_median(seed: int) -> None:
    series = quiet(200, seed=seed)
    series[57] *= 10  # one preemption: the median ignores it
    assert mixed_reason(series) is None


@pytest.mark.parametrize("n", [8, 10, 20, 50, 1000])
def test_a_quiet_series_of_any_length_stays_one_median(n: int) -> None:
    assert mixed_reason(quiet(n, seed=n)) is None


def test_two_clusters_are_named_with_their_sizes() -> None:
    # The case seen on a busy 2-core host: q25 35 µs, median 15,900 µs.
    series = shuffled(quiet(30, 35 * US) + quiet(70, 15_900 * US, seed=2))
    reason = mixed_reason(series)
    assert reason is not None and reason.startswith("two clusters: 30 samples near 35")
    assert "70 near 15,9" in reason


def test_a_spread_without_gaps_is_told_by_its_median_far_above_q25() -> None:
    rng = random.Random(3)
    series = [30 * US * 100 ** rng.random() for _ in range(100)]  # 30 µs .. 3 ms, log-uniform
    reason = mixed_reason(series)
    assert reason is not None and reason.startswith("median ") and "x q25" in reason


def test_a_slow_tail_is_named() -> None:
    rng = random.Random(4)
    tail = [60 * US * 10 ** rng.random() for _ in range(22)]  # 22% at 2x..20x
    reason = mixed_reason(shuffled(quiet(78) + tail))
    assert reason is not None and reason.startswith("slow tail: 22 of 100 samples")


def test_a_time_sliced_series_without_clusters_is_wide() -> None:
    """Two steady hogs on two cores: every call of a 0.6 ms op is cut into slices, samples
    spread over 9..36 ms around a peak at 24 ms: no gap, no tail, median near q25."""
    rng = random.Random(6)
    series = [24 * MS * rng.triangular(0.4, 1.5, 1.0) for _ in range(200)]
    reason = mixed_reason(series)
    assert reason is not None and reason.startswith("wide: the interquartile range")


def test_a_step_in_time_order_is_named() -> None:
    # +20%: no gap, no tail and a median near q25; only the order shows it.
    series = quiet(30, 30 * US) + quiet(30, 36 * US, seed=5)
    reason = mixed_reason(series)
    assert reason is not None and reason.startswith("step:") and "(+20%)" in reason
    assert mixed_reason(sorted(series, key=lambda _: random.random())) != reason


def test_too_few_samples_are_not_judged() -> None:
    assert mixed_reason([1.0, 1.0, 100.0, 100.0]) is None


def test_far_fewer_calls_per_sample_than_the_op_needs() -> None:
    assert far_fewer_calls(1, 34) is not None and "needs 34" in far_fewer_calls(1, 34)
    assert far_fewer_calls(10, 34) is None
    assert far_fewer_calls(600, 3000) is None  # a tiny op batched by the hundred: not a burst


# ---------------------------------------------------------------------------------------
# What the timer does with it
# ---------------------------------------------------------------------------------------

def plan(**overrides: float) -> TimerPlan:
    """``test_timer``'s plan (no warm-up to speak of, caps off) with room to extend."""
    return timer_plan(**{"min_samples": 10, "max_samples": 200, **overrides})


def test_the_stop_rule_does_not_stop_on_a_tight_ci_about_a_mixed_series() -> None:
    """Three fast samples to one slow: from about 40 samples the median's CI is all fast
    (tight), but a quarter of the series is 10x slower. It extends to max_samples."""
    cycle = iter([MS, MS, MS, 10 * MS] * 100)
    samples, reason = sample(lambda: next(cycle), plan())
    assert reason == "max_samples" and len(samples) == 200


def test_a_mixed_block_is_re_measured_once_and_a_quiet_one_reported() -> None:
    first = [MS, 50 * MS] * 100  # 200 samples in two clusters: max_samples
    second = [MS] * 10
    clock = FakeClock([MS] + first + second)
    m = measure(clock.op(), plan(), clock, LoopTimeOptions(wall=clock.wall))
    assert m.samples_s == tuple(second) and m.stop_reason == "converged"
    assert m.remeasured is not None and m.remeasured.startswith("two clusters")
    assert m.warmup_calls == 1 + 200  # the first block counts as warm-up, never lost
    assert not m.noisy
    # ... but its seconds were sampling, not settling: the cost columns say so
    first_block_s = sum(first)
    assert m.set_aside_s == pytest.approx(first_block_s, rel=0.01)
    assert m.warmup_s == pytest.approx(MS + first_block_s, rel=0.01)
    times = TrialTimes(m, DeviceTime(UNAVAILABLE, "cpu"), {}, loop_s=m.warmup_s + 0.01,
                       device_s=0.0)
    costs = cost_columns(times, accuracy_s=0.0)
    assert costs["cost_settle_s"] == pytest.approx(MS, rel=0.01)
    assert costs["cost_loop_s"] == pytest.approx(first_block_s + 0.01, rel=0.01)


def test_a_block_that_stays_mixed_is_noisy_with_what_was_seen() -> None:
    clock = FakeClock([MS] + [MS, 50 * MS] * 200)
    m = measure(clock.op(), plan(), clock, LoopTimeOptions(wall=clock.wall))
    assert m.noisy
    assert m.noisy_reason.startswith("two clusters: 100 samples near 1,000 µs, 100 near 50,000 µs")
    assert "re-measured once, the first block showed two clusters" in m.noisy_reason


def test_a_slow_warm_up_that_chose_one_call_per_sample_is_re_measured_batched() -> None:
    """A burst during the warm-up: one 5 ms call makes K = 1 for a 30 µs op. The samples'
    fastest quarter asks for 34 calls: the block is re-taken with K = 34."""
    clock = FakeClock([5 * MS] * 5, per_call_s=30 * US)
    m = measure(clock.op(), plan(warmup_calls=5, batch_below_us=1000.0,
                                 batch_target_us=1000.0), clock, LoopTimeOptions(wall=clock.wall))
    assert m.calls_per_sample == 34 and not m.noisy
    assert m.remeasured is not None and m.remeasured.startswith("calls_per_sample 1,")


def test_a_one_call_warm_up_chooses_no_k_worth_judging() -> None:
    """The smoke preset warms up with one cold call: a small K is expected there."""
    clock = FakeClock([5 * MS], per_call_s=30 * US)
    m = measure(clock.op(), plan(batch_below_us=1000.0, batch_target_us=1000.0), clock,
                LoopTimeOptions(wall=clock.wall))
    assert m.calls_per_sample == 1 and m.remeasured is None and m.quiet_calls is None


def test_a_measurement_with_far_fewer_calls_than_it_needs_is_noisy() -> None:
    m = Measurement(samples_s=(30 * US,) * 20, calls_per_sample=1, warmup_calls=1,
                    warmup_s=0.0, stop_reason="converged", target_rel=0.01, quiet_calls=34)
    assert m.noisy and m.noisy_reason.startswith("calls_per_sample 1, where the fastest")


def test_a_fresh_block_all_at_the_load_level_is_noisy_against_the_first_blocks_fast_quarter(
        ) -> None:
    """The burst outlasts the re-measure: the fresh block is uniformly slow (no shape to
    tell), but the first block showed the op at 1 ms."""
    clock = FakeClock([MS] + [MS, 50 * MS] * 100 + [50 * MS] * 10)
    m = measure(clock.op(), plan(), clock, LoopTimeOptions(wall=clock.wall))
    assert m.stats.median == 50 * MS and m.first_block_q25_s == MS
    assert m.noisy and m.noisy_reason.startswith("median 50,000 µs is 50x the first block's")


def test_a_busy_host_is_told_by_the_preemption_rate_not_the_shape() -> None:
    """Two CPU hogs on two cores: every call is cut into time slices, the samples are tight
    around 30 ms for a 0.17 ms op, and only the OS's count of preemptions shows it."""
    samples = tuple(quiet(200, 30 * MS))
    assert mixed_reason(samples) is None
    m = Measurement(samples_s=samples, calls_per_sample=1, warmup_calls=1, warmup_s=0.0,
                    stop_reason="converged", target_rel=0.05, preempted_per_s=320.0)
    assert m.noisy and m.noisy_reason.startswith("busy host: the OS preempted the timing "
                                                 "process 320 times a second")
    calm = Measurement(samples_s=samples, calls_per_sample=1, warmup_calls=1, warmup_s=0.0,
                       stop_reason="converged", target_rel=0.05, preempted_per_s=3.0)
    assert not calm.noisy


def test_a_fake_wall_clock_reads_no_preemption_rate() -> None:
    """Tests drive the timer with a fake clock: the real process's preemptions must not
    decide their outcome (they would make the suite flaky under load)."""
    clock = FakeClock([MS] * 20)
    m = measure(clock.op(), plan(), clock, LoopTimeOptions(wall=clock.wall))
    assert m.preempted_per_s is None
