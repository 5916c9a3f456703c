"""``runner.timing.device_time`` driven by a fake device: K, the fallback order and its
reasons, host-blocked samples and the memory bound, with exact numbers.

Durations are in seconds. The fake device records what it was asked to do; each sample's
device time is scripted per call, so a sample of K calls reads exactly K × per_call_s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeClock

from runner.timing import back_to_back as bb
from runner.timing import device_time as dt
from runner.timing.chunks import CHUNK_S
from runner.timing.device_plan import DeviceTimeOptions, SampleWork
from runner.timing.device_time import bound_calls_by_memory, measure_device_time
from runner.timing.gapped import Timed
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.series import Reading
from runner.timing.settle import CAPPED_MIN_S, CAPPED_SAMPLE_S
from runner.timing.timer import LoopTimeOptions, choose_calls_per_sample, measure

US = 1e-6
MIB = 2**20


def plan(**overrides: Any) -> TimerPlan:
    base = dict(warmup_calls=2, warmup_s=0.0, min_samples=3, max_samples=3, target_rel=0.01,
                max_time_s=1e9, batch_below_us=1000.0, batch_target_us=1000.0,
                max_calls_per_sample=10000)
    base.update(overrides)
    return TimerPlan(**base)


def loop(calls: int, median_s: float = 5 * US, capped: bool | None = None) -> Measurement:
    return Measurement(samples_s=(median_s,) * 3, calls_per_sample=calls, warmup_calls=1,
                       warmup_s=0.0, stop_reason="converged", target_rel=0.01,
                       power_capped=capped)


class FakeDevice:
    """A ``device_time.Device``: every sample takes ``per_call_s`` per call on the device;
    the host's enqueue takes ``host_s`` (or the next value of ``host_script``)."""

    def __init__(self, per_call_s: float = 1 * US, *, capture_error: Exception | None = None,
                 kernels: int | None = 1, free: int = 80 * 2**30, host_s: float = 10 * US,
                 host_script: list[float] | None = None,
                 clock_at: Callable[[float], float] | None = None) -> None:
        self.per_call_s = per_call_s
        self.clock_at = clock_at  # the effective SM clock (MHz) at device time t, if probed
        self.capture_error = capture_error
        self.kernels = kernels
        self.free = free
        self.host_s = host_s
        self.host_script = list(host_script or [])
        self.captured: list[int] = []  # K of each capture
        self.spins: list[float] = []  # spin asked for, per sample
        self.flushes = 0
        self.calls = 0
        self.now = 0.0
        self.chunks: list[tuple[int, float]] = []  # (samples, spin) of each steady chunk
        self.fills: list[int] = []  # unsampled calls of the work ahead of each steady chunk
        self.ahead_s = 0.0  # device work queued and not yet waited for

    def wall(self) -> float:
        return self.now

    def free_bytes(self) -> int:
        return self.free

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
        if self.capture_error is not None:
            raise self.capture_error
        self.captured.append(calls)

        def replay() -> None:
            self.calls += calls
        return replay

    def kernels_per_call(self, fn: Callable[[], Any]) -> int | None:
        return self.kernels

    def timed(self, work: Callable[[], Any], spin_s: float,
              flush: Callable[[], None] | None) -> Timed:
        if flush:
            flush()
            self.flushes += 1
        self.spins.append(spin_s)
        before = self.calls
        work()
        work_s = (self.calls - before) * self.per_call_s
        host_s = self.host_script.pop(0) if self.host_script else self.host_s
        self.now += spin_s + work_s
        return Timed(work_s=work_s, spin_s=spin_s, host_s=host_s)


    # Back-to-back chunks (the steady state): the device runs chunks in order; a chunk's
    # first event is reached early when the host's enqueue (``host_s`` or the script) took
    # longer than the spin plus the work still queued ahead of it.
    def enqueue(self, work: Callable[[], Any], samples: int, spin_s: float,
                before_sample: Callable[[], None] | None, fill: int = 0) -> dict[str, Any]:
        self.chunks.append((samples, spin_s))
        self.fills.append(fill)
        before = self.calls
        for _ in range(fill):  # unsampled work ahead of the samples: the device runs it too
            work()
        fill_s = (self.calls - before) * self.per_call_s
        times = []
        for _ in range(samples):
            if before_sample:
                before_sample()
            before = self.calls
            work()
            times.append((self.calls - before) * self.per_call_s)
        host_s = self.host_script.pop(0) if self.host_script else self.host_s
        chunk = {"times": times, "early": host_s >= spin_s + fill_s + self.ahead_s,
                 "fill_s": fill_s, "host_s": host_s}
        self.ahead_s += fill_s + sum(times)
        return chunk

    def reached(self, chunk: dict[str, Any]) -> bool:
        return chunk["early"]

    def queued_s(self, chunk: dict[str, Any]) -> float:
        return chunk["host_s"]

    def wait(self, chunk: dict[str, Any]) -> list[float]:
        self.ahead_s = max(0.0, self.ahead_s - chunk["fill_s"] - sum(chunk["times"]))
        self.now += chunk["fill_s"] + sum(chunk["times"])
        return chunk["times"]

    def finished(self, chunk: dict[str, Any]) -> bool:
        return True

    def clocks(self, chunk: dict[str, Any]) -> list[float | None] | None:
        if self.clock_at is None:
            return None
        return [self.clock_at(self.now)] * len(chunk["times"])


def run(device: FakeDevice, k: int, timer_plan: TimerPlan | None = None,
        loop_s: float = 5 * US, steady: bool = False, loop_capped: bool | None = None,
        **kwargs: Any) -> dt.DeviceTime:
    """The device time of a call whose loop time read ``loop_s`` with K = ``k``; the gapped
    (burst) protocol unless ``steady``. ``loop_capped``: what the loop's warm-up found."""
    def fn() -> None:
        device.calls += 1
    return measure_device_time(fn, timer_plan or plan(), loop(k, loop_s, loop_capped), device,
                               DeviceTimeOptions(wall=device.wall, steady=steady, **kwargs))


# ---------------------------------------------------------------------------------------
# K and the replay method
# ---------------------------------------------------------------------------------------

