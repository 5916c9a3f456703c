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
from runner.timing.heat import HOT_CAPPED_MIN_S, DeviceHeat, seen
from runner.timing.measurement import Measurement
from runner.timing.series import Point, Reading
from runner.timing.settle import CAPPED_MIN_S, judge, settle

#: The boost-after-load pattern seen on an H100 (bf16 4096³ right after bf16 8192³, an idle
#: gap between the trials): the effective clock stays at 1575 MHz, flat, for 2 s while the
#: board's averaged power climbs back to the limit, then the controller takes the clock to the
#: 1405 MHz that capped work sustained there. Back to back the op runs 200 µs a call.
SUSTAINED_US, SUSTAINED_MHZ, BOOST_MHZ, BOOST_ENDS_S = 200.0, 1405.0, 1575.0, 2.0


class BoostAfterLoad:
    """Chunks of 25 samples on a fake wall clock, each with the clock it ran at, and what
    NVML shows: instantaneous power at the limit, its one-second average still climbing, and
    the board's temperature (whole degrees, rising ``warming_c_per_s``)."""

    def __init__(self, warming_c_per_s: float = 0.0) -> None:
        self.now, self.warming_c_per_s = 0.0, warming_c_per_s

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
                       power_avg_share=min(1.0, 0.6 + 0.4 * self.now / 1.5),
                       temperature_c=60.0 + round(self.warming_c_per_s * self.now))


def settled_us(series: BoostAfterLoad, min_capped_s: float = HOT_CAPPED_MIN_S
               ) -> tuple[float, float]:
    """(the settled half's median µs, when it settled) of a boost-after-load series."""
    points, verdict = settle(series.step, min_s=0.02, cap_s=10.0, wall=series.wall,
                             read_clock=series.read, min_capped_s=min_capped_s)
    assert verdict.settled and verdict.capped
    tail = [p.per_call_s for p in points if p.t_s >= verdict.elapsed_s / 2]
    return statistics.median(tail) * 1e6, verdict.elapsed_s


def test_a_capped_op_whose_clock_the_idle_gap_gave_back_settles_at_the_sustained_time() -> None:
    median_us, elapsed_s = settled_us(BoostAfterLoad())
    assert median_us == pytest.approx(SUSTAINED_US, rel=0.01)
    assert elapsed_s > BOOST_ENDS_S  # past the controller's turn


