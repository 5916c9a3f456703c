"""``energy=true``: energy per call from NVML's total-energy counter, over a sustained window.

After the timed samples the trial's work runs back-to-back for ``window_s`` seconds (replayed
from a CUDA graph of K calls where it can be captured, else eagerly), while this module polls
NVML. Measurement hazards, each handled below:

1. The counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since driver load) steps only
   every ~100 ms on an H200 (78-103 ms measured). Reading it at arbitrary times gives up to
   one step of error at each end: ~0.1/W relative for a W-second window. So the host polls
   the counter every few ms and the energy is taken *between two observed steps*: ΔE over
   Δt of the steps themselves, no partial step at either end.
2. Power ramps up when the load starts. Steps in the first ``ramp`` of the window are
   skipped; only steps while the GPU is fully busy count.
3. The GPU must never idle inside the window: chunks of K calls (~50 ms each) are queued
   three ahead, so the host polling NVML (a read can take milliseconds) never leaves the
   device waiting. Each chunk is bracketed by timing events, so ``energy_busy_fraction`` says
   how much of the window the device really worked; below ~0.99 the energy per call includes
   idle gaps. The capture, the events and the queueing are the device time's own
   (``runner.timing.cuda_device.CudaDevice``: ``capture``, ``enqueue``, ``finished``,
   ``wait``), so the window and the device time are taken by one path.
4. NVML measures the whole board (HBM, VRMs, fans' share too), not the kernel: the idle
   baseline (``idle_power_W``, the same counter over ``idle_s`` of no work, measured first)
   says how much of ``avg_power_W`` the board draws anyway.
5. The sensor behind average power samples only part of the time on A100/H100 (Yang et
   al., SC24); ``NVML_FI_DEV_POWER_INSTANT`` samples are recorded alongside as a check.

Everything NVML is behind :class:`EnergyReader` and everything CUDA behind the timing layer's
``Device``, so tests drive the whole window with a fake counter, device and clock
(:class:`Board`). A missing NVML or counter is a ``energy_reason``, never an error.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.execution.energy_nvml import EnergyReader, EnergyUnavailable, NvmlReader
from runner.execution.timed_call import TimedCall
from runner.timing.cuda_device import CudaDevice
from runner.timing.device_time import REPLAY, Device
from runner.timing.graph_size import first_line

ENERGY_COLUMNS = (
    "energy_method", "energy_reason", "energy_counter_s", "energy_counter_steps", "energy_calls",
    "energy_busy_fraction", "energy_time_per_call_us", "energy_per_call_mJ",
    "energy_above_idle_per_call_mJ", "avg_power_W", "idle_power_W", "power_instant_median_W",
    "power_instant_max_W", "tflops_per_joule", "gb_per_joule", "energy_sm_clock_mhz_median",
    "energy_sm_clock_mhz_min", "energy_mem_clock_mhz_median", "energy_temperature_c_start",
    "energy_temperature_c_end", "energy_throttle_reasons")
#: Seconds between reads of clocks, temperature and instantaneous power in the window.
STATE_INTERVAL_S = 0.05
#: Seconds between counter polls while the host waits (hazard 1).
POLL_S = 0.001
#: Seconds of work per queued chunk, the most calls one chunk (one graph) holds, and how many
#: chunks stay queued ahead of the device (hazard 3). With 1000 calls a chunk of a 2 µs op
#: lasted 2 ms and the device idled two thirds of the window (energy_busy_fraction 0.33).
CHUNK_S, MAX_CHUNK_CALLS, QUEUE_CHUNKS = 0.05, 20000, 3


@dataclass
class Window:
    """What one polled stretch of time saw: counter steps and periodic device state."""

    steps: list[tuple[float, int]] = field(default_factory=list)  # (host s, counter mJ)
    states: list[dict[str, Any]] = field(default_factory=list)
    start_s: float = 0.0
    end_s: float = 0.0
    calls: int = 0
    busy_s: float | None = None  # device time of the chunks (None: an idle window)


@dataclass(frozen=True)
class Load:
    """What keeps the device busy in a window: ``work`` (one chunk of ``calls`` calls)
    queued on ``device`` (``runner.timing.device_time.Device``), as one sample between its
    own two events, the way the device time queues its chunks (hazard 3)."""

    device: Device
    work: Callable[[], Any]
    calls: int


def run_window(reader: EnergyReader, seconds: float, *, load: Load | None = None,
               wall: Callable[[], float] = time.perf_counter,
               sleep: Callable[[float], None] = time.sleep) -> Window:
    """Poll the counter (and every ``STATE_INTERVAL_S`` the state) for ``seconds``.

    With ``load`` the device is loaded meanwhile: ``QUEUE_CHUNKS`` chunks stay queued
    (``Device.enqueue``) until ``seconds`` have passed; a chunk counts once the device has
    ``finished`` it, with the seconds its events read (``Device.wait``, which no longer
    waits then). The window ends when the last one has finished (hazard 3). Without
    ``load`` the device idles: the baseline.
    """
    window = Window(start_s=wall())
    pending: list[Any] = []
    last_energy, next_state = None, window.start_s
    while True:
        now = wall()
        loading = now - window.start_s < seconds
        if load is not None and loading:
            while len(pending) < QUEUE_CHUNKS:
                pending.append(load.device.enqueue(load.work, 1, 0.0, None))
        while pending and load.device.finished(pending[0]):
            busy_s = sum(load.device.wait(pending.pop(0)))
            window.calls += load.calls
            window.busy_s = (window.busy_s or 0.0) + busy_s
            window.end_s = now
        energy = reader.energy_mj()
        if energy != last_energy:
            window.steps.append((now, energy))
            last_energy = energy
        if now >= next_state:
            window.states.append(reader.state())
            next_state = now + STATE_INTERVAL_S
        if not loading and not pending:
            break
        sleep(POLL_S)
    if load is None:
        window.end_s = wall()
    return window


def average_power_w(window: Window, skip_s: float = 0.0) -> tuple[float | None, int, float]:
    """Watts between the first and last counter step observed at least ``skip_s`` after the
    window started and no later than its end (hazards 1, 2); with the number of steps used
    and the seconds between them. None when fewer than two steps qualify."""
    used = [(t, e) for t, e in window.steps
            if window.start_s + skip_s <= t <= window.end_s]
    if len(used) < 2 or used[-1][0] <= used[0][0]:
        return None, len(used), 0.0
    seconds = used[-1][0] - used[0][0]
    return (used[-1][1] - used[0][1]) / 1e3 / seconds, len(used), seconds


def energy_columns(load: Window, idle: Window | None, *, flops: float | None,
                   bytes_moved: float | None, method: str, note: str | None = None,
                   ramp_s: float | None = None,
                   device_time_s: float | None = None) -> dict[str, Any]:
    """The energy columns from a loaded window (and the idle baseline before it).

    Energy per call is the window's power times ``device_time_s`` (the steady-state device
    time) where there is one, so every per-call column of the row is at one time; the
    window's own time per call stays in ``energy_time_per_call_us``, and the trial flags the
    row when the two differ (``runner.execution.measured.consistency_flag``)."""
    out: dict[str, Any] = dict.fromkeys(ENERGY_COLUMNS)
    out.update(energy_method=method, energy_reason=note)
    skip = min(0.5, 0.1 * (load.end_s - load.start_s)) if ramp_s is None else ramp_s
    power, steps, seconds = average_power_w(load, skip)
    out.update(energy_counter_steps=steps, energy_counter_s=seconds, energy_calls=load.calls)
    out.update(_state_columns(load.states))
    if idle is not None:
        out["idle_power_W"] = average_power_w(idle)[0]
    if power is None:
        out["energy_reason"] = (f"NVML's energy counter stepped {steps} time(s) in the "
                                "window, 2 are needed: lengthen energy_window_s")
        return out
    if load.calls <= 0 or load.end_s <= load.start_s:
        out["energy_reason"] = "no call completed inside the energy window"
        return out
    per_call_s = (load.end_s - load.start_s) / load.calls
    if load.busy_s is not None:
        out["energy_busy_fraction"] = min(1.0, load.busy_s / (load.end_s - load.start_s))
    at_s = device_time_s or per_call_s
    joules = power * at_s
    out.update(energy_time_per_call_us=per_call_s * 1e6, avg_power_W=power,
               energy_per_call_mJ=joules * 1e3,
               tflops_per_joule=flops / joules / 1e12 if flops else None,
               gb_per_joule=bytes_moved / joules / 1e9 if bytes_moved else None)
    if out["idle_power_W"] is not None:
        out["energy_above_idle_per_call_mJ"] = (power - out["idle_power_W"]) * at_s * 1e3
    return out


def _state_columns(states: list[dict[str, Any]]) -> dict[str, Any]:
    def values(key: str) -> list[float]:
        return [s[key] for s in states if s.get(key) is not None]

    sm, mem, power = values("sm_clock_mhz"), values("mem_clock_mhz"), values("power_instant_w")
    temps = values("temperature_c")
    reasons = sorted({r for s in states for r in (s.get("throttle_reasons") or "").split(",")
                      if r})
    return {
        "energy_sm_clock_mhz_median": statistics.median(sm) if sm else None,
        "energy_sm_clock_mhz_min": min(sm) if sm else None,
        "energy_mem_clock_mhz_median": statistics.median(mem) if mem else None,
        "power_instant_median_W": statistics.median(power) if power else None,
        "power_instant_max_W": max(power) if power else None,
        "energy_temperature_c_start": temps[0] if temps else None,
        "energy_temperature_c_end": temps[-1] if temps else None,
        "energy_throttle_reasons": ",".join(reasons) if states else None,
    }


@dataclass(frozen=True)
class Board:
    """What a window reads and loads: NVML's counter, the timing layer's device and the
    clocks it polls by (tests inject fakes of all four)."""

    reader: EnergyReader
    device: Device
    wall: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep


def measure_energy(call: TimedCall, device: str, *, window_s: float, idle_s: float,
                   board: Board | None = None) -> dict[str, Any]:
    """The energy columns of ``call.fn`` on CUDA ``device``; never raises for a missing NVML.

    ``call.per_call_s`` (the timed median) sizes a chunk to ~``CHUNK_S``.
    ``call.capturable``: try to replay the chunk from one CUDA graph (a single graph launch
    per chunk: the device sees the op's kernels back-to-back, whatever the host's speed); a
    failed capture falls back to eager calls and says why in ``energy_reason``. ``board``:
    NVML and the device (None: the real ones of ``device``).
    """
    if not device.startswith("cuda"):
        return unavailable(f"energy needs a CUDA device (NVML); this trial runs on {device}")
    try:
        board = board or _board(device)
    except EnergyUnavailable as exc:
        return unavailable(str(exc))
    calls = max(1, min(MAX_CHUNK_CALLS, round(CHUNK_S / max(call.per_call_s, 1e-7))))
    work, method, note = _chunk_work(call.fn, calls, board.device, call.capturable,
                                     call.before_call)
    board.device.synchronize()
    clocks = {"wall": board.wall, "sleep": board.sleep}
    idle = run_window(board.reader, idle_s, **clocks) if idle_s > 0 else None
    load = run_window(board.reader, window_s, load=Load(board.device, work, calls), **clocks)
    del work  # frees the graph and its pool before the trial ends
    return energy_columns(load, idle, flops=call.flops, bytes_moved=call.bytes_moved,
                          method=method, note=note, device_time_s=call.device_time_s)


def _board(device: str) -> Board:
    """NVML's counter and the timing layer's device for CUDA ``device``; raises
    ``EnergyUnavailable`` (before any CUDA work) where NVML cannot read energy."""
    import torch

    reader = NvmlReader(device)
    return Board(reader, CudaDevice(torch.device(device)))


def _chunk_work(fn: Callable[[], Any], calls: int, device: Device, capture: bool,
                before_call: Callable[[], None] | None
                ) -> tuple[Callable[[], Any], str, str | None]:
    """One chunk's work, its ``energy_method`` and why it runs eagerly (None: it does not).

    Replayed from one graph of ``calls`` calls where it can be captured, by the device
    time's own capture (``Device.capture``: outputs are dropped inside the capture, so the
    graph's private pool reuses one output's memory for all of them), else ``calls`` eager
    calls, each after ``before_call``."""
    if capture and before_call is None:
        try:
            # the replay method (runner.timing.device_time), stored as graph
            return device.capture(fn, calls), REPLAY, None
        except Exception as exc:  # not capturable: a host sync, pageable copies, ...
            note = f"ran eagerly, graph capture failed: {first_line(exc)[:200]}"
    else:
        note = None if capture else \
            "ran eagerly: graph/compile/backward trials are not re-captured"

    def eager() -> None:
        for _ in range(calls):
            if before_call is not None:
                before_call()
            fn()

    return eager, "eager", note


def unavailable(reason: str) -> dict[str, Any]:
    """The energy columns of a trial whose energy could not be measured, and why."""
    out: dict[str, Any] = dict.fromkeys(ENERGY_COLUMNS)
    out.update(energy_method="unavailable", energy_reason=reason)
    return out
