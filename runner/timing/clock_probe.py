"""The clock the samples really ran at: nvbench's probe of ``%globaltimer`` and ``%clock64``.

NVML's SM clock is not that clock. On an H200 at its 700 W cap, a bf16 8192³ matmul ran back to
back at 1333 MHz by its own cycle counter while NVML reported 1455 MHz, and 1723 MHz in its
first milliseconds while NVML still said 1980 (the power controller slows the SMs faster, and
further, than the reported clock shows; NVML's fields also update only every ~100 ms). The
cycles one call takes stayed constant (2.21 M) through all of it: the time per call is the
cycles over the clock the SMs really ran at (benchmarks/power_trace.py measures it).

So a tiny kernel is queued between samples, outside their events: it stores the global timer
(ns) and the cycle counter of SM 0 (``clock64`` counts one multiprocessor's cycles, so every
probe must read the same SM: the grid covers every SM and only the block on SM 0 writes). Two
consecutive probes give the cycles per nanosecond over the sample between them: the effective
SM clock of that sample, read on the device, with no sync and nothing waiting on the host.

The kernel is a few lines of PTX that the driver compiles when it loads it
(``runner.timing.probe_kernel``): no Triton to import or compile in a worker's start. Where the
driver cannot load or launch it, :func:`clock_probe` returns None and the callers fall back to
NVML's reported clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: A probe pair closer than this (ns) gives no clock: ``%globaltimer`` ticks coarsely
#: (1 µs on some GPUs) and the ratio would be noise.
MIN_SPAN_NS = 20_000


class ClockProbe:
    """Probes on one CUDA device: :meth:`stamps` makes a buffer, :meth:`record` queues a probe
    into one of its slots on the current stream, :func:`effective_mhz` turns read-back stamps
    into the clock between consecutive probes."""

    def __init__(self, device: Any) -> None:
        import torch

        from runner.timing.probe_kernel import load_probe_kernel

        self._torch = torch
        ordinal = _ordinal(torch.device(device))
        # Its own device, indexed: "cuda" alone would follow the current device, while the
        # kernel stays loaded in the context of the one current now.
        self._device = torch.device("cuda", ordinal)
        self._kernel = load_probe_kernel(
            ordinal, torch.cuda.get_device_properties(ordinal).multi_processor_count)

    def stamps(self, probes: int) -> Any:
        return self._torch.zeros(2 * probes, dtype=self._torch.int64, device=self._device)

    def record(self, stamps: Any, slot: int) -> None:
        # On the device's current stream, as the timed work: the probe runs between samples
        # in stream order, and inside a capture it becomes a node of the graph.
        self._kernel.launch(stamps.data_ptr(), slot,
                            self._torch.cuda.current_stream(self._device).cuda_stream)


_PROBES: dict[str, ClockProbe | None] = {}


def clock_probe(device: Any) -> ClockProbe | None:
    """A working :class:`ClockProbe` for ``device``, or None (not CUDA, no CUDA driver that
    loads the kernel, or the probe did not read a clock: the callers then use NVML's). Tried
    once per device and process (``cuda`` is the current device)."""
    key = _cuda_key(device)
    if key is None:
        return None
    if key not in _PROBES:
        _PROBES[key] = _try_probe(key)
    return _PROBES[key]


def _cuda_key(device: Any) -> str | None:
    """``cuda:N`` for a CUDA device, ``cuda`` alone being the current one; None otherwise
    (or where CUDA cannot be asked)."""
    try:
        import torch

        given = torch.device(device)
        return f"cuda:{_ordinal(given)}" if given.type == "cuda" else None
    except Exception:  # a torch without CUDA, a malformed name
        return None


def _ordinal(device: Any) -> int:
    """A CUDA ``torch.device``'s ordinal, the current device's for plain ``cuda``."""
    import torch

    return device.index if device.index is not None else torch.cuda.current_device()


def _try_probe(device: str) -> ClockProbe | None:
    try:
        import torch

        probe = ClockProbe(device)
        stamps = probe.stamps(2)
        with torch.cuda.device(device):  # the spin on the probe's device, whatever is current
            probe.record(stamps, 0)
            torch.cuda._sleep(1_000_000)  # ~0.5 ms between the probes: a span the timer resolves
            probe.record(stamps, 1)
        mhz = effective_mhz(stamps.tolist())
    except Exception:  # no CUDA, no driver library, a driver that rejects the kernel
        return None
    return probe if mhz and mhz[0] is not None and mhz[0] > 0 else None


def effective_mhz(flat_stamps: Sequence[int]) -> list[float | None]:
    """The SM clock (MHz) between each pair of consecutive probes, from a buffer's stamps
    (``[ns0, cycles0, ns1, cycles1, ...]``); None where the pair is too close to resolve or a
    probe did not run."""
    pairs = list(zip(flat_stamps[0::2], flat_stamps[1::2]))
    out: list[float | None] = []
    for (ns0, c0), (ns1, c1) in zip(pairs, pairs[1:]):
        span = ns1 - ns0
        out.append((c1 - c0) / span * 1e3 if span >= MIN_SPAN_NS and c1 > c0 else None)
    return out
