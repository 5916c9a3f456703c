"""Device time: what one call costs the GPU, whatever the host does.

The loop time (:func:`runner.timing.timer.measure`) is what eager code pays on this host: for
a launch-bound op it is set by how fast this process's Python thread enqueues kernels, which
differs between processes by 25-35% on the same machine. The device time removes the host
from the number, so two processes agree (``docs/timing.md``). It is taken with the same
sampler as the loop time (:func:`runner.timing.timer.sample`: raw samples, median CI, adaptive
stop, ``noisy``), by the first of these methods that works:

``graph``
    Capture K calls of the callable into one CUDA graph (K = the loop time's
    ``calls_per_sample``, chosen by ``choose_calls_per_sample`` from the warm-up; 1 with an L2
    flush), warm the graph, time replays with CUDA events and divide by K. A replay launches
    all K calls at once, so the host cannot starve the GPU between them.
``blocked``
    For callables that cannot be captured (a host sync inside, pageable copies,
    ``compile=reduce-overhead``'s own graphs): hold the stream with a spin kernel, queue K
    calls behind it and time them with events. K × kernels-per-call stays well below the
    launch-queue depth (:data:`LAUNCH_QUEUE_BUDGET`); past it the host blocks in the launch
    and the GPU waits on it again, which reads as a silently slower op.
``unavailable``
    Neither worked (or a CPU trial); ``gpu_time_reason`` says why.

Every sample of both methods is ``spin → start event → work → end event``; the spin kernel
(nvbench's blocking kernel) covers the host's enqueue of the rest, so the start event never
waits on a launch (the edge of hazard 3 in ``timer.py``). Each sample checks that it did: when
the host's enqueue took longer than the spin ran on the device, the GPU may have idled inside
the timed region. Such a sample is rejected and retaken, never used; after
:data:`MAX_RETAKES` rejections in a row the method is abandoned with the reason.

K copies of an op that allocates could exhaust memory: K is bounded by the trial's measured
per-call peak and the free device memory (:func:`bound_calls_by_memory`).

All CUDA work goes through a :class:`Device`: ``runner.timing.cuda_device.CudaDevice`` on a
GPU; tests inject a fake with the same methods.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from runner.timing.timer import Measurement, TimerPlan, sample, warm_up

GRAPH, BLOCKED, UNAVAILABLE = "graph", "blocked", "unavailable"
#: Launches the host may queue behind a spin kernel. CUDA's pending-launch queue holds about
#: 1024 launches on current drivers (benchmarks/device_time_check.py measures it: queueing
#: launches behind a long spin, the host's time per launch jumps at the depth); a quarter of
#: it leaves room for the events, the spin and the copies a call may also enqueue.
LAUNCH_QUEUE_BUDGET = 256
#: Share of the free device memory that K calls' allocations may take.
MEMORY_SHARE = 0.5
#: Shortest spin, seconds: covers enqueueing two events and a graph launch (~10-20 µs).
SPIN_MIN_S = 50e-6
#: Longest spin, seconds (a sanity cap: a blocked K that needs longer is host-bound anyway).
SPIN_MAX_S = 0.2
#: Longest warm-up (s) of the device time: it follows the loop time's warm samples.
DEVICE_WARMUP_S = 0.05
#: Rejected samples in a row after which a method is abandoned.
MAX_RETAKES = 3
#: Times the warm-up may grow the spin. A host that still outlasts it is waiting on the device
#: (a sync or a pageable copy inside the call), and no spin will ever cover it.
MAX_SPIN_GROWTHS = 4
#: A graph replay may read at most this much slower per call than the loop. The loop's time
#: is the device's plus the host's gaps, so a slower graph runs different work (on an H200 a
#: device-to-device copy of 512 MiB or more captured as a memcpy node ran at 2.75 TB/s,
#: against 4.2 TB/s on a stream), or the clocks dropped between the two measurements. The
#: blocked method then runs the work as the stream does.
GRAPH_SLOWER_TOL = 1.05


class HostBlocked(RuntimeError):
    """The host's enqueue outlasted the spin kernel: the GPU may have waited on the host."""


@dataclass(frozen=True)
class Timed:
    """One sample as the device saw it, in seconds."""

    work_s: float  # start → end event: the K calls
    spin_s: float  # pre → start event: how long the spin held the stream
    host_s: float  # host time from launching the spin to recording the end event