def test_graph_captures_the_loops_k_and_divides_by_it() -> None:
    # 200 calls of 3 µs: a replay of 600 µs fills more than half a 1 ms sample.
    device = FakeDevice(per_call_s=3 * US)
    result = run(device, 200)
    assert result.method == "graph" and result.reason is None
    assert device.captured == [200]
    m = result.measurement
    assert m.calls_per_sample == 200
    assert m.samples_s == pytest.approx((3 * US,) * 3)
    # three samples cannot bound a median at 95% (runner.timing.stats.median_ci_ranks)
    assert m.warmup_calls == 2 and m.stop_reason == "max_samples"
    assert m.warmup_s == pytest.approx(2 * (bb.SPIN_MIN_S + 200 * 3 * US))


def test_a_short_replay_is_captured_at_the_k_that_fills_half_a_sample() -> None:
    # The loop's launch-bound calls gave K = 200; a burst of 32 eager calls behind a spin
    # shows the device runs a call in 0.94 µs, so a replay of 200 would last 188 µs, on the
    # slope where the time per call depends on K: captured once, with ceil(500 / 0.94) = 532
    # calls (half a 1 ms sample), on the plateau.
    device = FakeDevice(per_call_s=0.94 * US)
    result = run(device, 200)
    assert device.captured == [532] and device.spins[0] == pytest.approx(2 * 32 * 5 * US
                                                                           + bb.SPIN_MIN_S)
    m = result.measurement
    assert m.calls_per_sample == 532 and m.samples_s == pytest.approx((0.94 * US,) * 3)
    assert run(FakeDevice(per_call_s=0.94 * US), 200,
               timer_plan=plan(max_calls_per_sample=300)).measurement.calls_per_sample == 300


def test_where_the_host_cannot_outrun_eager_calls_replays_of_the_loops_k_size_the_graph() -> None:
    # The burst's enqueue outlasts its spin (a call of many kernels): a graph of the loop's
    # K = 200 is captured, three replays time the device's call (0.94 µs), and the graph is
    # captured again with 532 calls.
    device = FakeDevice(per_call_s=0.94 * US, host_script=[1.0])
    result = run(device, 200)
    assert device.captured == [200, 532] and device.chunks[0] == (3, 3 * bb.SPIN_MIN_S)
    assert result.measurement.calls_per_sample == 532


def test_a_graph_too_large_for_memory_keeps_the_loops_k_with_a_note() -> None:
    class Limited(FakeDevice):
        def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
            if calls > 200:
                raise RuntimeError("CUDA out of memory")
            return super().capture(fn, calls)

    result = run(Limited(per_call_s=0.94 * US), 200)
    assert result.method == "graph" and result.measurement.calls_per_sample == 200
    assert result.reason == "graph: K=532 could not be captured (CUDA out of memory); K=200 kept"


def test_k_is_the_one_choose_calls_per_sample_chose_for_the_loop() -> None:
    # The loop's warm-up reads 7 µs per call: K = ceil(1000 / 7) = 143, and the device time's
    # graph holds exactly that many calls.
    timer_plan = plan()
    clock = FakeClock(per_call_s=7 * US)
    loop_time = measure(clock.op(), timer_plan, clock, LoopTimeOptions(wall=clock.wall))
    assert loop_time.calls_per_sample == choose_calls_per_sample(7 * US, timer_plan) == 143
    device = FakeDevice(per_call_s=5 * US)
    measure_device_time(lambda: None, timer_plan, loop_time, device,
                        DeviceTimeOptions(wall=device.wall))
    assert device.captured == [143] and device.chunks  # steady by default


def test_cold_l2_times_one_call_per_sample_after_a_flush() -> None:
    device = FakeDevice(per_call_s=20 * US)
    flushes = []
    result = run(device, 50, loop_s=21 * US, flush=lambda: flushes.append(1))
    assert result.method == "graph"
    assert device.captured == [1]
    assert result.measurement.samples_s == pytest.approx((20 * US,) * 3)
    assert device.flushes == len(flushes) == 2 + 3  # every warm-up and timed sample


# ---------------------------------------------------------------------------------------
# Fallback order and reasons
# ---------------------------------------------------------------------------------------

def test_capture_failure_falls_back_to_blocked_with_the_reason() -> None:
    device = FakeDevice(per_call_s=3 * US, capture_error=RuntimeError(
        "operation not permitted when stream is capturing\nmore"))
    result = run(device, 10)
    assert result.method == "blocked"
    assert result.reason == ("graph capture failed: operation not permitted when stream is "
                             "capturing")
    assert result.measurement.calls_per_sample == 10
    assert result.measurement.samples_s == pytest.approx((3 * US,) * 3)


def test_a_capture_blocker_skips_the_graph_without_trying() -> None:
    device = FakeDevice()
    result = run(device, 4, capture_blocker="compile=reduce-overhead replays CUDA graphs")
    assert device.captured == []
    assert result.method == "blocked"
    assert result.reason == "graph: compile=reduce-overhead replays CUDA graphs"


def test_blocked_k_is_capped_by_the_launch_queue_budget() -> None:
    device = FakeDevice(capture_error=RuntimeError("no"), kernels=100)
    result = run(device, 10)
    assert result.method == "blocked"
    assert result.measurement.calls_per_sample == dt.LAUNCH_QUEUE_BUDGET // 100 == 2
    assert "K cut from 10 to 2 (100 kernels per call" in result.reason


def test_a_call_with_more_kernels_than_the_budget_is_unavailable() -> None:
    device = FakeDevice(capture_error=RuntimeError("no"), kernels=400)
    result = run(device, 1)
    assert result.method == "unavailable" and result.measurement is None
    assert "one call launches 400 kernels" in result.reason
    assert result.reason.startswith("graph capture failed: no; ")


def test_uncounted_kernels_make_it_unavailable() -> None:
    result = run(FakeDevice(capture_error=RuntimeError("no"), kernels=None), 1)
    assert result.method == "unavailable"
    assert "could not count the kernels" in result.reason


def test_a_host_that_keeps_blocking_makes_blocked_unavailable() -> None:
    # 2 warm-up samples, then every sample's enqueue outlasts its spin: never used.
    device = FakeDevice(capture_error=RuntimeError("no"), host_s=1.0,
                        host_script=[10 * US] * 2)
    result = run(device, 10)
    assert result.method == "unavailable" and result.measurement is None
    assert f"{bb.MAX_RETAKES + 1} samples in a row" in result.reason
    assert result.reason.startswith("graph capture failed: no; blocked: the host blocked")


