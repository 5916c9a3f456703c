"""A warm-up's series as the settle rule (``runner.timing.settle``) reads it: its points, the
device's readings between them, and the views the rule takes of them. Data only: the rule
itself, and what it concludes, stay in ``runner.timing.settle``."""

from __future__ import annotations

import bisect
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Reading:
    """The device's state at one moment: SM clock (MHz), board power over its limit (now and
    averaged) and temperature (°C)."""

    clock_mhz: float | None = None
    power_share: float | None = None
    #: the GPU's maximum SM clock (MHz): the reference for
    #: :data:`runner.timing.settle.HELD_DOWN_SHARE`
    max_clock_mhz: float | None = None
    #: board power averaged as the power controller sees it (NVML's one-second average) over
    #: its limit: :data:`runner.timing.settle.POWER_RISE_TOL`
    power_avg_share: float | None = None
    #: the GPU's temperature, °C: :data:`runner.timing.settle.THERMAL_RISE_C_PER_S`
    temperature_c: float | None = None


class Point(NamedTuple):
    """One sample of the series: when it ended (s since the warm-up began), its time per
    call (s), the SM clock NVML reported closest before it and the clock the sample really ran
    at (``effective_mhz``, from ``runner.timing.clock_probe``), in MHz, None where unread;
    the board's instantaneous and averaged power over its limit and its temperature (°C),
    as read then.

    A tuple, not a dataclass: a 1 µs op's warm-up makes tens of thousands of them, and the
    warm-up is time-bounded, so every µs spent building one is a call less warmed up."""

    t_s: float
    per_call_s: float
    clock_mhz: float | None = None
    power_share: float | None = None
    effective_mhz: float | None = None
    power_avg_share: float | None = None
    temperature_c: float | None = None

    @property
    def best_mhz(self) -> float | None:
        """The effective clock where probed, else NVML's."""
        return self.effective_mhz if self.effective_mhz is not None else self.clock_mhz


def windows(points: Sequence[Point], elapsed_s: float) -> tuple[Sequence[Point],
                                                               Sequence[Point]]:
    """The quarter of ``elapsed_s`` before the last, and the last quarter (``points`` are in
    time order, so the windows are found by bisection: the warm-up of a 1 µs op has tens of
    thousands of points)."""
    times = TimeView(points)
    half = bisect.bisect_right(times, 0.5 * elapsed_s)
    three_quarters = bisect.bisect_right(times, 0.75 * elapsed_s)
    return points[half:three_quarters], points[three_quarters:]


class TimeView(Sequence[float]):
    """``points``' times as a sequence, without copying them."""

    def __init__(self, points: Sequence[Point]) -> None:
        self._points = points

    def __len__(self) -> int:
        return len(self._points)

    def __getitem__(self, index: Any) -> Any:
        return self._points[index].t_s


def last_clock(points: Sequence[Point], last: int = 16) -> float | None:
    """The SM clock the series ended at (the settled clock, after a warm-up): the median of
    its ``last`` clocks, effective where probed, else NVML's."""
    clocks = [p.best_mhz for p in points[-last:] if p.best_mhz is not None]
    return statistics.median(clocks) if clocks else None


class OwnPower:
    """The most power a series drew lately (a share of the limit), from the NVML readings
    that are its own: the last ``keep`` of them.

    Hazard: NVML refreshes its power reading about every 100 ms (on an H200, 20-200 ms
    apart), so the reading a series starts with is the work before's. A small tf32 matmul
    after a power-capped one read 0.83 of the limit for its first 65 ms, then 0.43: counted,
    it looked capped, and its warm-up ran 60 ms longer. A reading counts from the first that
    differs from the one the series began with (two equal readings are one refresh)."""

    def __init__(self, keep: int) -> None:
        self._first: float | None = None
        self._own: deque[float] = deque(maxlen=keep)

    def add(self, share: float | None) -> None:
        if share is None:
            return
        if self._first is None:
            self._first = share
        elif self._own or share != self._first:
            self._own.append(share)

    def most(self, or_first: bool = False) -> float | None:
        """The most of the series' own recent readings; None before the first refresh, or
        with ``or_first`` the reading the series began with (where nothing else can tell a
        capped op: no probe read the clock)."""
        if self._own:
            return max(self._own)
        return self._first if or_first else None