class Device(Protocol):
    """The CUDA operations the device time needs (tests inject a fake)."""

    def free_bytes(self) -> int: ...

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
        """``calls`` calls of ``fn`` captured into one graph; returns its replay. Raises
        when ``fn`` cannot be captured."""

    def kernels_per_call(self, fn: Callable[[], Any]) -> int | None: ...

    def timed(self, work: Callable[[], Any], spin_s: float,
              flush: Callable[[], None] | None) -> Timed:
        """One sample: (flush, sync,) spin, start event, ``work()``, end event."""


@dataclass(frozen=True)
class DeviceTime:
    """How the device time was taken, or why not. ``measurement.samples_s`` are per call."""

    method: str
    reason: str | None = None
    measurement: Measurement | None = None


def bound_calls_by_memory(calls: int, bytes_per_call: int | None,
                          free_bytes: int) -> tuple[int, str | None]:
    """K such that K calls' allocations fit in :data:`MEMORY_SHARE` of the free memory.

    ``bytes_per_call`` is the trial's measured peak over what it held before timing: what one
    call allocates (a graph keeps every call's outputs alive in its private pool, so K calls
    may hold K times that). Returns K and a note when the bound cut it."""
    if not bytes_per_call or bytes_per_call <= 0:
        return calls, None
    fit = int(MEMORY_SHARE * free_bytes // bytes_per_call)
    if fit >= calls:
        return calls, None
    if fit < 1:
        return 0, (f"one call allocates {bytes_per_call / 2**20:.0f} MiB, more than "
                   f"{MEMORY_SHARE:.0%} of the {free_bytes / 2**20:.0f} MiB free")
    return fit, (f"K cut from {calls} to {fit}: {bytes_per_call / 2**20:.1f} MiB per call, "
                 f"{free_bytes / 2**20:.0f} MiB free")


def measure_device_time(fn: Callable[[], Any], plan: TimerPlan, loop: Measurement,
                        device: Device, *, bytes_per_call: int | None = None,
                        capture_blocker: str | None = None,
                        before_sample: Callable[[], None] | None = None,
                        flush: Callable[[], None] | None = None,
                        wall: Callable[[], float] = time.perf_counter) -> DeviceTime:
    """The device time of ``fn``: ``graph``, else ``blocked``, else ``unavailable``.

    ``loop`` is the trial's loop-time measurement: its ``calls_per_sample`` is K, its median
    sizes the blocked method's spin and bounds the graph's (:data:`GRAPH_SLOWER_TOL`).
    ``capture_blocker`` is why ``fn`` must not be captured (the modes know: e.g. it replays
    graphs of its own); the graph method is then skipped with that reason. With ``flush``
    (cold L2) K is 1 and every sample is flushed, synchronised, then spun (nvbench's cold
    protocol).
    """
    calls = 1 if flush else loop.calls_per_sample
    calls, memory_note = bound_calls_by_memory(calls, bytes_per_call, device.free_bytes())
    if calls < 1:
        return DeviceTime(UNAVAILABLE, memory_note)
    notes = [memory_note] if memory_note else []

    if capture_blocker:
        notes.append(f"graph: {capture_blocker}")
    else:
        try:
            replay = device.capture(fn, calls)
        except Exception as exc:  # any capture failure means: try the next method
            notes.append(f"graph capture failed: {_first_line(exc)}")
        else:
            try:
                measurement = _sample(replay, calls, SPIN_MIN_S, plan, device, None, flush,
                                      wall, notes)
            except HostBlocked as exc:
                notes.append(f"graph: {exc}")
            else:
                graph_us, loop_us = measurement.stats.median * 1e6, loop.stats.median * 1e6
                if graph_us <= GRAPH_SLOWER_TOL * loop_us:
                    return DeviceTime(GRAPH, _join(notes), measurement)
                notes.append(f"graph: a replay read {graph_us:.4g} µs per call, slower than "
                             f"the loop's {loop_us:.4g} µs: the graph runs the work "
                             "differently (a large copy captured as a memcpy node) or the "
                             "clocks dropped")
            finally:
                del replay  # frees the K-call graph and its memory pool

    kernels = device.kernels_per_call(fn)
    if kernels is None:
        notes.append("blocked: could not count the kernels of one call")
        return DeviceTime(UNAVAILABLE, _join(notes))
    blocked_calls = min(calls, LAUNCH_QUEUE_BUDGET // max(kernels, 1))
    if blocked_calls < 1:
        notes.append(f"blocked: one call launches {kernels} kernels, more than the "
                     f"{LAUNCH_QUEUE_BUDGET} the host may queue behind a spin")
        return DeviceTime(UNAVAILABLE, _join(notes))
    if blocked_calls < calls:
        notes.append(f"blocked: K cut from {calls} to {blocked_calls} ({kernels} kernels per "
                     f"call, launch budget {LAUNCH_QUEUE_BUDGET})")

    def work() -> None:
        for _ in range(blocked_calls):
            fn()

    # The loop's per-call time is at least the host's enqueue cost per call: twice K of it
    # covers the enqueue of K calls; warm-up then grows the spin if it was not enough.
    spin_s = 2 * blocked_calls * loop.stats.median + SPIN_MIN_S
    try:
        measurement = _sample(work, blocked_calls, spin_s, plan, device, before_sample, flush,
                              wall, notes)
    except HostBlocked as exc:
        notes.append(f"blocked: {exc}")
        return DeviceTime(UNAVAILABLE, _join(notes))
    return DeviceTime(BLOCKED, _join(notes), measurement)


def _sample(work: Callable[[], Any], calls: int, spin_s: float, plan: TimerPlan,
            device: Device, before_sample: Callable[[], None] | None,
            flush: Callable[[], None] | None, wall: Callable[[], float],
            notes: list[str]) -> Measurement:
    """Warm ``work`` up (growing the spin until it covers the host's enqueue), then sample it
    with :func:`runner.timing.timer.sample`; each sample is valid or retaken."""
    spin = [min(max(spin_s, SPIN_MIN_S), SPIN_MAX_S)]
    retaken, growths = [0], [0]

    def timed() -> Timed:
        if before_sample:
            before_sample()
        return device.timed(work, spin[0], flush)

    def warm() -> float:
        t = timed()
        if t.host_s >= t.spin_s:  # not covered: grow the spin (warm-up samples are not used)
            if growths[0] == MAX_SPIN_GROWTHS or spin[0] >= SPIN_MAX_S:
                raise HostBlocked(f"the host's enqueue ({t.host_s * 1e6:.0f} µs) still "
                                  f"outlasted a {t.spin_s * 1e6:.0f} µs spin after "
                                  f"{growths[0]} growths: the call waits on the device "
                                  "(a sync or a pageable copy)")
            growths[0] += 1
            spin[0] = min(max(spin[0], 2 * t.host_s), SPIN_MAX_S)
        return t.work_s

    # The device time is taken right after the loop time's samples: the GPU, its caches and
    # its clock are already in the state the loop time settled (timer=sustained's long
    # warm-up included). Its warm-up only has to settle this method's own work (a graph's
    # first replays, the spin's length), so it is capped rather than paid twice.
    warm_plan = replace(plan, warmup_s=min(plan.warmup_s, DEVICE_WARMUP_S))
    warmup_times, warmup_s = warm_up(warm, warm_plan, wall)

    def take() -> float:
        for _ in range(MAX_RETAKES + 1):
            t = timed()
            if t.host_s < t.spin_s:
                return t.work_s / calls
            retaken[0] += 1
            last = t
        raise HostBlocked(f"the host blocked: enqueueing took {last.host_s * 1e6:.0f} µs, "
                          f"longer than the {last.spin_s * 1e6:.0f} µs spin, "
                          f"{MAX_RETAKES + 1} samples in a row")

    samples, stop_reason = sample(take, plan, wall)
    if retaken[0]:
        notes.append(f"{retaken[0]} sample(s) retaken: the host's enqueue outlasted the spin")
    return Measurement(samples_s=tuple(samples), calls_per_sample=calls,
                       warmup_calls=len(warmup_times), warmup_s=warmup_s,
                       stop_reason=stop_reason, target_rel=plan.target_rel,
                       min_samples=plan.min_samples)


def _join(notes: list[str]) -> str | None:
    return "; ".join(notes) if notes else None


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return (lines[0][:300] if lines else type(exc).__name__)