def test_a_blocked_graph_sample_falls_back_to_blocked() -> None:
    # Graph: the K estimate, warm-up ×2, then 4 blocked samples abandon it; blocked works.
    device = FakeDevice(host_s=10 * US, host_script=[10 * US] * 3 + [1.0] * 4)
    result = run(device, 5)
    assert result.method == "blocked"
    assert "graph: the host blocked" in result.reason


def test_a_blocked_sample_is_retaken_never_used() -> None:
    # Third timed sample blocked (host 1 s): retaken, the samples stay exact, the reason
    # says so.
    device = FakeDevice(per_call_s=2 * US, host_script=[10 * US] * 4 + [1.0])
    result = run(device, 4)
    assert result.method == "graph"
    assert result.measurement.samples_s == pytest.approx((2 * US,) * 3)
    assert len(device.spins) == 1 + 2 + 4  # the eager burst that sized K, warm-up, samples
    assert result.reason == "1 sample(s) retaken: the host's enqueue outlasted the spin"


def test_warm_up_grows_the_spin_to_cover_the_host() -> None:
    # The first warm-up sample's enqueue takes 80 µs > the 50 µs spin: the spin doubles it.
    device = FakeDevice(host_script=[80 * US] + [10 * US] * 10)
    result = run(device, 1)
    assert result.method == "graph"
    assert device.spins[0] == bb.SPIN_MIN_S
    assert device.spins[1:] == [pytest.approx(160 * US)] * 4


def test_blocked_spin_covers_twice_the_loops_enqueue_of_k_calls() -> None:
    device = FakeDevice(capture_error=RuntimeError("no"))
    run(device, 10)  # loop median 5 µs per call
    assert device.spins[0] == pytest.approx(2 * 10 * 5 * US + bb.SPIN_MIN_S)


# ---------------------------------------------------------------------------------------
# Memory bound on K
# ---------------------------------------------------------------------------------------

def test_memory_bound_on_k() -> None:
    assert bound_calls_by_memory(200, None, 10 * MIB) == (200, None)
    assert bound_calls_by_memory(200, 0, 10 * MIB) == (200, None)
    assert bound_calls_by_memory(4, MIB, 1000 * MIB) == (4, None)  # 500 fit
    k, note = bound_calls_by_memory(200, 4 * MIB, 100 * MIB)  # half of 100 MiB / 4 MiB
    assert k == 12 and note == "K cut from 200 to 12: 4.0 MiB per call, 100 MiB free"
    k, note = bound_calls_by_memory(3, 600 * MIB, 1000 * MIB)
    assert k == 0 and "more than 50% of the 1000 MiB free" in note


def test_memory_bound_cuts_the_graphs_k_and_says_so() -> None:
    device = FakeDevice(free=100 * MIB)
    result = run(device, 200, bytes_per_call=4 * MIB)
    assert device.captured == [12]
    assert result.method == "graph" and result.measurement.calls_per_sample == 12
    assert result.reason == "K cut from 200 to 12: 4.0 MiB per call, 100 MiB free"


def test_a_call_too_big_for_memory_is_unavailable_without_capture() -> None:
    device = FakeDevice(free=100 * MIB)
    result = run(device, 1, bytes_per_call=80 * MIB)
    assert device.captured == [] and result.method == "unavailable"
    assert "one call allocates 80 MiB" in result.reason


def test_a_graph_slower_than_the_loop_falls_back_to_blocked() -> None:
    # The loop reads 5 µs per call (device + host gaps); a graph replay reading 8 µs runs
    # different work (a copy captured as a memcpy node): the blocked method is used.
    class SlowGraph(FakeDevice):
        def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
            self.captured.append(calls)

            def replay() -> None:
                self.calls += calls * 8 // 5  # the device works 8 µs per call in the graph
            return replay

    device = SlowGraph(per_call_s=5 * US)
    result = run(device, 100)
    assert result.method == "blocked"
    assert result.reason == ("graph: a replay read 8 µs per call, slower than the loop's 5 µs: "
                             "the graph runs the work differently (a large copy captured as a "
                             "memcpy node) or the clocks dropped")
    assert result.measurement.samples_s == pytest.approx((5 * US,) * 3)


def test_a_graph_within_the_tolerance_of_the_loop_is_kept() -> None:
    device = FakeDevice(per_call_s=5 * US * dt.REPLAY_SLOWER_TOL)
    assert run(device, 5).method == "graph"


def test_a_host_that_waits_on_the_device_is_given_up_in_the_warm_up() -> None:
    # A call with a sync inside: the host's enqueue always outlasts the spin (it waits for
    # it), however long the spin grows. After MAX_SPIN_GROWTHS growths: unavailable.
    class Syncing(FakeDevice):
        def timed(self, work, spin_s, flush):
            t = super().timed(work, spin_s, flush)
            return Timed(work_s=t.work_s, spin_s=spin_s, host_s=spin_s + 100 * US)

    device = Syncing(capture_error=RuntimeError("no"))
    result = run(device, 1, plan(warmup_calls=100))
    assert result.method == "unavailable"
    assert len(device.spins) == bb.MAX_SPIN_GROWTHS + 1
    assert "still outlasted" in result.reason and "waits on the device" in result.reason




# ---------------------------------------------------------------------------------------
# Back-to-back samples (the steady state, the default)
# ---------------------------------------------------------------------------------------

def test_steady_samples_run_back_to_back_two_chunks_ahead() -> None:
    # 1 ms samples: 5 per chunk (CHUNK_S = 5 ms). Only the first chunk is held; every later
    # one is queued behind the chunk still running, with no gap.
    device = FakeDevice(per_call_s=5 * US)
    result = run(device, 200, steady=True,
                 timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=30))
    assert result.method == "graph" and result.reason is None
    # The first chunk is held by one more replay (1 ms: it covers each sample's enqueue,
    # SPIN_MIN_S each, and a margin), not by a spin: a spin is a low-power gap.
    assert device.chunks[0] == (5, 0.0) and device.fills[0] == 1
    assert all(chunk == (5, 0.0) for chunk in device.chunks[1:-1])
    assert not any(device.fills[1:])
    # Once 30 samples were on their way, the chunk queued past them is a short one: it is
    # waited for and (the median converged) never used.
    assert device.chunks[-1] == (1, 0.0)
    m = result.measurement
    assert m.samples_s == pytest.approx((5 * US,) * 30)
    # The loop could not tell whether the op is power-capped: the warm-up is judged, from
    # DEVICE_WARMUP_S on, once two windows hold a chunk each (4 chunks, 20 ms, and the
    # first chunk's 1 ms of fill).
    assert m.settled is True
    assert m.warmup_s == pytest.approx(bb.DEVICE_WARMUP_S + 1e-3, abs=0.5e-3)
    # 4 warm-up chunks + 6 sampled chunks, and the one queued past the last sample was
    # waited for, not used.
    assert len(device.chunks) == 4 + 6 + 1 and device.ahead_s == 0


