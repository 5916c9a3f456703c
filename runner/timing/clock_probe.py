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

Built with Triton; where Triton (or its inline assembly) is missing, :func:`clock_probe`
returns None and the callers fall back to NVML's reported clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: A probe pair closer than this (ns) gives no clock: ``%globaltimer`` ticks coarsely
#: (1 µs on some GPUs) and the ratio would be noise.
MIN_SPAN_NS = 20_000

_KERNEL: Any = None


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        # slot: not specialised on its value (1, multiples of 16), which would compile a new
        # variant in the middle of a chunk.
        @triton.jit(do_not_specialize=["slot"])
        def probe(out_ptr, slot):
            smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                             is_pure=False, pack=1)
            stamp_ns = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [],
                                                 dtype=tl.int64, is_pure=False, pack=1)
            cycles = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [],
                                               dtype=tl.int64, is_pure=False, pack=1)
            if smid == 0:
                tl.store(out_ptr + 2 * slot, stamp_ns)
                tl.store(out_ptr + 2 * slot + 1, cycles)

        _KERNEL = probe
    return _KERNEL


def prepare() -> None:
    """Import Triton and define the probe's kernel: what needs no device. A worker does it on
    a thread of its own while its CUDA context starts (``runner.execution.warmup``), so the
    probe built after the context only compiles and runs. Without Triton nothing is done
    here; :func:`clock_probe` then returns None."""
    try:
        _kernel()
    except Exception:  # no Triton, or one that does not import: the probe says None later
        pass


class ClockProbe:
    """Probes on one CUDA device: :meth:`stamps` makes a buffer, :meth:`record` queues a probe
    into one of its slots on the current stream, :func:`effective_mhz` turns read-back stamps
    into the clock between consecutive probes."""

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        self._device = device
        self._grid = (torch.cuda.get_device_properties(device).multi_processor_count,)
        self._kernel = _kernel()

    def stamps(self, probes: int) -> Any:
        return self._torch.zeros(2 * probes, dtype=self._torch.int64, device=self._device)

    def record(self, stamps: Any, slot: int) -> None:
        self._kernel[self._grid](stamps, slot)


_PROBES: dict[str, ClockProbe | None] = {}


def clock_probe(device: Any) -> ClockProbe | None:
    """A working :class:`ClockProbe` for ``device``, or None (no Triton, not CUDA, or the probe
    did not read a clock: the callers then use NVML's). Tried once per device and process."""
    key = str(device)
    if key not in _PROBES:
        _PROBES[key] = _try_probe(device)
    return _PROBES[key]


def _try_probe(device: Any) -> ClockProbe | None:
    try:
        import torch

        if torch.device(device).type != "cuda":
            return None
        probe = ClockProbe(device)
        stamps = probe.stamps(2)
        probe.record(stamps, 0)
        torch.cuda._sleep(1_000_000)  # ~0.5 ms between the probes: a span the timer resolves
        probe.record(stamps, 1)
        mhz = effective_mhz(stamps.tolist())
    except Exception:  # no Triton, no inline assembly for this target, no CUDA
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
