"""A device time never claims a sustained number it did not measure: the settle rule on a
GPU whose power controller gives the clock back during an idle gap (an H100's pattern,
replayed on a fake clock), and the row's flag where a number may still be a burst one
(runner.execution.sustained)."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from runner.execution.sustained import sustained_flag
from runner.timing import settle as settle_rule
from runner.timing.heat import HOT_CAPPED_MIN_S, DeviceHeat, capped_floor, seen
from runner.timing.measurement import Measurement
from runner.timing.series import Point, Reading
from runner.timing.settle import CAPPED_MIN_S, COLD, CappedFloor, judge, settle

#: The boost-after-load pattern seen on an H100 (bf16 4096³ right after bf16 8192³, an idle
#: gap between the trials): the effective clock stays at 1575 MHz, flat, for 2 s while the
#: board's averaged power climbs back to the limit, then the controller takes the clock to the
#: 1405 MHz that capped work sustained there. Back to back the op runs 200 µs a call.
SUSTAINED_US, SUSTAINED_MHZ, BOOST_MHZ, BOOST_ENDS_S = 200.0, 1405.0, 1575.0, 2.0


class BoostAfterLoad:
    """Chunks of 25 samples on a fake wall clock, each with the clock it ran at, and what
    NVML shows: instantaneous power at the limit, its one-second average still climbing."""

    def __init__(self) -> None:
        self.now = 0.0

    def wall(self) -> float:
        return self.now

    def mhz(self) -> float:
        return BOOST_MHZ if self.now < BOOST_ENDS_S else SUSTAINED_MHZ

    def step(self) -> list[tuple[float, float]]:
        per_call = SUSTAINED_US * 1e-6 * SUSTAINED_MHZ / self.mhz()
        out = []
        for _ in range(25):
            self.now += per_call
            out.append((per_call, self.mhz()))
        return out

    def read(self) -> Reading:
        return Reading(clock_mhz=self.mhz(), power_share=1.0, max_clock_mhz=1980.0,
                       power_avg_share=min(1.0, 0.6 + 0.4 * self.now / 1.5))


def settled_us(floor: CappedFloor) -> tuple[float, float]:
    """(the settled half's median µs, when it settled) of the boost-after-load series."""
    series = BoostAfterLoad()
    points, verdict = settle(series.step, min_s=0.02, cap_s=10.0, wall=series.wall,
                             read_clock=series.read, floor=floor)
    assert verdict.settled and verdict.capped
    tail = [p.per_call_s for p in points if p.t_s >= verdict.elapsed_s / 2]
    return statistics.median(tail) * 1e6, verdict.elapsed_s


def test_a_capped_op_whose_clock_the_idle_gap_gave_back_settles_at_the_sustained_time() -> None:
    hot = CappedFloor(HOT_CAPPED_MIN_S, sustained_mhz=SUSTAINED_MHZ)
    median_us, elapsed_s = settled_us(hot)
    assert median_us == pytest.approx(SUSTAINED_US, rel=0.01)
    assert elapsed_s > BOOST_ENDS_S  # past the controller's turn


def test_without_the_device_s_own_signals_the_same_series_reads_burst(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule as it was (the hot minimum, the time and clock trends alone) is fooled: the
    boost is flat, so it settles at the hot minimum and reads 11% fast. This is what the
    test above guards against."""
    monkeypatch.setattr(settle_rule, "POWER_RISE_TOL", 10.0)
    monkeypatch.setattr(settle_rule, "SUSTAINED_CLOCK_TOL", 10.0)
    median_us, elapsed_s = settled_us(CappedFloor(HOT_CAPPED_MIN_S, SUSTAINED_MHZ))
    assert median_us < 0.92 * SUSTAINED_US and elapsed_s < BOOST_ENDS_S


def test_each_signal_alone_keeps_the_boost_out_of_the_samples(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the clock above the sustained one: warmed up as from cold, past the controller's turn
    monkeypatch.setattr(settle_rule, "POWER_RISE_TOL", 10.0)
    median_us, _ = settled_us(CappedFloor(HOT_CAPPED_MIN_S, SUSTAINED_MHZ))
    assert median_us == pytest.approx(SUSTAINED_US, rel=0.03)
    # the averaged power still rising, with no sustained clock known (the first capped trial)
    monkeypatch.setattr(settle_rule, "POWER_RISE_TOL", 0.02)
    monkeypatch.setattr(settle_rule, "SUSTAINED_CLOCK_TOL", 10.0)
    median_us, _ = settled_us(CappedFloor(HOT_CAPPED_MIN_S))
    assert median_us == pytest.approx(SUSTAINED_US, rel=0.03)


def points_with_power(average: Any, seconds: float = 2.6) -> list[Point]:
    return [Point(t / 1000, 1e-4, 1400.0, 1.0, 1400.0, average(t / 1000))
            for t in range(1, int(seconds * 1000))]


def test_judge_names_a_rising_average_power_and_passes_a_flat_one() -> None:
    rising = points_with_power(lambda t: 0.7 + 0.1 * t)
    assert "averaged board power still rising" in judge(rising, 2.6, max_clock_mhz=1980.0)
    flat = points_with_power(lambda t: 0.99)
    assert judge(flat, 2.6, max_clock_mhz=1980.0) is None
    unread = [p._replace(power_avg_share=None) for p in rising]
    assert judge(unread, 2.6, max_clock_mhz=1980.0) is None


def test_the_floor_is_cold_only_where_the_clock_runs_above_the_sustained_one() -> None:
    floor = CappedFloor(HOT_CAPPED_MIN_S, sustained_mhz=1400.0)
    assert floor.min_for(1420.0) == HOT_CAPPED_MIN_S  # within the tolerance
    assert floor.min_for(1500.0) == CAPPED_MIN_S
    assert floor.min_for(None) == HOT_CAPPED_MIN_S
    assert COLD.min_for(1900.0) == CAPPED_MIN_S


def test_the_worker_hands_the_sustained_clock_from_one_trial_to_the_next() -> None:
    heat = DeviceHeat()
    assert heat.before("cuda:0") is None and seen(None, 0.0).label == "cold"
    heat.record("cuda:0", True, 10.0, sustained_mhz=1405.0)
    assert seen(heat.before("cuda:0"), 10.05).label == "hot"
    heat.record("cuda:0", False, 10.1)  # an uncapped trial keeps what capped work sustained
    after = heat.before("cuda:0")
    assert after.sustained_mhz == 1405.0
    assert capped_floor(after, 10.15).sustained_mhz == 1405.0
    assert seen(after, 10.15).label == "recovering"
    assert seen(after, 12.0).label == "cold" and seen(after, 12.0).sustained_mhz == 1405.0
    assert heat.before("cuda:1") is None  # devices are kept apart


def measurement(median_us: float, clock_mhz: float, capped: bool = True,
                spread: float = 0.0) -> Measurement:
    samples = tuple(median_us * 1e-6 * (1 + spread * (i - 10) / 10) for i in range(21))
    return Measurement(samples_s=samples, calls_per_sample=1, warmup_calls=1, warmup_s=1.0,
                       stop_reason="converged", target_rel=0.01, power_capped=capped,
                       settled=True, clock_mhz=(clock_mhz,) * 21)


def test_a_row_flags_capped_samples_above_the_sustained_clock() -> None:
    fast = measurement(179.0, 1575.0)
    assert "above the 1405 MHz" in sustained_flag(fast, None, 1405.0)
    assert sustained_flag(measurement(200.0, 1410.0), None, 1405.0) is None
    assert sustained_flag(fast, None, None) is None  # nothing to hold it against
    assert sustained_flag(measurement(179.0, 1575.0, capped=False), None, 1405.0) is None


def test_a_row_flags_a_device_time_faster_than_its_own_burst_time() -> None:
    burst = measurement(190.0, 1750.0, capped=False, spread=0.01)
    assert "faster than its own burst time" in sustained_flag(measurement(179.0, 1400.0),
                                                              burst, None)
    assert sustained_flag(measurement(200.0, 1400.0), burst, None) is None