def test_a_chunk_the_device_reached_early_is_retaken_never_used() -> None:
    # The third sampled chunk's host enqueue took longer than the work queued ahead of it.
    device = FakeDevice(per_call_s=5 * US, host_script=[0.0] * 7 + [1.0])
    result = run(device, 200, steady=True,
                 timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=30))
    assert result.method == "graph"
    assert result.measurement.samples_s == pytest.approx((5 * US,) * 30)
    assert "1 chunk(s) retaken" in result.reason


def test_steady_blocked_runs_back_to_back_within_the_launch_budget() -> None:
    device = FakeDevice(per_call_s=50 * US, capture_error=RuntimeError("no"), kernels=100)
    result = run(device, 10, steady=True)
    assert result.method == "blocked" and result.measurement.calls_per_sample == 2
    # 2 calls × 100 kernels per sample: one sample per chunk fits the 256-launch budget, and
    # only the first chunk waits behind a spin (no idle gap for the power cap to recover in).
    assert all(samples == 1 for samples, _ in device.chunks)
    assert device.chunks[0][1] > 0 and all(spin == 0 for _, spin in device.chunks[1:])


def test_a_host_slower_than_the_device_holds_every_blocked_chunk_behind_a_spin() -> None:
    # The host's enqueue of a chunk (400 µs) outlasts its 255 µs of work (51 samples: the
    # launch budget). The first chunk's spin covers it (60 µs per sample, and SPIN_MIN_S);
    # the next, queued behind it, is reached early and retaken, and from then on every chunk
    # waits behind such a spin.
    device = FakeDevice(per_call_s=5 * US, capture_error=RuntimeError("no"), host_s=400 * US)
    result = run(device, 1, steady=True)
    assert result.method == "blocked"
    assert result.measurement.samples_s == pytest.approx((5 * US,) * 3)
    assert device.chunks[0] == (51, pytest.approx(51 * 60 * US + bb.SPIN_MIN_S))
    assert device.chunks[1][1] == 0.0 and "1 chunk(s) retaken" in result.reason
    assert all(spin == pytest.approx(n * 60 * US + bb.SPIN_MIN_S)
               for n, spin in device.chunks[2:])


def test_a_host_slower_than_the_device_holds_every_graph_chunk_behind_a_spin() -> None:
    # A graph replay of a tiny op: the host's replays and events (400 µs a chunk) outlast the
    # device's work. The graph stays the method; every chunk waits behind a grown spin.
    device = FakeDevice(per_call_s=5 * US, host_s=400 * US)
    result = run(device, 1, steady=True)
    assert result.method == "graph", result.reason
    assert result.measurement.samples_s == pytest.approx((5 * US,) * 3)
    assert all(spin > 0 for _, spin in device.chunks[3:])


def test_a_chunk_whose_enqueue_outlasts_many_sample_spins_still_gets_a_covering_spin() -> None:
    # 1 ms of host enqueue per sample (a fork/join replay on two streams): past
    # MAX_SPIN_GROWTHS doublings of SPIN_MIN_S, but a chunk's spin stays well under
    # SPIN_MAX_S, so the warm-up keeps growing it and the graph is kept.
    class SlowPerSample(FakeDevice):
        def enqueue(self, work: Any, samples: int, spin_s: float, before: Any,
                    fill: int = 0) -> Any:
            self.host_s = samples * 1000 * US
            return super().enqueue(work, samples, spin_s, before, fill)

    device = SlowPerSample(per_call_s=5 * US)
    result = run(device, 1, steady=True)
    assert result.method == "graph", result.reason
    assert max(spin / n for n, spin in device.chunks) >= 1000 * US
    assert 1000 * US / bb.SPIN_MIN_S > 2 ** bb.MAX_SPIN_GROWTHS


def test_a_host_that_waits_on_the_device_makes_steady_blocked_unavailable() -> None:
    device = FakeDevice(capture_error=RuntimeError("no"), host_s=1.0)
    result = run(device, 1, steady=True)
    assert result.method == "unavailable" and result.measurement is None
    assert "blocked: the host" in result.reason and device.chunks[-1][1] > device.chunks[0][1]


def test_the_samples_clock_is_recorded_per_chunk() -> None:
    from runner.timing.series import Reading

    readings = iter([1980.0] * 20 + [1500.0, 1515.0, 1500.0] * 10)
    device = FakeDevice(per_call_s=5 * US)
    result = run(device, 200, steady=True, timer_plan=plan(max_samples=30, min_samples=30),
                 read_clock=lambda: Reading(clock_mhz=next(readings)))
    assert result.measurement.clock_mhz[:3] == (1980.0, 1980.0, 1980.0)


# ---------------------------------------------------------------------------------------
# The row's columns agree: clock note, energy at the device time, consistency flag
# ---------------------------------------------------------------------------------------

def _with_clocks(clocks: tuple[float, ...], settled: float | None) -> Measurement:
    return Measurement(samples_s=(1e-3,) * 3, calls_per_sample=1, warmup_calls=1,
                       warmup_s=1.5, stop_reason="converged", target_rel=0.01, settled=True,
                       settled_clock_mhz=settled, clock_mhz=clocks)


def test_clock_note_fires_only_when_the_samples_clock_moved() -> None:
    from runner.execution.measured import samples_clock_columns

    capped = samples_clock_columns(_with_clocks((1500, 1515, 1500), 1500))
    assert capped["clock_note"] is None  # power-capped, but steady: no note
    assert capped["sm_clock_mhz_samples_median"] == 1500
    assert capped["sm_clock_mhz_samples_min"] == 1500
    moved = samples_clock_columns(_with_clocks((1980, 1800, 1500), 1980))
    assert "moved from 1980 to 1500 MHz" in moved["clock_note"]
    assert "settled at 1980 MHz" in moved["clock_note"]
    # The capped clock's swing around a steady level (±3%, no drift) is not a move.
    swing = samples_clock_columns(_with_clocks((1300, 1380, 1340) * 20, 1340))
    assert swing["clock_note"] is None
    assert samples_clock_columns(None)["sm_clock_mhz_samples_median"] is None