def test_without_the_averaged_power_the_same_series_reads_burst(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule as it was (the hot minimum, the time and clock trends alone) is fooled: the
    boost is flat, so it settles at the hot minimum and reads 11% fast. This is what the
    test above guards against."""
    monkeypatch.setattr(settle_rule, "POWER_RISE_TOL", 10.0)
    median_us, elapsed_s = settled_us(BoostAfterLoad())
    assert median_us < 0.92 * SUSTAINED_US and elapsed_s < BOOST_ENDS_S


def test_a_board_still_heating_is_not_settled() -> None:
    # flat time and power, but the chip heats 3 °C a second for 4 s (a cool board's first
    # capped trial: an H100 went from 33 to 52 °C inside one)
    class Heating(BoostAfterLoad):
        def mhz(self) -> float:
            return SUSTAINED_MHZ

        def read(self) -> Reading:
            return Reading(clock_mhz=SUSTAINED_MHZ, power_share=1.0, max_clock_mhz=1980.0,
                           power_avg_share=1.0,
                           temperature_c=40.0 + round(min(self.now, 4.0) * 3.0))

    _, elapsed_s = settled_us(Heating(), min_capped_s=CAPPED_MIN_S)
    assert elapsed_s > 4.0  # once it stops heating
    steady = Heating()
    steady.read = lambda: Reading(clock_mhz=SUSTAINED_MHZ, power_share=1.0,  # type: ignore
                                  max_clock_mhz=1980.0, power_avg_share=1.0,
                                  temperature_c=70.0)
    assert settled_us(steady)[1] < 1.1 * HOT_CAPPED_MIN_S


def test_one_whole_degree_step_of_a_steady_board_is_not_heating() -> None:
    """NVML reads whole degrees: a steady board's 69 → 70 between the two windows is one step,
    not 4 °C/s (THERMAL_RISE_MIN_C)."""
    class OneStep(BoostAfterLoad):
        def mhz(self) -> float:
            return SUSTAINED_MHZ

        def read(self) -> Reading:
            return Reading(clock_mhz=SUSTAINED_MHZ, power_share=1.0, max_clock_mhz=1980.0,
                           power_avg_share=1.0, temperature_c=69.0 if self.now < 0.8 else 70.0)

    assert settled_us(OneStep())[1] < 1.1 * HOT_CAPPED_MIN_S


def points_with(average: Any = lambda t: 0.99, temperature: Any = lambda t: 70.0,
                seconds: float = 2.6) -> list[Point]:
    return [Point(t / 1000, 1e-4, 1400.0, 1.0, 1400.0, average(t / 1000),
                  temperature(t / 1000)) for t in range(1, int(seconds * 1000))]


def test_judge_names_a_rising_average_power_or_temperature_and_passes_flat_ones() -> None:
    rising = points_with(average=lambda t: 0.7 + 0.1 * t)
    assert "averaged board power still rising" in judge(rising, 2.6, max_clock_mhz=1980.0)
    heating = points_with(temperature=lambda t: 50.0 + round(3 * t))
    assert "still heating" in judge(heating, 2.6, max_clock_mhz=1980.0)
    assert judge(points_with(), 2.6, max_clock_mhz=1980.0) is None
    unread = [p._replace(power_avg_share=None, temperature_c=None) for p in rising]
    assert judge(unread, 2.6, max_clock_mhz=1980.0) is None
    # an op that is not capped pays neither: the board may heat from other work
    assert judge(heating, 2.6, max_clock_mhz=1980.0, recent_mhz=[1975.0] * 8) is None


def test_the_worker_hands_the_sustained_clock_from_one_trial_to_the_next() -> None:
    heat = DeviceHeat()
    assert heat.before("cuda:0") is None and seen(None, 0.0).label == "cold"
    heat.record("cuda:0", True, 10.0, sustained_mhz=1405.0)
    assert seen(heat.before("cuda:0"), 10.05).label == "hot"
    heat.record("cuda:0", False, 10.1)  # an uncapped trial keeps what capped work sustained
    after = heat.before("cuda:0")
    assert after.sustained_mhz == 1405.0
    assert seen(after, 10.15).label == "recovering"
    assert seen(after, 12.0).label == "cold" and seen(after, 12.0).sustained_mhz == 1405.0
    assert heat.before("cuda:1") is None  # devices are kept apart


def measurement(median_us: float, capped: bool = True, spread: float = 0.0,
                power: float | None = 0.99) -> Measurement:
    samples = tuple(median_us * 1e-6 * (1 + spread * (i - 10) / 10) for i in range(21))
    return Measurement(samples_s=samples, calls_per_sample=1, warmup_calls=1, warmup_s=1.0,
                       stop_reason="converged", target_rel=0.01, power_capped=capped,
                       settled=True, power_avg_share=power)


def test_a_row_flags_capped_samples_the_controller_still_had_headroom_for() -> None:
    assert "drew 80% of the power limit" in sustained_flag(measurement(179.0, power=0.8), None)
    assert sustained_flag(measurement(200.0), None) is None
    assert sustained_flag(measurement(200.0, power=None), None) is None  # not read
    assert sustained_flag(measurement(179.0, capped=False, power=0.5), None) is None


def test_a_row_flags_a_capped_warm_up_that_never_settled() -> None:
    import dataclasses

    unsettled = dataclasses.replace(measurement(200.0, power=None), settled=False,
                                    settle_reason="hit the 5 s cap: board still heating")
    assert "hit timer.settle_max_s" in sustained_flag(unsettled, None)
    assert "board still heating" in sustained_flag(unsettled, None)


def test_the_row_carries_the_heat_the_trial_began_in() -> None:
    from types import SimpleNamespace

    from runner.execution.sustained import sustained_columns
    from runner.timing.heat import HeatSeen

    times = SimpleNamespace(heat_before=HeatSeen("hot", 1405.0), loop=None, max_clock_mhz=None,
                            device=SimpleNamespace(measurement=measurement(200.0)))
    assert sustained_columns(times, None) == {"heat_before": "hot",
                                              "sm_clock_mhz_capped_sustained": 1405.0,
                                              "power_share_samples": 0.99,
                                              "sustained_flag": None}
    cpu = SimpleNamespace(heat_before=None, loop=None, max_clock_mhz=None,
                          device=SimpleNamespace(measurement=None))
    assert set(sustained_columns(cpu, None).values()) == {None}


def test_a_settled_capped_trial_records_the_clock_its_samples_sustained() -> None:
    import dataclasses

    from runner.execution.timed import WorkerTiming

    state = WorkerTiming()
    capped = dataclasses.replace(measurement(200.0), clock_mhz=(1400.0, 1410.0, 1405.0))
    assert state.record_heat("cuda:0", capped, None).sustained_mhz == 1405.0
    unsettled = dataclasses.replace(capped, settled=False, clock_mhz=(1600.0,))
    assert state.record_heat("cuda:0", unsettled).sustained_mhz == 1405.0  # kept, not taken
    light = dataclasses.replace(capped, power_capped=False, clock_mhz=(1980.0,))
    assert state.record_heat("cuda:0", light).sustained_mhz == 1405.0


def test_a_row_flags_a_device_time_faster_than_its_own_burst_time() -> None:
    burst = measurement(190.0, capped=False, spread=0.01)
    assert "faster than its own burst time" in sustained_flag(measurement(179.0), burst)
    assert sustained_flag(measurement(200.0), burst) is None


def test_a_row_flags_a_capped_device_time_well_faster_than_the_loop_right_after_it() -> None:
    """An H100 ran capped samples at 1570-1640 MHz at the power limit; the loop time right
    after read the 15 s reference, the device time 8-15% fast. The loop time is the witness,
    only where the GPU paces it and only in that direction."""
    fast, loop = measurement(176.0), measurement(200.0, capped=False)
    assert "12% faster than the loop time right after it" in sustained_flag(fast, None, loop)
    assert sustained_flag(measurement(190.0), None, loop) is None  # 5%: a settled wobble
    assert sustained_flag(measurement(230.0), None, loop) is None  # slower: not burst
    assert sustained_flag(measurement(176.0, capped=False), None, loop) is None
    launch_paced = measurement(5.7), measurement(15.9, capped=False)
    assert sustained_flag(*launch_paced[:1], None, launch_paced[1]) is None


def test_capped_samples_that_drew_headroom_leave_the_device_cold() -> None:
    """A trial whose capped samples drew 45% of the limit (the host left the GPU idle) must
    not hand a hot device to the next: that one would warm up for the short hot minimum
    and read fast."""
    import dataclasses

    from runner.execution.timed import WorkerTiming
    from runner.timing.heat import capped_min_s
    from runner.timing.settle import CAPPED_MIN_S

    state = WorkerTiming()
    settled = dataclasses.replace(measurement(200.0), clock_mhz=(1400.0,))
    hot = state.record_heat("cuda:0", settled)
    assert capped_min_s(hot, hot.ended_s) < CAPPED_MIN_S
    starved = dataclasses.replace(measurement(174.0, power=0.45), clock_mhz=(1640.0,))
    after = state.record_heat("cuda:0", starved)
    assert capped_min_s(after, after.ended_s) == CAPPED_MIN_S
    assert after.sustained_mhz == 1400.0  # the starved clock is not what capped work sustains


def test_a_row_flags_samples_the_power_cap_took_after_a_warm_up_that_called_them_light() -> None:
    """On four H200s bf16 2048³ right after tf32 2048³ settled at 1694 MHz in 90 ms, called
    light, then sampled at 1610 MHz and read 3.2% faster than on one GPU."""
    import dataclasses

    def flag(clock_mhz: float, capped: bool = False) -> str | None:
        row = dataclasses.replace(measurement(25.0, capped=capped), settled_clock_mhz=1694.0,
                                  clock_mhz=(clock_mhz,) * 3)
        return sustained_flag(row, None)

    assert "the power cap took the clock during the samples" in flag(1610.0)
    assert flag(1660.0) is None  # within 3%: the usual swing
    assert flag(1780.0) is None  # rose: not a cap taking it
    assert flag(1610.0, capped=True) is None  # capped: the settle rule judged it so
    no_clock = dataclasses.replace(measurement(25.0, capped=False), settled_clock_mhz=1694.0)
    assert sustained_flag(no_clock, None) is None


def test_light_samples_held_below_the_maximum_clock_at_the_power_limit_leave_it_hot() -> None:
    """On four H200s a bf16 1024³ matmul ran at 1717 MHz (of 1980) and 97% of the power
    limit, judged light, and the fp16 1024³ after it, judged capped, warmed up as from cold
    for 2.7 s: the controller had no headroom left to give it. Power alone is not heat: an
    fp32 matmul at full clock draws as much, and the capped op after it starts from the top
    of the clock."""
    import dataclasses

    from runner.execution.timed import WorkerTiming
    from runner.timing.heat import capped_min_s
    from runner.timing.settle import CAPPED_MIN_S

    def left_after(clock_mhz: float, power: float, max_mhz: float | None = 1980.0) -> float:
        light = dataclasses.replace(measurement(5.5, capped=False, power=power),
                                    clock_mhz=(clock_mhz,) * 3)
        heat = WorkerTiming().record_heat("cuda:0", light, None, max_clock_mhz=max_mhz)
        return capped_min_s(heat, heat.ended_s)

    assert left_after(1717.0, 0.97) < CAPPED_MIN_S  # held at the limit: hot
    assert left_after(1978.0, 0.97) == CAPPED_MIN_S  # full clock: cold, however much power
    assert left_after(1717.0, 0.60) == CAPPED_MIN_S  # headroom left: cold
    assert left_after(1717.0, 0.97, max_mhz=None) == CAPPED_MIN_S  # no maximum read
    assert left_after(1717.0, None) == CAPPED_MIN_S  # no power read
    held = dataclasses.replace(measurement(5.5, capped=False), clock_mhz=(1717.0,))
    assert WorkerTiming().record_heat("cuda:0", held, max_clock_mhz=1980.0).sustained_mhz \
        is None  # not capped work's clock


def test_a_row_flags_light_samples_that_ran_held_by_the_power_cap() -> None:
    """On a 4×H200 host sdpa fp16 8×16×1024×64 right after capped work, called light in
    0.09 s, ran at 1706 MHz (of 1980) at 97% of the power limit and read 4.2% faster than the
    same trial called capped on one GPU. A light op at full clock, one with headroom left, or
    one the settle rule called capped (it settled as such) carries no such flag, nor does a
    5 µs matmul so held (1024³ ones read within 3% of 15 s back to back)."""
    import dataclasses
    from types import SimpleNamespace

    from runner.execution.sustained import sustained_columns

    def light(clock_mhz: float, power: float | None = 0.97, capped: bool | None = False,
              median_us: float = 86.96) -> Measurement:
        return dataclasses.replace(measurement(median_us, capped=capped, power=power),
                                   clock_mhz=(clock_mhz,) * 3)

    def flag(row: Measurement, max_mhz: float | None = 1980.0) -> str | None:
        return sustained_flag(row, None, None, {"temperature_c_timed": 66}, max_mhz)

    reason = flag(light(1706.0))
    assert "called it light, yet its samples ran held by the power cap" in reason
    assert "1706 MHz, 86% of the maximum, at 97% of the power limit, 66 °C" in reason
    assert "a warm-up of 1 s" in reason
    no_temperature = sustained_flag(light(1706.0), None, None, None, 1980.0)
    assert "of the power limit): the controller" in no_temperature
    assert flag(light(1706.0, capped=None)) is None  # not judged: not called light
    assert flag(light(1975.0)) is None  # full clock: not held, however much power
    assert flag(light(1706.0, power=0.85)) is None  # headroom left
    assert flag(light(1706.0, capped=True)) is None  # judged capped: settled as such
    assert flag(light(1706.0), max_mhz=None) is None  # no maximum read: not known
    assert flag(light(1762.0, median_us=5.44)) is None
    times = SimpleNamespace(heat_before=None, loop=None, max_clock_mhz=1980.0,
                            device=SimpleNamespace(measurement=light(1706.0)))
    assert "held by the power cap" in sustained_columns(times, None)["sustained_flag"]


def test_a_row_flags_an_uncapped_op_the_work_before_still_held_down() -> None:
    """On four H200s an fp32 linear (22 ms a call, 85-90% of the power limit on its own)
    read 3-4% slow right after capped work: its samples ran with the board's averaged power
    still at the limit, and the loop time right after read it at full speed."""
    held, loop = measurement(22241.0, capped=False, power=0.996), measurement(21608.0,
                                                                             capped=False)
    assert "2.9% slower than the loop time right after it" in sustained_flag(held, None, loop)
    assert sustained_flag(measurement(21386.0, capped=False, power=0.78), None, loop) is None
    assert sustained_flag(measurement(22241.0, capped=False, power=0.9), None, loop) is None
    assert sustained_flag(measurement(21700.0, capped=False, power=0.996), None, loop) is None
    assert sustained_flag(measurement(22241.0, capped=None, power=0.996), None, loop) is None


def test_a_row_flags_a_device_time_the_gpu_slowed_for_its_temperature() -> None:
    """A poorly cooled H100 at 86-88 °C read its sweep 5-16% faster than 15 s of each op back
    to back, fp32 (not power-capped) too, its power well under the limit: only NVML's
    clock-event reasons right after the samples said why. A power cap alone is no flag."""
    from types import SimpleNamespace

    from runner.execution.sustained import sustained_columns

    hot = {"throttle_reasons_timed": "SwPowerCap,SwThermalSlowdown", "temperature_c_timed": 87}
    flag = sustained_flag(measurement(2640.0, capped=False, power=0.74), None, None, hot)
    assert "lowering its clock for its temperature" in flag
    assert "SwThermalSlowdown at 87 °C" in flag
    hardware = {"throttle_reasons_timed": "HwThermalSlowdown", "temperature_c_timed": None}
    assert "(HwThermalSlowdown)" in sustained_flag(measurement(200.0), None, None, hardware)
    capped = {"throttle_reasons_timed": "SwPowerCap", "temperature_c_timed": 70}
    assert sustained_flag(measurement(200.0), None, None, capped) is None
    assert sustained_flag(measurement(200.0), None, None, {}) is None  # not read (CPU, no NVML)
    times = SimpleNamespace(heat_before=None, loop=None, max_clock_mhz=None,
                            device=SimpleNamespace(measurement=measurement(200.0)))
    assert "SwThermalSlowdown" in sustained_columns(times, None, hot)["sustained_flag"]


def test_a_trial_hands_the_gpu_s_maximum_clock_to_the_heat_it_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``time_trial`` reads the GPU's maximum clock and passes it on: without it, light
    samples held at the power limit could never leave the device hot."""
    import dataclasses
    from types import SimpleNamespace

    import torch

    from runner.execution import timed
    from runner.timing.measurement import TimerPlan
    from runner.timing.series import Reading

    held = dataclasses.replace(measurement(5.5, capped=False, power=0.97),
                               clock_mhz=(1717.0,) * 3)
    monkeypatch.setattr(timed, "device_time_of",
                        lambda call, state, **kw: SimpleNamespace(measurement=held))
    monkeypatch.setattr(timed, "measure",
                        lambda *args, **kw: measurement(5.6, capped=False, power=None))
    monkeypatch.setattr(timed, "_memory", lambda device: {})
    timer = SimpleNamespace(plan=TimerPlan(), device_time=True, flush_l2=False)
    prepared = SimpleNamespace(fn=lambda: None, before_sample=None)

    reads: list[int] = []

    def read() -> Reading:
        reads.append(1)
        return Reading(max_clock_mhz=1980.0)

    handed: list[float | None] = []

    def heat_after(read_clock: Any, state: Any = None) -> Any:
        state = state or timed.WorkerTiming()
        times = timed.time_trial(timer, prepared, torch.device("cpu"), None, 0, state,
                                 read_clock=read_clock)
        handed.append(times.max_clock_mhz)  # and to the row's flag (sustained_columns)
        return state.heat.before("cpu")

    state = timed.WorkerTiming()
    assert heat_after(read, state).hot and heat_after(read, state).hot
    assert len(reads) == 1  # the maximum clock is fixed: read once per device and worker
    assert not heat_after(None).hot  # no maximum read: not known to be held
    assert handed == [1980.0, 1980.0, None]
