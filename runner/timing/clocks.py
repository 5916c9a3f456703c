"""The clocks around the loop time's timed region, and the L2 flush before it.

:func:`runner.timing.timer.measure` takes any :class:`Clock`: :class:`HostClock` on the CPU (and
for ``timer.clock=host``), :class:`CudaEventClock` on CUDA; tests inject a fake. The hazards
named here are listed in ``runner.timing.timer``'s docstring.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from runner.timing.cuda_device import timing_event


class Clock(Protocol):
    """Measures the duration of a region of work, in seconds."""

    def start(self) -> Any:
        """Mark the start of the timed region; return a token for :meth:`stop`."""

    def stop(self, token: Any) -> float:
        """Mark the end and return the seconds elapsed since ``start`` gave ``token``."""


class HostClock:
    """``time.perf_counter_ns`` around the region, with an optional device sync.

    Used for CPU trials (where ops are synchronous and ``sync`` is a no-op) and for
    ``timer.clock=host`` on CUDA, where ``sync=torch.cuda.synchronize``: the sync *before*
    start drains earlier work so it is not charged to this sample, the sync *before* stop waits
    for the region's kernels. The second sync's own latency (~10 µs) is included: prefer the
    event clock on CUDA.
    """

    def __init__(self, sync: Callable[[], None] | None = None,
                 now_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self._sync = sync or (lambda: None)
        self._now_ns = now_ns

    def start(self) -> int:
        self._sync()
        return self._now_ns()

    def stop(self, token: int) -> float:
        self._sync()
        return (self._now_ns() - token) / 1e9


#: Seconds between two probed regions of the loop time's warm-up (:class:`CudaEventClock`).
PROBE_EVERY_S = 0.005


class CudaEventClock:
    """CUDA events recorded on the current stream: device time between two points of the
    stream, free of Python and launch overhead on the host side.

    Modes that use other streams (``streams=N``) fork from and join back into the current
    stream inside the timed callable, so the end event is ordered after all of their work.

    While ``probing`` (``runner.timing.timer.measure``'s warm-up turns it on), a clock probe
    (``runner.timing.clock_probe``) runs before the start and after the end event of one
    region every :data:`PROBE_EVERY_S`, outside them, and :attr:`last_mhz` is the clock that
    region ran at (None for the others): how the warm-up tells a power-capped op within
    milliseconds. Rationed, and off for the samples: two launches and a read-back cost more
    host time than a small op's call.
    """

    def __init__(self, device: Any, probe: Any = None) -> None:
        import torch

        self._torch = torch
        self._device = device
        self._probe = probe
        self.probing = False
        self.last_mhz: float | None = None
        self._next_probe_s = 0.0

    def start(self) -> Any:
        stamps = None
        self.last_mhz = None
        if self.probing and self._probe is not None and time.perf_counter() >= self._next_probe_s:
            self._next_probe_s = time.perf_counter() + PROBE_EVERY_S
            stamps = self._probe.stamps(2)
            self._probe.record(stamps, 0)
        event = timing_event()
        event.record(self._torch.cuda.current_stream(self._device))
        return event, stamps

    def stop(self, token: Any) -> float:
        start, stamps = token
        end = timing_event()
        end.record(self._torch.cuda.current_stream(self._device))
        if stamps is not None:
            self._probe.record(stamps, 1)
        # Hazard 1: elapsed_time is only valid once the end event has completed. Waiting on
        # the event (not the whole device) keeps unrelated streams out of it.
        end.synchronize()
        if stamps is not None:
            from runner.timing.clock_probe import effective_mhz

            self.last_mhz = effective_mhz(stamps.tolist())[0]
        return start.elapsed_time(end) / 1e3


class L2Flusher:
    """Evicts L2 by writing a buffer twice its size (hazard 4).

    Called *before* the start event, so the flush kernel itself is never timed. Deliberately
    not synchronised: the flush is still running when the start event and the op are
    enqueued behind it, which hides the op's launch latency (see hazard 4).
    """

    def __init__(self, device: Any) -> None:
        import torch

        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        self._buffer = torch.empty(max(2 * l2_bytes, 64 << 20), dtype=torch.int8, device=device)

    def __call__(self) -> None:
        self._buffer.zero_()