def test_consistency_flag_checks_power_against_the_limit_and_energy_time_against_gpu_time(
) -> None:
    from runner.execution.measured import consistency_flag

    ok = {"avg_power_W": 700.0, "power_limit_w": 700.0, "energy_time_per_call_us": 1684.0,
          "gpu_time_us": 1650.0}
    assert consistency_flag(ok) is None
    # The rows of the burst era: 1164 mJ per call over a 1404 µs device time is 829 W.
    burst = {**ok, "avg_power_W": 829.0, "gpu_time_us": 1404.0}
    flag = consistency_flag(burst)
    assert "avg_power_W 829 W is above 1.03 × the 700 W power limit" in flag
    assert "differ by +19.9%" in flag
    assert consistency_flag({**ok, "avg_power_W": 721.0}) is None  # within 3%
    assert consistency_flag({"gpu_time_us": 5.0}) is None  # nothing to compare


def test_energy_per_call_is_taken_at_the_device_time() -> None:
    from runner.execution.energy import Window, energy_columns

    load = Window(steps=[(0.1 * i, 70_000 * i) for i in range(1, 31)], start_s=0.0, end_s=3.0,
                  calls=2000)  # 700 W; the window ran 1.5 ms per call
    out = energy_columns(load, None, flops=None, bytes_moved=None, method="graph",
                         ramp_s=0.0, device_time_s=1.4e-3)
    assert out["avg_power_W"] == pytest.approx(700.0)
    assert out["energy_time_per_call_us"] == pytest.approx(1500.0)
    assert out["energy_per_call_mJ"] == pytest.approx(700.0 * 1.4e-3 * 1e3)


# ---------------------------------------------------------------------------------------
# The clock the samples ran at, and power-capped ops
# ---------------------------------------------------------------------------------------

MAX_CLOCK = Reading(clock_mhz=1980.0, power_share=0.2, max_clock_mhz=1980.0)
#: NVML's clock (slow to update) still at the boost, the board at its power limit.
AT_CAP = Reading(clock_mhz=1980.0, power_share=0.97, max_clock_mhz=1980.0)


def test_each_sample_records_the_clock_its_probes_read() -> None:
    device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1900.0 + (t > 0.03) * 50)
    result = run(device, 200, steady=True, timer_plan=plan(warmup_s=0.05, max_samples=30,
                                                           min_samples=30),
                 read_clock=lambda: MAX_CLOCK)
    m = result.measurement
    assert len(m.clock_mhz) == len(m.samples_s) == 30  # one per sample, not per chunk
    assert set(m.clock_mhz) <= {1900.0, 1950.0} and m.power_capped is False


def test_an_op_the_loop_found_uncapped_hands_over_after_a_short_chunk() -> None:
    device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1975.0)
    result = run(device, 200, steady=True, loop_capped=False, read_clock=lambda: MAX_CLOCK,
                 timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=30))
    m = result.measurement
    # one chunk of a quarter of the usual size: 5 samples of 1 ms // 4 = 1 sample, behind
    # one replay of fill
    assert m.warmup_calls == 1 and m.warmup_s == pytest.approx(2 * CHUNK_S / 5, rel=0.05)
    assert m.settled is True and m.power_capped is False
    # The full chunk queued behind the short one is held too (the device would run the
    # short chunk before the host had queued it), by a replay of fill; the rest follow with
    # neither.
    assert device.fills[:2] == [1, 1] and not any(device.fills[2:])
    assert all(spin == 0.0 for _, spin in device.chunks)


def test_a_capped_op_warms_up_and_samples_long_enough_to_span_the_swing() -> None:
    # The loop did not see it capped (it left the GPU idle between calls), but the first
    # back-to-back chunk runs held down: the full capped warm-up, then samples over a second.
    device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1450.0)
    result = run(device, 200, steady=True, loop_capped=False, read_clock=lambda: AT_CAP,
                 timer_plan=plan(warmup_s=0.05, max_samples=100000, min_samples=10,
                                 settle_max_s=5.0))
    m = result.measurement
    assert m.power_capped is True and m.warmup_s >= CAPPED_MIN_S
    assert sum(m.samples_s) * m.calls_per_sample >= 0.99 * CAPPED_SAMPLE_S
    # the settled half of the warm-up opens the samples: a second of them is paid already,
    # so few fresh ones follow
    assert m.settled_samples > 0
    fresh_s = sum(m.samples_s[m.settled_samples:]) * m.calls_per_sample
    assert fresh_s < 0.5 * CAPPED_SAMPLE_S
    assert sum(m.samples_s[:m.settled_samples]) * m.calls_per_sample == pytest.approx(
        m.warmup_s / 2, rel=0.05)


def test_an_energy_window_gets_no_warm_up_samples() -> None:
    # the watch counts the energy of the calls inside its window: its samples are its own
    device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1450.0)
    watch = RecordingWatch(window_s=0.05)
    result = run(device, 200, steady=True, loop_capped=False, read_clock=lambda: AT_CAP,
                 timer_plan=plan(warmup_s=0.05, max_samples=100000, min_samples=10,
                                 settle_max_s=5.0), watch=watch)
    assert result.measurement.power_capped is True
    assert result.measurement.settled_samples == 0


def test_an_op_that_starts_hot_warms_up_for_the_longer_minimum() -> None:
    # Uncapped at full clock, flat: 20 ms of warm-up from cool, HOT_MIN_S right after hot work.
    from runner.timing.heat import HOT_MIN_S

    for min_s in (bb.DEVICE_WARMUP_S, HOT_MIN_S):
        device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1975.0)
        result = run(device, 200, steady=True, read_clock=lambda: MAX_CLOCK,
                     timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=10),
                     min_s=min_s)
        m = result.measurement
        assert m.power_capped is False and min_s <= m.warmup_s < min_s + 0.02


class RecordingWatch:
    """A ``back_to_back.Watch`` that logs what the sampler told it."""

    def __init__(self, window_s: float) -> None:
        self.window_s, self.log, self.polls, self.calls = window_s, [], 0, 0

    def begin(self) -> None:
        self.log.append("begin")

    def poll(self) -> None:
        self.polls += 1

    def chunk(self, calls: int, busy_s: float) -> None:
        self.log.append("chunk")
        self.calls += calls

    def discard(self) -> None:
        self.log.append("discard")


