"""Device time: what one call costs the GPU, whatever the host does.

The loop time (:func:`runner.timing.timer.measure`) is what eager code pays on this host: for
a launch-bound op it is set by how fast this process's Python thread enqueues kernels, which
differs between processes by 25-35% on the same machine. The device time removes the host
from the number, so two processes agree (``docs/timing.md``). It is taken with the same
sampler as the loop time (``runner.timing.sampler.sample``: raw samples, median CI, adaptive
stop, ``noisy``), by the first of these methods that works (``gpu_time_method`` stores each
by the name in brackets):

replay (``graph``)
    Capture K calls of the callable into one CUDA graph (at least the loop time's
    ``calls_per_sample``, grown so a replay fills half a sample: ``runner.timing.graph_size``;
    1 with an L2 flush), warm the graph, time replays with CUDA events and divide by K. A
    replay launches all K calls at once, so the host cannot starve the GPU between them.
    This capture is the timer's own, whatever the trial's ``graph`` axis (how the user's op
    runs): a ``graph=cuda_graph`` trial's un-captured callable is captured again, K times.
blocked (``blocked``)
    For callables that cannot be captured (a host sync inside, pageable copies,
    ``compile=reduce-overhead``'s own graphs): hold the stream with a spin kernel, queue K
    calls behind it and time them with events. K × kernels-per-call stays well below the
    launch-queue depth (:data:`LAUNCH_QUEUE_BUDGET`); past it the host blocks in the launch
    and the GPU waits on it again, which reads as a silently slower op.
unavailable (``unavailable``)
    Neither worked (or a CPU trial); ``gpu_time_reason`` says why.

Samples are taken **back to back** (the steady state, the default): chunks of samples, each
sample between its own two events and a clock probe between samples
(``runner.timing.back_to_back``), two chunks queued ahead of the host and one sync per chunk,
so the GPU never idles between samples and runs at the clock a job running the op back to back
sustains. The warm-up is the same stream, run until the series has settled
(``runner.timing.settle``: no trend in the time per call, the SM clock no longer falling). A
chunk is used only when the device had not yet reached its first event once the host had
enqueued all of it (``runner.timing.back_to_back`` says how the rest are handled).

``steady=False`` takes the *burst* time instead (``runner.timing.gapped``: spin, events, sync
around every sample, after a short warm-up): for a compute-bound op near the power cap it reads
up to ~20% faster than the steady state, a real number for peak capability, not what a
sustained job sees. The cold protocol (``flush``) is gapped by nature and uses it too.

K copies of an op that allocates could exhaust memory: K is bounded by the trial's measured
per-call peak and the free device memory (:func:`bound_calls_by_memory`).

All CUDA work goes through a :class:`Device`: ``runner.timing.cuda_device.CudaDevice`` on a
GPU; tests inject a fake with the same methods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runner.timing.back_to_back import steady_samples
from runner.timing.chunks import LAUNCH_QUEUE_BUDGET, SPIN_MIN_S, HostBlocked, Watch
from runner.timing.device_plan import DeviceTimeOptions, SampleWork
from runner.timing.gapped import Timed, gapped_samples
from runner.timing.graph_size import (
    CapturedGraph,
    capture_replay,
    first_line,
    slower_than_eager,
)
from runner.timing.measurement import Measurement, TimerPlan

#: The methods, as ``gpu_time_method`` stores them. The replay method (K calls captured by the
#: timer into one CUDA graph, whatever the trial's ``graph`` axis) is stored as ``graph``, the
#: value every results file holds; "replay" is its name everywhere else.
REPLAY, BLOCKED, UNAVAILABLE = "graph", "blocked", "unavailable"
#: Share of the free device memory that K calls' allocations may take.
MEMORY_SHARE = 0.5
#: A replay may read at most this much slower per call than the loop: a slower graph
#: runs different work (on an H200 a 512 MiB device copy captured as a memcpy node ran 1.5×
#: slower than on a stream); the blocked method then runs it as the stream does. Wide, as
#: the loop's gapped samples of a power-capped op can read several % faster than the graph's.
REPLAY_SLOWER_TOL = 1.3


class Device(Protocol):
    """The CUDA operations the device time and the energy window (``runner.execution.energy``)
    need: the one place their events and graphs are made (tests inject a fake)."""

    def free_bytes(self) -> int: ...

    def synchronize(self) -> None:
        """Wait for all work queued on the device."""

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], None]:
        """``calls`` calls of ``fn`` in one graph; returns its replay. Raises if it cannot."""

    def kernels_per_call(self, fn: Callable[[], Any]) -> int | None: ...

    def timed(self, work: Callable[[], Any], spin_s: float,
              flush: Callable[[], None] | None) -> Timed:
        """One sample: (flush, sync,) spin, start event, ``work()``, end event."""

    def enqueue(self, work: Callable[[], Any], samples: int, spin_s: float,
                before_sample: Callable[[], None] | None, fill: int = 0) -> Any:
        """Queue one back-to-back chunk without waiting: (a spin of ``spin_s`` if > 0, and
        ``fill`` unsampled calls of ``work``,) then ``samples`` × (probe, start event,
        ``work()``, end event) and a last probe. Returns the chunk."""

    def reached(self, chunk: Any) -> bool:
        """Whether the device had reached the chunk's first event once the host had queued
        its last sample."""

    def queued_s(self, chunk: Any) -> float:
        """Host seconds from the chunk's hold to its last sample queued: what the hold had to
        cover (said when no hold did)."""

    def wait(self, chunk: Any) -> list[float]:
        """Wait for the chunk; the seconds of each of its samples."""

    def finished(self, chunk: Any) -> bool:
        """Whether the device has finished the chunk (without waiting for it)."""

    def clocks(self, chunk: Any) -> list[float | None] | None:
        """The SM clock (MHz) each sample of a waited-for chunk really ran at
        (``runner.timing.clock_probe``); None where it cannot be probed."""


@dataclass(frozen=True)
class DeviceTime:
    """How the device time was taken, or why not. Its measurement's ``samples_s`` are per
    call."""

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
                        device: Device, options: DeviceTimeOptions = DeviceTimeOptions()
                        ) -> DeviceTime:
    """The device time of ``fn``: the replay method, else ``blocked``, else ``unavailable``,
    and why (module docstring).

    ``loop`` is a loop-time measurement of ``fn`` taken just before (``runner.execution.timed``'s
    short probe): its ``calls_per_sample`` is K, its median sizes the blocked method's spin
    and bounds the replay's (:data:`REPLAY_SLOWER_TOL`). ``options``
    (``runner.timing.device_plan.DeviceTimeOptions``) say how: its ``capture_blocker`` is
    why ``fn`` must not be captured (the modes know: e.g. it replays graphs of its own), and
    the replay method is then skipped with that reason; with ``flush`` (cold L2) K is 1 and
    every sample is flushed, synchronised, then spun (nvbench's cold protocol);
    ``steady=False`` takes the burst time (module docstring)."""
    calls = 1 if options.flush else loop.calls_per_sample
    calls, memory_note = bound_calls_by_memory(calls, options.bytes_per_call,
                                               device.free_bytes())
    if calls < 1:
        return DeviceTime(UNAVAILABLE, memory_note)
    notes = [memory_note] if memory_note else []
    sampler = _Sampler(plan, loop, device, options, notes)
    if options.capture_blocker:
        notes.append(f"{REPLAY}: {options.capture_blocker}")
    elif (replayed := _replay(fn, calls, sampler)) is not None:
        return DeviceTime(REPLAY, _join(notes), replayed)
    if (blocked := _blocked(fn, calls, sampler)) is not None:
        return DeviceTime(BLOCKED, _join(notes), blocked)
    return DeviceTime(UNAVAILABLE, _join(notes))


@dataclass(frozen=True)
class _Sampler:
    """How either method takes its samples: back to back (``options.steady``, without an L2
    flush) or gapped, with the trial's plan, clocks and watch. Notes go to ``notes`` (the
    trial's reason)."""

    plan: TimerPlan
    loop: Measurement
    device: Device
    options: DeviceTimeOptions
    notes: list[str]

    def take(self, work: SampleWork) -> Measurement:
        """The samples of ``work``."""
        options = self.options
        if not options.steady or options.flush is not None:
            return gapped_samples(work, self.plan, self.device, options, self.notes,
                                  settling=options.flush is not None)
        if options.watch is None:
            return self._steady(work, None)
        try:
            return self._steady(work, options.watch)
        except HostBlocked as exc:
            # The watched window's longer chunks did not keep the device fed: the device
            # time is taken as without a watch, and the energy by a window of its own (the
            # watch is told to drop what it saw).
            options.watch.discard()
            self.notes.append(f"energy: not read over the samples ({exc})")
            return self._steady(work, None)

    def _steady(self, work: SampleWork, watch: Watch | None) -> Measurement:
        return steady_samples(work, self.plan, self.device, self.options, self.notes,
                              loop_capped=self.loop.power_capped, watch=watch)


def _replay(fn: Callable[[], Any], calls: int, sampler: _Sampler) -> Measurement | None:
    """The replay method's samples, or None (and why, in the notes): the capture failed, the
    host blocked, or the replays ran other work than the loop's calls."""
    notes, loop, device = sampler.notes, sampler.loop, sampler.device

    def bound(wanted: int) -> int:
        return bound_calls_by_memory(wanted, sampler.options.bytes_per_call,
                                     device.free_bytes())[0]

    try:  # K grown to the plateau; the cold protocol (flush) keeps the loop's K
        replay, replay_calls, per_call_s = capture_replay(
            fn, calls, sampler.plan, device, loop.stats.median, bound, notes,
            plateau=sampler.options.flush is None)
    except Exception as exc:  # any capture failure means: try the next method
        notes.append(f"{REPLAY} capture failed: {first_line(exc)}")
        return None
    try:
        measurement = sampler.take(SampleWork(replay, replay_calls, SPIN_MIN_S,
                                              replay_calls * per_call_s, fill=True))
    except HostBlocked as exc:
        notes.append(f"{REPLAY}: {exc}")
        return None
    # Judged while the graph is still held (it and its memory pool are freed on return).
    replay_us, loop_us = measurement.stats.median * 1e6, loop.stats.median * 1e6
    if replay_us > REPLAY_SLOWER_TOL * loop_us:
        notes.append(f"{REPLAY}: a replay read {replay_us:.4g} µs per call, slower than "
                     f"the loop's {loop_us:.4g} µs: the graph runs the work "
                     "differently (a large copy captured as a memcpy node) or the "
                     "clocks dropped")
        return None
    eager_note = slower_than_eager(fn, CapturedGraph(replay, replay_calls, measurement),
                                   device, notes)
    if eager_note is None:
        return measurement
    notes.append(eager_note)
    return None


def _blocked(fn: Callable[[], Any], calls: int, sampler: _Sampler) -> Measurement | None:
    """The blocked method's samples, or None (and why, in the notes): the calls' kernels
    cannot be counted or overflow the launch budget, or the host blocked."""
    notes, loop = sampler.notes, sampler.loop
    kernels = sampler.device.kernels_per_call(fn)
    if kernels is None:
        notes.append("blocked: could not count the kernels of one call")
        return None
    blocked_calls = min(calls, LAUNCH_QUEUE_BUDGET // max(kernels, 1))
    if blocked_calls < 1:
        notes.append(f"blocked: one call launches {kernels} kernels, more than the "
                     f"{LAUNCH_QUEUE_BUDGET} the host may queue behind a spin")
        return None
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
        return sampler.take(SampleWork(work, blocked_calls, spin_s,
                                       loop.stats.median * blocked_calls,
                                       blocked_calls * max(kernels, 1),
                                       sampler.options.before_sample))
    except HostBlocked as exc:
        notes.append(f"blocked: {exc}")
        return None


def _join(notes: list[str]) -> str | None:
    return "; ".join(notes) if notes else None
