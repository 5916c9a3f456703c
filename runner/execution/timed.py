"""How a trial is timed on its device: the clock, the L2 flush, the device time and the burst
time (``runner.timing``), chosen from the trial's timer settings. Kept apart from
``runner.execution.trial``, which runs the whole trial."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from runner.config.schema import TimerSettings
from runner.config.trials import TrialSpec
from runner.execution import modes
from runner.timing.clock_probe import clock_probe
from runner.timing.cuda_device import CudaDevice
from runner.timing.device_time import UNAVAILABLE, DeviceTime, measure_device_time
from runner.timing.timer import (
    Clock,
    CudaEventClock,
    HostClock,
    L2Flusher,
    Measurement,
    TimerPlan,
    measure,
)

_FLUSHERS: dict[str, L2Flusher] = {}


def device_time_of(spec: TrialSpec, timer: TimerSettings, plan: TimerPlan,
                 prepared: modes.Prepared, loop: Measurement, device: torch.device,
                 peak_bytes: int | None, held_bytes: int, *, steady: bool = True,
                 read_clock: Any = None, watch: Any = None) -> DeviceTime:
    """The device time of the trial's work (``runner.timing.device_time``): for
    ``graph=cuda_graph`` the un-captured callable, so K calls go into one graph."""
    if device.type != "cuda":
        return DeviceTime(UNAVAILABLE, "cpu")
    if not timer.device_time:
        return DeviceTime(UNAVAILABLE, "timer.device_time=false")
    return measure_device_time(
        prepared.uncaptured or prepared.fn, plan, loop, CudaDevice(device),
        bytes_per_call=None if peak_bytes is None else peak_bytes - held_bytes,
        capture_blocker=prepared.capture_blocker, before_sample=prepared.before_sample,
        flush=flusher(timer, device), steady=steady, read_clock=read_clock, watch=watch)


#: The short loop measurement that sizes the burst time's K and spin (it is not recorded).
_BURST_PROBE = {"warmup_calls": 3, "warmup_s": 0.0, "min_samples": 3, "max_samples": 5}


def burst_time(spec: TrialSpec, timer: TimerSettings, plan: TimerPlan,
                prepared: modes.Prepared, device: torch.device, clock: Clock,
                held_bytes: int) -> Measurement | None:
    """``timer.burst``: the gapped device time (spin and sync around every sample) after a
    short warm-up, from the device as the previous work left it: the boost-clock number."""
    if not (timer.burst and timer.device_time and device.type == "cuda"):
        return None
    probe = measure(prepared.fn, dataclasses.replace(plan, **_BURST_PROBE), clock,
                    before_sample=prepared.before_sample)
    peak = torch.cuda.max_memory_allocated(device)
    burst = device_time_of(spec, timer, plan, prepared, probe, device, peak, held_bytes,
                         steady=False)
    return burst.measurement


def clock_for(timer: TimerSettings, device: torch.device) -> Clock:
    if device.type != "cuda":
        return HostClock()
    if timer.clock == "host":  # validated up front: "event" or "host"
        return HostClock(sync=lambda: torch.cuda.synchronize(device))
    return CudaEventClock(device, probe=clock_probe(device))


def flusher(timer: TimerSettings, device: torch.device) -> L2Flusher | None:
    """One L2 flush buffer per device and job, made on first use."""
    if not timer.flush_l2 or device.type != "cuda":
        return None
    key = str(device)
    if key not in _FLUSHERS:
        _FLUSHERS[key] = L2Flusher(device)
    return _FLUSHERS[key]
