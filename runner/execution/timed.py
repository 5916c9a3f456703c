"""How a trial is timed on its device: the clock, the L2 flush, the loop time, the device time
and the burst time (``runner.timing``), chosen from the trial's timer settings, in the order
that keeps the device's heat (:func:`time_trial`). Kept apart from
``runner.execution.trial``, which runs the whole trial."""

from __future__ import annotations

import dataclasses
import statistics
import time
from types import MappingProxyType
from typing import Any

import torch

from runner.config.trial_settings import TimerSettings
from runner.execution import modes
from runner.execution.sustained import drew_headroom, held_at_the_limit
from runner.timing.clock_probe import clock_probe
from runner.timing.clocks import Clock, CudaEventClock, HostClock, L2Flusher
from runner.timing.cuda_device import CudaDevice
from runner.timing.device_plan import DEVICE_WARMUP_S, DeviceTimeOptions
from runner.timing.device_time import UNAVAILABLE, DeviceTime, measure_device_time
from runner.timing.graph_state import settle_graph_state
from runner.timing.heat import (
    HANDOVER_CAPPED_MIN_S,
    LOOP_CAPPED_SAMPLE_S,
    LOOP_HANDOVER_MAX_S,
    LOOP_HANDOVER_TARGET_SHARE,
    LOOP_HANDOVER_TIME_SHARE,
    DeviceHeat,
    Heat,
    HeatSeen,
    capped_min_s,
    min_warmup_s,
    seen,
)
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.settle import CAPPED_MIN_S
from runner.timing.timer import LoopTimeOptions, measure

#: µs of calls in one loop-time sample of a power-capped op (see the hazard in handover_plan).
CAPPED_LOOP_SAMPLE_US = 10_000.0


@dataclasses.dataclass
class WorkerTiming:
    """What outlives one trial in the process that runs trials one after another: what each
    device's last trial left it in (``heat``: a trial that follows power-capped work starts
    hot and settles sooner, and knows the clock capped work sustained), the L2 flush
    buffers, one per device, and the devices whose graph state is settled
    (:meth:`settle_graphs`). Owned by that process (made in
    ``runner.execution.worker_loop.answer_requests``, or by
    ``runner.execution.worker.InProcess``) and passed into every trial: never a module
    global."""

    heat: DeviceHeat = dataclasses.field(default_factory=DeviceHeat)
    flushers: dict[str, L2Flusher] = dataclasses.field(default_factory=dict)
    graphs_settled: set[str] = dataclasses.field(default_factory=set)
    max_clocks: dict[str, float] = dataclasses.field(default_factory=dict)  # MHz, per device

    def settle_graphs(self, device: torch.device) -> None:
        """Before this process's first trial on ``device``: the graph state that every later
        trial meets (``runner.timing.graph_state.settle_graph_state``), once."""
        if device.type == "cuda" and str(device) not in self.graphs_settled:
            settle_graph_state(device)
            self.graphs_settled.add(str(device))

    def flusher(self, timer: TimerSettings, device: torch.device) -> L2Flusher | None:
        """One L2 flush buffer per device, made on first use (None: no flush)."""
        if not timer.flush_l2 or device.type != "cuda":
            return None
        key = str(device)
        if key not in self.flushers:
            self.flushers[key] = L2Flusher(device)
        return self.flushers[key]

    def record_heat(self, device_key: str, *measurements: Measurement | None,
                    max_clock_mhz: float | None = None) -> Heat:
        """Record what the trial whose ``measurements`` just ended left ``device_key`` in
        (``runner.timing.heat.heat_left``). Every trial records it, capped or not: one at
        full clock between two capped ones lets the clock back up, so the next starts cold.
        A capped, settled device time also records the clock its samples ran at: what capped
        work sustains on this device now.

        Hot is what the device did, not what the op is: capped samples that drew under
        ``runner.execution.sustained.HEADROOM_SHARE`` of the power limit (the host left the
        GPU idle between chunks, so the controller gave headroom back) leave it cold, and
        the next capped trial warms up in full. On an H100, a trial after one whose samples
        drew 45% of the limit started "hot", warmed up for 1.8 s, and read 11% fast. Samples
        judged light that ran held below the GPU's maximum clock (``max_clock_mhz``) at the
        power limit leave it hot (``runner.execution.sustained.held_at_the_limit``)."""
        taken = [m for m in measurements if m is not None]
        capped = (any(m.power_capped for m in taken) and not any(map(drew_headroom, taken))
                  or any(held_at_the_limit(m, max_clock_mhz) for m in taken))
        sustained = next((statistics.median(m.clock_mhz) for m in taken
                          if m.power_capped and m.settled and m.clock_mhz and not
                          drew_headroom(m)),
                         None)
        return self.heat.record(device_key, capped, time.perf_counter(), sustained)


@dataclasses.dataclass(frozen=True)
class TrialTimes:
    """A trial's two times, the columns read between them, and the wall seconds each took
    (warm-up included: ``cost_*`` columns split it off)."""

    loop: Measurement
    device: DeviceTime
    memory: dict[str, Any]
    loop_s: float
    device_s: float
    heat_before: HeatSeen | None = None  #: what the GPU began in (None: not a CUDA trial)
    max_clock_mhz: float | None = None  #: the GPU's maximum SM clock (None: not read)