def test_a_watched_window_spans_window_s_and_is_told_every_chunk_after_the_first() -> None:
    class Busy(FakeDevice):  # each chunk is still running when the host first asks
        def finished(self, chunk: dict[str, Any]) -> bool:
            seen = chunk.get("asked", False)
            chunk["asked"] = True
            return seen

    device, watch = Busy(per_call_s=5 * US), RecordingWatch(0.5)
    result = run(device, 200, steady=True, watch=watch,
                 timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=10))
    m = result.measurement
    # 1 ms samples: the window runs 0.5 s whatever max_samples says (less the last chunk,
    # still queued when the span was reached), so 450-500 samples.
    assert sum(m.samples_s) * m.calls_per_sample >= 0.44 and len(m.samples_s) > 400
    assert watch.log[0] == "begin" and watch.log.count("begin") == 1
    # every sampled chunk after the first is counted: WATCHED_CHUNK_S of 1 ms samples each,
    # at most as many as keep three chunks in flight within the launch budget
    per_chunk = min(round(bb.WATCHED_CHUNK_S / 1e-3),
                    2 * bb.LAUNCH_QUEUE_BUDGET // (bb.WATCHED_AHEAD * bb.SAMPLE_LAUNCHES))
    assert watch.calls == (len(watch.log) - 1) * per_chunk * 200
    assert watch.polls >= len(watch.log)


def test_a_watched_window_that_falls_behind_is_dropped_and_the_device_time_kept() -> None:
    # The host's enqueue of a long watched chunk outlasts any spin (50 ms a chunk, 20 µs
    # without the watch): the watched run is abandoned, the plain one kept.
    class SlowOnLongChunks(FakeDevice):
        def enqueue(self, work: Any, samples: int, spin_s: float, before: Any,
                    fill: int = 0) -> Any:
            self.host_s = 1.0 if samples > 5 else 20 * US
            return super().enqueue(work, samples, spin_s, before, fill)

    device, watch = SlowOnLongChunks(per_call_s=5 * US), RecordingWatch(0.5)
    result = run(device, 200, steady=True, watch=watch,
                 timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=10))
    assert result.method == "graph" and result.measurement is not None
    assert watch.log[-1] == "discard" and "energy: not read over the samples" in result.reason


def test_effective_mhz_is_cycles_over_nanoseconds_and_none_where_unresolved() -> None:
    from runner.timing.clock_probe import effective_mhz

    # [ns, cycles] per probe: 1 ms at 1500 MHz, then a pair 10 µs apart (too close to
    # resolve), then a probe that did not run (zeros: the counter went backwards).
    stamps = [0, 0, 1_000_000, 1_500_000, 1_010_000, 1_515_000, 0, 0]
    assert effective_mhz(stamps) == [pytest.approx(1500.0), None, None]


def test_an_op_nobody_could_tell_is_judged_not_handed_over() -> None:
    # No probe and no NVML: the loop could not tell capped or not (None), so the device
    # time's warm-up is judged from DEVICE_WARMUP_S on, not a one-chunk hand-over.
    device = FakeDevice(per_call_s=5 * US)
    told = run(device, 200, steady=True, loop_capped=None,
               timer_plan=plan(warmup_s=0.05, max_samples=30, min_samples=30)).measurement
    assert told.power_capped is None and told.warmup_s >= bb.DEVICE_WARMUP_S


def test_a_k_that_cannot_be_captured_keeps_the_smaller_graph_and_says_so() -> None:
    class NoRoom(FakeDevice):
        def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
            if calls > 200:
                raise RuntimeError("CUDA out of memory")
            return super().capture(fn, calls)

    device = NoRoom(per_call_s=0.94 * US)
    result = run(device, 200)
    assert result.method == "graph" and result.measurement.calls_per_sample == 200
    assert "K=532 could not be captured (CUDA out of memory); K=200 kept" in result.reason


# ---------------------------------------------------------------------------------------
# A graph that runs other work than the eager calls
# ---------------------------------------------------------------------------------------

