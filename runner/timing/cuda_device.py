"""The CUDA side of the device time (``runner.timing.device_time``): graph capture, the spin
kernel and the event-timed sample. Kept apart so that the device time's logic runs (and is
tested) without a GPU; ``runner.execution.modes`` captures ``graph=cuda_graph`` with the same
:func:`capture_graph`, the energy window (``runner.execution.energy``) queues its chunks
through the same :class:`CudaDevice`, and the loop time's event clock
(``runner.timing.clocks.CudaEventClock``) takes its events from :func:`timing_event`. This
module is the only one of ``runner`` that makes CUDA events or graphs.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.timing.clock_probe import clock_probe, effective_mhz
from runner.timing.gapped import Timed


@dataclass(frozen=True)
class _Chunk:
    """One queued back-to-back chunk: each sample between its own two events, and the
    probe stamps around the samples (None without a probe), read back once ``done``."""

    starts: list[Any]
    ends: list[Any]
    stamps: Any  # pinned host copy of the probe stamps
    done: Any  # event after the last sample and the copy of the stamps
    reached: bool  # the device had reached the first event once the last was queued
    queued_s: float  # host seconds from the hold's launch to that judgement


def capture_graph(fn: Callable[[], Any], device: Any, calls: int = 1,
                  warmup_calls: int = 3) -> tuple[Callable[[], None], Any, float]:
    """Capture ``calls`` calls of ``fn`` into one CUDA graph; return (replay, the last call's
    output, capture seconds).

    Warm-up runs on a side stream, as PyTorch's CUDA-graph notes require: lazy
    initialisation (cuBLAS workspaces, autotuning) must not happen during capture. The inputs
    ``fn`` closes over are the graph's static inputs; they stay alive as long as the replay
    function does. The output tensor is static too: each replay overwrites it.
    """
    import torch

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup_calls - 1):
            fn()
        refuse_host_sync(fn)  # last: lazy initialisation may synchronise once, harmlessly
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The capture stream is this device's: torch.cuda.graph's default is one stream made
        # on whichever device the process first captured on, and capturing there the kernels
        # of another device's tensors captures nothing (an empty graph, replayed in 0.01 µs
        # a call: seen on an H200's second GPU).
        with torch.cuda.graph(graph, stream=capture_stream(device)):
            for _ in range(calls):
                output = fn()
    torch.cuda.synchronize(device)
    for warning in caught:
        if "Graph is empty" in str(warning.message):
            raise RuntimeError(f"the CUDA graph captured no work on {device}: "
                               f"{warning.message}")
        warnings.warn_explicit(warning.message, warning.category, warning.filename,
                               warning.lineno)
    return graph.replay, output, time.perf_counter() - start


def timing_event() -> Any:
    """A CUDA event that records time (``elapsed_time``), for the current stream."""
    import torch

    return torch.cuda.Event(enable_timing=True)


#: One capture stream per device (:func:`capture_stream`).
_CAPTURE_STREAMS: dict[str, Any] = {}


def refuse_host_sync(fn: Callable[[], Any]) -> None:
    """Run ``fn`` once with PyTorch's sync debug mode set to raise, so that an op which
    synchronises the host (``.item()``, ``nonzero``, a pageable copy) fails here, before any
    capture. Hazard: such an op cannot be captured, and a capture that fails inside PyTorch
    leaves the process's default CUDA generator poisoned: every later ``torch.randn`` on the
    device raised "Offset increment outside graph capture encountered unexpectedly", in the
    trials that followed too."""
    import torch

    mode = torch.cuda.get_sync_debug_mode()
    # The mode is the process's, not this thread's: nothing else runs CUDA work while a trial
    # captures (keep_warm's heating stops before a trial is answered).
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    finally:
        torch.cuda.set_sync_debug_mode(mode)


def capture_stream(device: Any) -> Any:
    """A side stream on ``device`` for CUDA-graph capture, made once per device and process
    (PyTorch captures on a side stream; one per capture would cost a stream each)."""
    import torch

    device = torch.device(device)
    if device.index is None:  # "cuda": the current device
        device = torch.device("cuda", torch.cuda.current_device())
    if str(device) not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[str(device)] = torch.cuda.Stream(device)
    return _CAPTURE_STREAMS[str(device)]


#: ``torch.cuda._sleep`` cycles per second, per device (``CudaDevice.spin_cycles``).
_CYCLES_PER_S: dict[str, float] = {}
#: The most the SM clock may rise between the spin's calibration and a spin.
SPIN_CLOCK_MARGIN = 1.6
#: Pinned host buffers for the probe stamps, per device: (ring, next slot)
#: (``CudaDevice._pinned_slot``). A slot holds the stamps of a chunk of up to 255 samples.
_PINNED: dict[str, list[Any]] = {}
PINNED_SLOTS, PINNED_SLOT_NUMEL = 16, 512


class CudaDevice:
    """``device_time.Device`` on a CUDA device (events on the current stream, ``torch.cuda._sleep``
    as the spin kernel)."""

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        self._device = device
        self._probe = clock_probe(device)

    def free_bytes(self) -> int:
        return int(self._torch.cuda.mem_get_info(self._device)[0])

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self._device)

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
        replay, _, _ = capture_graph(fn, self._device, calls)
        # A graph's first launch uploads it: over a millisecond of host time (a 469-node
        # graph on an H200), which inside a chunk lets the device catch up with the host
        # and costs the chunk. Paid here, once.
        replay()
        self._torch.cuda.synchronize(self._device)
        return replay

    def kernels_per_call(self, fn: Callable[[], Any]) -> int | None:
        """Kernels (and copies/memsets) one call puts on the device, counted by the profiler."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                self._torch.cuda.synchronize(self._device)
            count = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
        except Exception:  # profiler unavailable (no CUPTI): the caller says so
            return None
        return count or None

    def spin_cycles(self, seconds: float) -> int:
        """Spin-kernel cycles for ``seconds``, from a calibration of ``_sleep`` made once per
        device and process (it costs a millisecond, every trial would pay it). ``_sleep``
        counts SM cycles, so a spin lasts its cycles over the clock it runs at: the
        calibration's cycles per second are taken :data:`SPIN_CLOCK_MARGIN` times higher, so
        that a spin still lasts as long as asked when the clock has risen since (an H200
        calibrated under the power cap at ~1300 MHz later runs at 1980)."""
        torch = self._torch
        key = str(self._device)
        if key not in _CYCLES_PER_S:
            torch.cuda._sleep(1000)  # load the kernel
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            cycles = 2_000_000
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            _CYCLES_PER_S[key] = SPIN_CLOCK_MARGIN * cycles / (start.elapsed_time(end) / 1e3)
        return max(1, int(seconds * _CYCLES_PER_S[key]))

    def enqueue(self, work: Callable[[], Any], samples: int, spin_s: float,
                before_sample: Callable[[], None] | None, fill: int = 0) -> _Chunk:
        torch = self._torch
        # Events are made before anything is queued: the host work between two records is
        # then only the sample's own (``before_sample`` and ``work``).
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        stamps = self._probe.stamps(samples + 1) if self._probe is not None else None
        if spin_s > 0:
            torch.cuda._sleep(self.spin_cycles(spin_s))
        held_at = time.perf_counter()
        for _ in range(fill):  # the op's own work holds the chunk: no low-power gap
            work()
        for i, (start, end) in enumerate(zip(starts, ends)):
            if stamps is not None:
                # Between the samples, outside their events: the probe pair around a sample
                # gives the clock it ran at (runner.timing.clock_probe).
                self._probe.record(stamps, i)
            if before_sample is not None:
                before_sample()
            start.record()
            work()
            end.record()
        # Judged here, not after the read-back below: that work is outside the samples.
        reached = bool(starts[0].query())
        queued_s = time.perf_counter() - held_at
        host_stamps = None
        if stamps is not None:
            self._probe.record(stamps, samples)
            # Read back without a sync: a blocking copy (``tolist``) would wait for every
            # chunk queued behind this one, and the device would idle until the host queued
            # the next (a power-capped op then recovers its clock in the gap).
            host_stamps = self._pinned_slot(stamps.numel())
            host_stamps.copy_(stamps, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return _Chunk(starts, ends, host_stamps, done, reached, queued_s)

    def _pinned_slot(self, numel: int) -> Any:
        """The next slot of this device's ring of pinned host buffers for probe stamps. The
        first pinned allocation of every trial cost 0.85 ms on an H200 host, inside the
        first chunk's enqueue: long enough for the device to catch up with the host. The
        ring is made once per device and process; a slot is reused :data:`PINNED_SLOTS`
        chunks later, long after its chunk was waited for (at most four are in flight)."""
        key = str(self._device)
        if key not in _PINNED:
            _PINNED[key] = [self._torch.empty((PINNED_SLOTS, PINNED_SLOT_NUMEL),
                                              dtype=self._torch.int64, pin_memory=True), 0]
        ring, slot = _PINNED[key]
        _PINNED[key][1] = (slot + 1) % PINNED_SLOTS
        if numel > PINNED_SLOT_NUMEL:  # more probes than a chunk ever holds: a buffer of its own
            return self._torch.empty(numel, dtype=self._torch.int64, pin_memory=True)
        return ring[slot, :numel]

    def reached(self, chunk: _Chunk) -> bool:
        return chunk.reached

    def queued_s(self, chunk: _Chunk) -> float:
        return chunk.queued_s

    def finished(self, chunk: _Chunk) -> bool:
        return bool(chunk.done.query())

    def wait(self, chunk: _Chunk) -> list[float]:
        chunk.done.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in zip(chunk.starts, chunk.ends)]

    def clocks(self, chunk: _Chunk) -> list[float | None] | None:
        """The SM clock (MHz) each sample of a waited-for chunk ran at, from the probes
        around it; None without a probe."""
        if chunk.stamps is None:
            return None
        return effective_mhz(chunk.stamps.tolist())  # pinned host memory, copied by now

    def timed(self, work: Callable[[], Any], spin_s: float,
              flush: Callable[[], None] | None) -> Timed:
        torch = self._torch
        cycles = self.spin_cycles(spin_s)
        if flush:
            flush()
            # nvbench's cold protocol: the flush must be over before the spin starts, so the
            # spin alone covers the host's enqueue and the flush never overlaps the op.
            torch.cuda.synchronize(self._device)
        pre, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        host_start = time.perf_counter()
        pre.record()
        torch.cuda._sleep(cycles)
        start.record()
        work()
        end.record()
        host_s = time.perf_counter() - host_start
        end.synchronize()
        return Timed(work_s=start.elapsed_time(end) / 1e3,
                     spin_s=pre.elapsed_time(start) / 1e3, host_s=host_s)