def time_trial(timer: TimerSettings, prepared: modes.Prepared, device: torch.device,
               clock: Clock, held_bytes: int, state: WorkerTiming, *,
               read_clock: Any = None, watch: Any = None) -> TrialTimes:
    """The loop time and the device time of the trial's callable, in the order that pays the
    power cap's settling once (docs/timing.md#what-a-trial-costs):

    1. a short loop probe (a few calls, not recorded) sizes the device time's K and spin;
    2. the peak memory is read: one call's allocations bound K;
    3. the device time warms up until settled and samples back to back. Where the trial
       before left the device hot, a capped op's minimum is shorter
       (``runner.timing.heat.capped_min_s``) and any op's is long enough to see the clock
       come back (``runner.timing.heat.min_warmup_s``);
    4. the loop time follows at once and hands over: the op is already at its sustained
       state, so its warm-up only checks that the loop's own regime (a sync per sample)
       holds it there, and its samples aim at a looser CI in a shorter span
       (``runner.timing.heat.LOOP_HANDOVER_TARGET_SHARE``): the device time is the headline.

    On the CPU, with ``timer.device_time=false`` or where the device time is unavailable, the
    loop time is taken on its own, with a full warm-up. ``state`` is the worker's: the heat
    the trial before left (read here, recorded again as this one ends), the flush buffers."""
    start, plan = time.perf_counter(), timer.plan
    heat_before = (seen(state.heat.before(str(device)), start)
                   if device.type == "cuda" else None)
    steady = device.type == "cuda" and timer.device_time
    hooks = LoopTimeOptions(before_sample=prepared.before_sample,
                            flush=state.flusher(timer, device))
    if steady:
        probe = measure(prepared.fn, dataclasses.replace(plan, **_PROBE), clock, hooks)
        memory = _memory(device)
        # The probe's few calls cannot tell a settled op: the device time judges on its own.
        probe = dataclasses.replace(probe, power_capped=None)
        device_time = _steady_device_time(
            _DeviceTimeCall(timer, prepared, probe, device, memory["peak_allocated_bytes"],
                            held_bytes, read_clock), state, watch)
    else:
        device_time = device_time_of(
            _DeviceTimeCall(timer, prepared, None, device, None, held_bytes), state)
    device_s = time.perf_counter() - start
    sustained = device_time.measurement
    loop_plan, loop_options = handover_plan(
        plan, sustained, dataclasses.replace(hooks, read_clock=read_clock))
    loop = measure(prepared.fn, loop_plan, clock, loop_options)
    if not steady:
        memory = _memory(device)
    if str(device) not in state.max_clocks and read_clock is not None:  # read once: it is fixed
        state.max_clocks[str(device)] = getattr(read_clock(), "max_clock_mhz", None)
    state.record_heat(str(device), device_time.measurement, loop,
                      max_clock_mhz=(max_clock_mhz := state.max_clocks.get(str(device))))
    return TrialTimes(loop, device_time, memory, time.perf_counter() - start - device_s,
                      device_s, heat_before, max_clock_mhz)


@dataclasses.dataclass(frozen=True)
class _DeviceTimeCall:
    """One device-time measurement's inputs: the trial's timer and prepared callable, the loop
    probe that sizes K (None: no device time), the device, K's memory bounds, the clock."""

    timer: TimerSettings
    prepared: modes.Prepared
    probe: Measurement | None
    device: torch.device
    peak_bytes: int | None
    held_bytes: int
    read_clock: Any = None


def _steady_device_time(call: _DeviceTimeCall, state: WorkerTiming, watch: Any) -> DeviceTime:
    """The device time back to back, from the heat the work before left (step 3 of
    :func:`time_trial`). A ``watch`` (the energy counter) whose reads left the device idle
    (``runner.execution.energy_samples.SampleWindow.starved``) is dropped and the device time
    taken again without it, hot from the first try: the idle was clock to a capped GPU."""
    def take(watched: Any) -> DeviceTime:
        heat, now = state.heat.before(str(call.device)), time.perf_counter()
        return device_time_of(call, state, watch=watched, min_capped_s=capped_min_s(heat, now),
                              min_s=min_warmup_s(heat, now, DEVICE_WARMUP_S))

    device_time = take(watch)
    starved = watch.starved() if watch is not None else None
    if not starved:
        return device_time
    watch.discard()  # the energy pass then runs a window of its own
    # Heat only, not the clock: the starved samples' idle let the clock rise.
    starved_m = device_time.measurement
    state.heat.record(str(call.device), bool(starved_m and starved_m.power_capped),
                      time.perf_counter())
    retaken = take(None)
    return dataclasses.replace(retaken, reason="; ".join(filter(None, (retaken.reason,
                                                                          starved))))