class CopyDevice(FakeDevice):
    """A device on which a captured call takes ``graph_per_call_s`` and an eager one
    ``per_call_s`` (a large copy captured as a graph's memcpy node runs slower)."""

    def __init__(self, graph_per_call_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.graph_per_call_s = graph_per_call_s

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
        replay = super().capture(fn, calls)
        extra = calls * (self.graph_per_call_s / self.per_call_s - 1)

        def slower() -> None:
            replay()
            self.calls += extra  # counted in eager calls' time: each replayed call is slower
        return slower


def test_a_graph_slower_than_eager_calls_gives_way_to_the_eager_measurement() -> None:
    timer_plan = plan(warmup_s=0.01, max_samples=20, min_samples=10)
    copy = CopyDevice(graph_per_call_s=880 * US, per_call_s=712 * US)
    result = run(copy, 1, timer_plan, loop_s=712 * US, steady=True)
    assert result.method == "blocked"
    assert "eager calls back to back 712 µs" in result.reason and "880 µs" in result.reason
    assert "(its samples 880 µs)" in result.reason
    assert result.measurement.stats.median == pytest.approx(712 * US)
    # A graph that agrees with the eager calls (within EAGER_AGREE_TOL) is kept.
    same = CopyDevice(graph_per_call_s=715 * US, per_call_s=712 * US)
    kept = run(same, 1, timer_plan, loop_s=712 * US, steady=True)
    assert kept.method == "graph" and kept.measurement.stats.median == pytest.approx(715 * US)
    # Short ops are not checked: the host cannot keep their eager queue full.
    tiny = CopyDevice(graph_per_call_s=2.5 * US, per_call_s=2 * US)
    assert run(tiny, 300, timer_plan, loop_s=2 * US, steady=True).method == "graph"


def test_a_graph_sampled_while_the_clock_came_back_is_kept() -> None:
    """The replays read slow while the device was still held down (after capped work), and
    at the eager speed by the time the check ran: replayed again beside the eager calls, the
    graph agrees, and its samples stand (not measured again by the blocked method)."""

    class Recovering(CopyDevice):
        def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
            replay = FakeDevice.capture(self, fn, calls)

            def slow_until_back() -> None:  # slower by the state of the moment, not the graph
                replay()
                self.calls += calls * (self.graph_per_call_s / self.per_call_s - 1)
            return slow_until_back

        def timed(self, work: Callable[[], Any], spin_s: float,
                  flush: Callable[[], None] | None) -> Timed:
            self.graph_per_call_s = self.per_call_s  # the clock is back by the first burst
            return super().timed(work, spin_s, flush)

    timer_plan = plan(warmup_s=0.01, max_samples=20, min_samples=10)
    device = Recovering(graph_per_call_s=22.5e3 * US, per_call_s=21.4e3 * US)
    result = run(device, 1, timer_plan, loop_s=21.4e3 * US, steady=True)
    assert result.method == "graph", result.reason
    assert result.measurement.stats.median == pytest.approx(22.5e3 * US)  # what it sampled
    assert "the device sped up after the samples" in result.reason, result.reason


# ---------------------------------------------------------------------------------------
# The chunk stream's transitions (back_to_back.ChunkStream), one chunk at a time
# ---------------------------------------------------------------------------------------

def stream_of(device: FakeDevice) -> bb.ChunkStream:
    """1 ms samples of one call each: 5 samples a chunk, two chunks in flight."""
    def work() -> None:
        device.calls += 1000
    return bb.ChunkStream(SampleWork(work, 1, bb.SPIN_MIN_S, sample_s=1e-3), plan(), device,
                          None, None, handover=False)


def test_an_unheld_chunk_reached_early_makes_every_chunk_wait_behind_a_spin() -> None:
    # The first chunk is held and valid; the second, queued behind it with no spin, is
    # reached early (a 1 s enqueue): retaken, and from then on every chunk is held.
    device = FakeDevice(host_script=[0.0, 1.0])
    stream = stream_of(device)
    assert len(stream.next_chunk(True)) == 5 and not stream.hold_every
    assert [spin > 0 for _, spin in device.chunks] == [True, False]
    stream.next_chunk(True)
    assert stream.hold_every and stream.retaken == 0  # the warm-up's retakes are not counted
    assert all(spin > 0 for _, spin in device.chunks[2:]) and stream.spin_s == bb.SPIN_MIN_S
    device.host_script = [1.0]  # a sampled chunk reached early (the next queued) is counted
    stream.next_chunk(False)
    stream.next_chunk(False)
    assert stream.retaken == 1 and stream.spin_s == bb.SPIN_MIN_S  # sampling never grows it
    stream.drain()
    assert not stream.inflight and device.ahead_s == 0


def test_a_replay_stream_that_holds_every_chunk_holds_them_with_its_own_work() -> None:
    """Once the host has fallen behind, every chunk is held. A replay's chunks are held by
    more replays (unsampled), never by a spin: a spin is a low-power gap, and on an H100 the
    samples after such gaps ran at a higher clock than back-to-back work sustains. A replay
    too short to outrun its own launch (under FILL_MIN_SAMPLE_S) still waits on a spin."""
    def stream(device: FakeDevice, sample_s: float) -> bb.ChunkStream:
        def work() -> None:  # a replay as long as its estimate
            device.calls += round(sample_s / device.per_call_s)
        return bb.ChunkStream(SampleWork(work, 1, bb.SPIN_MIN_S, sample_s=sample_s,
                                         fill=True), plan(), device, None, None,
                              handover=False)

    device = FakeDevice(host_script=[0.0, 1.0])
    replay = stream(device, 1e-3)
    replay.next_chunk(True)
    replay.next_chunk(True)
    assert replay.hold_every
    for _ in range(4):
        replay.next_chunk(False)
    assert all(spin == 0.0 for _, spin in device.chunks)
    # each held chunk: ceil((SPIN_MIN_S + SPIN_MIN_S × 5 samples) / 1 ms) = 1 replay of fill
    assert device.fills[0] == 1 and all(fill == 1 for fill in device.fills[2:])
    tiny = FakeDevice(host_script=[0.0, 1.0])
    short = stream(tiny, bb.FILL_MIN_SAMPLE_S / 2)
    for _ in range(4):
        short.next_chunk(True)
    assert not any(tiny.fills) and tiny.chunks[0][1] > 0


class HostBoundDevice(FakeDevice):
    """The host's enqueue grows with what it queues: ``per_fill_s`` per replay of fill and
    ``per_sample_s`` per sample (its clock probe, two events and the replay)."""

    def __init__(self, per_call_s: float, per_fill_s: float, per_sample_s: float) -> None:
        super().__init__(per_call_s)
        self.per_fill_s, self.per_sample_s = per_fill_s, per_sample_s

    def enqueue(self, work: Callable[[], Any], samples: int, spin_s: float,
                before_sample: Callable[[], None] | None, fill: int = 0) -> dict[str, Any]:
        self.host_s = fill * self.per_fill_s + samples * self.per_sample_s
        return super().enqueue(work, samples, spin_s, before_sample, fill=fill)


def test_a_replay_shorter_than_its_estimate_is_held_by_a_spin_not_a_fill() -> None:
    """An H100's two-stream fork-join replay of a 256³ matmul: 11 µs on the device, but
    estimated at 150 µs (the loop's time per call, which was the host's), a sample costing
    its host 40 µs (probe, events, replay), a replay of fill more than it gives the device
    on a loaded host. Held by fills of such replays, no chunk was ever covered, and the
    warm-up gave up after its growths. The first chunk's samples say how long a replay is:
    the chunks after it wait behind a spin, which covers the host."""
    device = HostBoundDevice(11 * US, per_fill_s=20 * US, per_sample_s=40 * US)

    def work() -> None:
        device.calls += 1
    stream = bb.ChunkStream(SampleWork(work, 1, bb.SPIN_MIN_S, sample_s=150 * US, fill=True),
                            plan(), device, None, None, handover=False)
    for _ in range(12):
        stream.next_chunk(True)
    assert device.fills[0] > 0  # the estimate's hold: a fill
    assert stream.sample_s == pytest.approx(11 * US) and not stream.fills
    assert not any(device.fills[stream.ahead + 1:])
    assert device.chunks[-1][1] > 0  # held by a spin


def test_a_fill_that_never_covers_the_host_is_named_when_the_warm_up_gives_up() -> None:
    """A 200 µs replay whose launch costs its host twice that: no fill covers it, and the
    reason names the hold that fell short (a fill, how many replays), not a spin."""
    device = HostBoundDevice(200 * US, per_fill_s=400 * US, per_sample_s=500 * US)

    def work() -> None:
        device.calls += 1
    stream = bb.ChunkStream(SampleWork(work, 1, bb.SPIN_MIN_S, sample_s=200 * US, fill=True),
                            plan(), device, None, None, handover=False)
    with pytest.raises(bb.HostBlocked, match=r"outlasted a fill of \d+ replays after"):
        for _ in range(100):
            stream.next_chunk(True)
    assert stream.fills and max(device.fills) > 1


def filled_stream(device: FakeDevice, fill: bool = True, watch: Any = None
                  ) -> bb.ChunkStream:
    """A sampling stream of 1 ms replays (5 a chunk) that holds every chunk: by more of the
    same work (``fill``), or by a spin."""
    def work() -> None:
        device.calls += 1000
    stream = bb.ChunkStream(SampleWork(work, 1, bb.SPIN_MIN_S, sample_s=1e-3, fill=fill),
                            plan(), device, None, watch, handover=False)
    stream.hold_every = True
    return stream


def test_a_filled_stream_grows_its_fill_while_sampling_instead_of_giving_up() -> None:
    """A host that stalls several chunks in a row while sampling (an H100 did, late in 15 s
    of samples) no longer ends a replay's samples: the fill is the op's own work, so it
    grows as the warm-up's hold does. A spinning stream still gives up after MAX_RETAKES."""
    stalls = [0.0, 0.0, 0.0] + [0.02] * (bb.MAX_RETAKES + 3)
    filled_device = FakeDevice(host_script=list(stalls))
    filled = filled_stream(filled_device)
    for _ in range(4):
        filled.next_chunk(False)
    assert filled.retaken > bb.MAX_RETAKES and filled.growths > 0
    assert max(filled_device.fills) > min(filled_device.fills) > 0
    assert all(spin == 0.0 for _, spin in filled_device.chunks)
    spinning = filled_stream(FakeDevice(host_script=list(stalls)), fill=False)
    with pytest.raises(bb.HostBlocked):
        for _ in range(4):
            spinning.next_chunk(False)


def test_a_filled_stream_retakes_a_lone_late_chunk_without_growing_its_fill() -> None:
    """An NVML read or a collection now and then makes one chunk late, dozens of times over
    15 s of samples. Each is only retaken: a fill grown on every one of them would multiply
    the device's work and, its growths spent, end the samples."""
    device = FakeDevice(host_script=([0.0] * 9 + [0.5]) * 20)
    stream = filled_stream(device)
    for _ in range(180):
        stream.next_chunk(False)
    assert stream.retaken >= 15 and stream.growths == 0
    assert len(set(device.fills)) == 1


def test_a_filled_stream_that_cannot_grow_keeps_the_retake_limit() -> None:
    """With its growths spent, a filled stream still retakes up to MAX_RETAKES chunks in a
    row, as a spinning one does, and gives up past them, saying how many."""
    device = FakeDevice(host_script=[0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
                        + [1.0] * (bb.MAX_RETAKES + 1) + [0.0] * 4)
    stream = filled_stream(device)
    stream.growths = stream.max_growths
    for _ in range(4):
        stream.next_chunk(False)  # the fourth: two late chunks retaken, then a valid one
    assert stream.retaken == 2
    with pytest.raises(bb.HostBlocked, match=f"reached {bb.MAX_RETAKES + 1} chunks in a row"):
        stream.next_chunk(False)


def test_a_watched_window_counts_the_fill_that_held_a_chunk() -> None:
    """The fill runs inside the energy window and draws its power: its calls count with the
    samples', or the energy per call would read high by the fill's share."""
    watch = RecordingWatch(0.5)
    device = FakeDevice()
    stream = filled_stream(device, watch=watch)
    for _ in range(6):
        stream.next_chunk(False)
    counted = len(watch.log) - 1  # chunks after the one that opened the window
    samples = sum(n for n, _ in device.chunks[1:1 + counted])
    fills = sum(device.fills[1:1 + counted])
    assert fills > 0 and watch.calls == (samples + fills) * stream.calls


def test_a_held_chunk_reached_early_in_the_warm_up_doubles_the_spin_until_blocked() -> None:
    device = FakeDevice(host_script=[1.0])
    stream = stream_of(device)
    stream.next_chunk(True)
    assert stream.growths == 1 and stream.spin_s == 2 * bb.SPIN_MIN_S
    device.host_s = 1.0  # no spin ever covers this host: the growths run out
    with pytest.raises(bb.HostBlocked, match=r"the host's enqueue \(1000000 µs, the last "
                                             r"chunk's\) still outlasted a \d+ µs spin"):
        for _ in range(100):
            stream.next_chunk(True)
    assert stream.growths > 1 and stream.spin_s == bb.SPIN_MIN_S * 2 ** stream.growths


def test_the_short_tail_queues_a_short_chunk_once_min_samples_are_on_their_way() -> None:
    device = FakeDevice()
    stream = stream_of(device)
    stream.short_tail = True
    for _ in range(6):
        stream.take()
    # min_samples = 3: a full chunk already holds them, so the next is short; one at a time,
    # so the one queued behind the short chunk is full again.
    assert [n for n, _ in device.chunks] == [5, 1, 5]


def test_a_capped_ops_power_share_is_what_its_samples_drew() -> None:
    """The averaged power is read once per sampled chunk: a board that drew the limit through
    the warm-up but less under the samples (a faster clock at less power, as one H100 did)
    shows it, and the row's sustained flag says so (runner.execution.sustained)."""
    from runner.execution.sustained import HEADROOM_SHARE, sustained_flag

    device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1450.0)
    warm_up_ends_s = CAPPED_MIN_S + 0.05

    def read() -> Reading:
        share = 1.0 if device.now < warm_up_ends_s else 0.84
        return dataclasses.replace(AT_CAP, power_avg_share=share)

    timer_plan = plan(warmup_s=0.05, max_samples=100000, min_samples=10, settle_max_s=5.0)
    m = run(device, 200, steady=True, loop_capped=False, read_clock=read,
            timer_plan=timer_plan).measurement
    assert m.power_capped is True and m.settled_samples > 0
    assert m.power_avg_share == pytest.approx(0.84)
    assert "drew 84% of the power limit" in sustained_flag(m, None)
    # the same run drawing the limit throughout: no flag
    device = FakeDevice(per_call_s=5 * US, clock_at=lambda t: 1450.0)
    m = run(device, 200, steady=True, loop_capped=False,
            read_clock=lambda: dataclasses.replace(AT_CAP, power_avg_share=0.99),
            timer_plan=timer_plan).measurement
    assert m.power_avg_share >= HEADROOM_SHARE and sustained_flag(m, None) is None
