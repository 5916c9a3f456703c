"""``energy=true`` on the device time's own samples: one settled window gives time, clock, power
and energy.

A separate energy window after the samples (``runner.execution.energy.measure_energy``) runs
the op again, as a graph of thousands of calls, at whatever state the device is then in: on an
H200 its time per call differed from the samples' by up to 7% (a power-capped matmul sampled
before it had settled; a 1-element add whose time per call depends on how many calls one
graph holds). So where the trial takes a steady-state device time, the energy is read over
those very samples: the device time's sampling runs at least ``energy_window_s`` and this
module polls NVML's counter while the host waits for each chunk (hazards 1, 2 and 4 of
``runner.execution.energy`` are handled the same way: between observed steps, after the
ramp, against an idle baseline). The window's time per call is then the samples' own, and
``consistency_flag`` checks what is left: that the mean over the window and the median agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runner.execution.energy import (
    POLL_S,
    STATE_INTERVAL_S,
    EnergyReader,
    Window,
    energy_columns,
    run_window,
)
from runner.execution.energy_nvml import EnergyUnavailable, NvmlReader

#: The least share of the watched window the device must be busy for its samples to stand.
MIN_BUSY = 0.97


class SampleWindow:
    """A ``runner.timing.chunks.Watch`` over NVML's energy counter (tests inject a fake
    reader and clocks). The idle baseline is read when it is made, before the warm-up."""

    def __init__(self, reader: EnergyReader, window_s: float, idle_s: float, *,
                 wall: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.window_s = window_s
        self._reader, self._wall, self._sleep = reader, wall, sleep
        self.idle = run_window(reader, idle_s, wall=wall, sleep=sleep) if idle_s > 0 else None
        self.window: Window | None = None
        self._last_energy: int | None = None
        self._next_state = 0.0

    def begin(self) -> None:
        self.window = Window(start_s=self._wall(), busy_s=0.0)
        self.window.end_s = self.window.start_s
        self._last_energy, self._next_state = None, self.window.start_s
        self._read()

    def poll(self) -> None:
        if self.window is not None:
            self._read()
        self._sleep(POLL_S)

    def chunk(self, calls: int, busy_s: float) -> None:
        if self.window is None:
            return
        self._read()
        if self.window is None:  # the read failed
            return
        self.window.calls += calls
        self.window.busy_s = (self.window.busy_s or 0.0) + busy_s
        self.window.end_s = self._wall()

    def discard(self) -> None:
        self.window = None

    def starved(self) -> str | None:
        """Why the watched samples cannot stand, or None: the device was busy less than
        :data:`MIN_BUSY` of the window. The host, reading NVML between chunks, did not keep
        the queue full, and a power-capped GPU turns that idle into clock: an H200's bf16
        linear read 54.5 µs in a window 86% busy, 58.2 µs unwatched."""
        window = self.window
        if window is None or window.calls <= 0 or window.end_s <= window.start_s:
            return None
        busy = (window.busy_s or 0.0) / (window.end_s - window.start_s)
        if busy >= MIN_BUSY:
            return None
        return (f"the energy watch left the device idle: busy {busy:.2f} of its window, so "
                "the device time was taken again without it (the energy from a window of "
                "its own)")

    def _read(self) -> None:
        now = self._wall()
        try:
            energy = self._reader.energy_mj()
            state = self._reader.state() if now >= self._next_state else None
        except Exception:  # NVML failed mid-window: no energy here, the samples go on
            self.window = None
            return
        if energy != self._last_energy:  # hazard 1: only the steps themselves count
            self.window.steps.append((now, energy))
            self._last_energy = energy
        if state is not None:
            self.window.states.append(state)
            self._next_state = now + STATE_INTERVAL_S

    def columns(self, *, flops: float | None, bytes_moved: float | None,
                device_time_s: float | None) -> dict[str, Any] | None:
        """The energy columns of the watched samples; None when no window ran (the device
        time was not taken back to back: the caller then runs a window of its own)."""
        if self.window is None or self.window.calls <= 0:
            return None
        return energy_columns(self.window, self.idle, flops=flops, bytes_moved=bytes_moved,
                              method="samples", device_time_s=device_time_s)


def sample_window(device: str, window_s: float, idle_s: float) -> SampleWindow | None:
    """A :class:`SampleWindow` on CUDA ``device``, or None where NVML cannot read energy (the
    energy pass then says why, as before)."""
    if not device.startswith("cuda"):
        return None
    try:
        return SampleWindow(NvmlReader(device), window_s, idle_s)
    except EnergyUnavailable:
        return None