def handover_plan(plan: TimerPlan, sustained: Measurement | None,
                  options: LoopTimeOptions = LoopTimeOptions()
                  ) -> tuple[TimerPlan, LoopTimeOptions]:
    """The loop time's plan and options after the device time's samples (``sustained``; None:
    there were none: ``plan`` and ``options`` as they are), step 4 of :func:`time_trial`.
    An op the device time did not find power-capped needs no warm-up (a call sizes K), and
    one sample per call where the device time says a call is past ``batch_below_us``."""
    if sustained is None:
        return plan, options
    capped = bool(sustained.power_capped)
    handover = dataclasses.replace(
        options, handover=True, read_clock=None,
        min_warmup_s=HANDOVER_CAPPED_MIN_S if capped else 0.0,
        min_span_s=LOOP_CAPPED_SAMPLE_S if capped else 0.0)
    if not capped and sustained.samples_s and (
            min(sustained.samples_s) * 1e6 >= plan.batch_below_us):
        # the host cannot run a call faster than the device does
        handover = dataclasses.replace(handover, calls_per_sample=1)
    loop_plan = dataclasses.replace(
        plan, target_rel=plan.target_rel * LOOP_HANDOVER_TARGET_SHARE,
        max_time_s=min(plan.max_time_s, max(LOOP_HANDOVER_MAX_S,
                                            LOOP_HANDOVER_TIME_SHARE * plan.max_time_s)))
    if capped:
        # Hazard: the sync after every sample leaves the GPU idle for tens of µs, and a
        # power-capped GPU turns that idle into clock headroom (an H200's bmm read 10%
        # fast in 1 ms samples): longer samples keep the gaps under 1%.
        loop_plan = dataclasses.replace(
            loop_plan, batch_below_us=max(plan.batch_below_us, CAPPED_LOOP_SAMPLE_US),
            batch_target_us=max(plan.batch_target_us, CAPPED_LOOP_SAMPLE_US))
    return loop_plan, handover


def _memory(device: torch.device) -> dict[str, Any]:
    cuda = device.type == "cuda"
    return {"peak_allocated_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(device) if cuda else None}


def device_time_of(call: _DeviceTimeCall, state: WorkerTiming, *, steady: bool = True,
                   watch: Any = None, min_capped_s: float = CAPPED_MIN_S,
                   min_s: float = DEVICE_WARMUP_S) -> DeviceTime:
    """The device time of the trial's work (``runner.timing.device_time``): for
    ``graph=cuda_graph`` the un-captured callable, so K calls go into one graph. The call's
    ``probe`` sizes K and the spin (None only where there is no device time to take)."""
    timer, prepared, device = call.timer, call.prepared, call.device
    if device.type != "cuda":
        return DeviceTime(UNAVAILABLE, "cpu")
    if not timer.device_time or call.probe is None:
        return DeviceTime(UNAVAILABLE, "timer.device_time=false")
    return measure_device_time(
        prepared.uncaptured or prepared.fn, timer.plan, call.probe, CudaDevice(device),
        DeviceTimeOptions(
            bytes_per_call=None if call.peak_bytes is None
            else call.peak_bytes - call.held_bytes,
            capture_blocker=prepared.capture_blocker, before_sample=prepared.before_sample,
            flush=state.flusher(timer, device), steady=steady, read_clock=call.read_clock,
            watch=watch, min_capped_s=min_capped_s, min_s=min_s))


#: The short loop measurement (not recorded) that sizes a device time's K and spin.
_PROBE = MappingProxyType({"warmup_calls": 3, "warmup_s": 0.0, "min_samples": 3, "max_samples": 5})


def burst_time(timer: TimerSettings, prepared: modes.Prepared, device: torch.device,
               clock: Clock, held_bytes: int, state: WorkerTiming) -> Measurement | None:
    """``timer.burst``: the gapped device time (spin and sync around every sample) after a
    short warm-up, from the device as the previous work left it: the boost-clock number."""
    if timer.burst and timer.device_time and device.type == "cuda":
        return probed_device_time(timer, prepared, device, clock, held_bytes, state,
                                  steady=False).measurement
    return None


def probed_device_time(timer: TimerSettings, prepared: modes.Prepared, device: torch.device,
                       clock: Clock, held_bytes: int, state: WorkerTiming, *,
                       steady: bool) -> DeviceTime:
    """A short loop probe sizes K and the spin, then the samples: gapped (``steady=False``,
    the burst time) or back to back from the state the trial left (another allocation of
    its inputs, ``runner.execution.allocations``)."""
    probe = measure(prepared.fn, dataclasses.replace(timer.plan, **_PROBE), clock,
                    LoopTimeOptions(before_sample=prepared.before_sample))
    if steady:  # as in time_trial: a few calls cannot tell a settled op
        probe = dataclasses.replace(probe, power_capped=None)
    peak = torch.cuda.max_memory_allocated(device)
    return device_time_of(_DeviceTimeCall(timer, prepared, probe, device, peak, held_bytes),
                          state, steady=steady)


def clock_for(timer: TimerSettings, device: torch.device) -> Clock:
    if device.type != "cuda":
        return HostClock()
    if timer.clock == "host":  # validated up front: "event" or "host"
        return HostClock(sync=lambda: torch.cuda.synchronize(device))
    return CudaEventClock(device, probe=clock_probe(device))
