"""Back-to-back device-time samples: what the GPU sustains (``runner.timing.device_time``).

Chunks of samples, each sample between its own start and end events with a clock probe
(``runner.timing.clock_probe``) between samples, two chunks queued ahead of the host (three
while a ``Watch`` polls) and one sync per chunk: the GPU never idles between samples, so it
runs at the clock a job running the op back to back sustains, and the warm-up (the same stream)
runs until the series has settled (``runner.timing.settle``). A chunk is used only if the
device had not reached its first event once the host had queued its last sample. Only a
chunk with nothing running ahead of it (the first, one behind a chunk reached early or behind
a shorter one) waits behind a spin kernel, which covers the host's enqueue of each of its
samples; when the host cannot keep ahead of the device (eager calls, or replays of a few tiny
kernels), every chunk waits behind one, grown in the warm-up until it covers the host. """

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from runner.timing.settle import CAPPED_MIN_S, Reading, last_clock
from runner.timing.timer import Measurement, TimerPlan, sample, sample_min_s, warm_up

#: Launches the host may queue behind a spin kernel. CUDA's pending-launch queue holds about
#: 1024 launches on current drivers (benchmarks/device_time_check.py measures it: queueing
#: launches behind a long spin, the host's time per launch jumps at the depth); a quarter of
#: it leaves room for the events, the spin and the copies a call may also enqueue.
LAUNCH_QUEUE_BUDGET = 256
#: Launches each sample adds around its work: the clock probe, two events, a graph replay.
SAMPLE_LAUNCHES = 4
#: Shortest spin, seconds: covers enqueueing two events and a graph launch (~10-20 µs).
SPIN_MIN_S = 50e-6
#: Longest spin, seconds (a sanity cap: a blocked K that needs longer is host-bound anyway).
SPIN_MAX_S = 0.2
#: Shortest warm-up (s) of the device time (and the whole warm-up of the burst time): a few
#: chunks, so the settle rule has two windows to compare. A power-capped op is told by the
#: clock its first samples ran at (``runner.timing.clock_probe``) and warms up for longer
#: (``runner.timing.settle.CAPPED_MIN_S``); small and memory-bound ops pay only this.
DEVICE_WARMUP_S = 0.02
#: Seconds of samples per back-to-back chunk (one sync per chunk) and the most samples in one.
CHUNK_S, MAX_CHUNK_SAMPLES = 0.005, 64
#: While a ``Watch`` polls NVML between chunks: longer chunks, more of them queued ahead. An
#: NVML energy read can take milliseconds, and with 5 ms chunks one ahead the device starved
#: (an H200 was busy 6-45% of the window). With 50 ms chunks a power-capped bmm and linear
#: still fell behind; with 20 ms, bmm alone did once (the host then retries without the
#: watch).
WATCHED_CHUNK_S, WATCHED_AHEAD = 0.02, 3
#: Rejected samples in a row after which a method is abandoned.
MAX_RETAKES = 3
#: Times the warm-up may grow the spin. A host that still outlasts it is waiting on the device
#: (a sync or a pageable copy inside the call), and no spin will ever cover it.
MAX_SPIN_GROWTHS = 4


class HostBlocked(RuntimeError):
    """The host's enqueue outlasted the spin kernel: the GPU may have waited on the host."""


class Watch(Protocol):
    """Something that watches the samples' window as it runs (the energy counter:
    ``runner.execution.energy_samples.SampleWindow``), so that one settled window gives the time,
    the clock and the energy. ``window_s`` is the shortest span of samples it needs."""

    window_s: float

    def begin(self) -> None:
        """The first sampled chunk has completed: the window starts now."""

    def poll(self) -> None:
        """Called again and again while the host waits for a chunk: read, then pause."""

    def chunk(self, calls: int, busy_s: float) -> None:
        """A chunk completed inside the window: ``calls`` calls in ``busy_s`` of device time."""

    def discard(self) -> None:
        """The samples it watched were not used: forget the window."""



def steady_samples(work: Callable[[], Any], calls: int, spin_s: float, plan: TimerPlan,
            device: Any, before_sample: Callable[[], None] | None,
            wall: Callable[[], float], notes: list[str],
            read_clock: Callable[[], Reading | None] | None, *, sample_s: float,
            launches_per_sample: int, loop_capped: bool | None = None,
            watch: Watch | None = None, min_capped_s: float = CAPPED_MIN_S) -> Measurement:
    """Back-to-back samples (module docstring): warm up until settled, then sample with
    :func:`runner.timing.timer.sample`, all in one stream of chunks. ``launches_per_sample``:
    0 for a graph replay, else the blocked method's kernels per sample. ``loop_capped``:
    whether the loop time's warm-up, just before, found the op power-capped (None: it could
    not tell). False: the op has settled there, so the warm-up is a handover of one chunk,
    judged only if that chunk shows it capped after all (a launch-bound op the loop left
    idle half the time can reach the cap back to back). A capped op warms up for all of
    ``runner.timing.settle.CAPPED_MIN_S`` again, whatever the loop did: the few tens of
    milliseconds between the two (graph capture, memory columns) let an H200 recover enough
    headroom that a 0.5 s warm-up read bf16 8192³ 7% fast. ``watch``: polled while the host
    waits for each sampled chunk; the samples then span at least its ``window_s``.
    ``min_capped_s``: the shortest warm-up of a power-capped op
    (``runner.timing.settle.capped_min_s``: shorter when the device starts hot)."""
    chunk_s, ahead = (WATCHED_CHUNK_S, WATCHED_AHEAD) if watch is not None else (CHUNK_S, 2)
    samples_per_chunk = max(1, min(MAX_CHUNK_SAMPLES, round(chunk_s / max(sample_s, 1e-9))))
    # Every chunk in flight together stays within half the launch queue: past it the host
    # blocks inside a launch and the device catches up (50 ms chunks of a 0.75 ms bmm sample,
    # three ahead, were reached early every time).
    per_sample = launches_per_sample + SAMPLE_LAUNCHES
    samples_per_chunk = max(1, min(samples_per_chunk,
                                   2 * LAUNCH_QUEUE_BUDGET // (ahead * per_sample)))
    # The spin per sample of a held chunk (spin_s covers one sample's enqueue). The warm-up
    # may grow it until a chunk's spin reaches SPIN_MAX_S (doubling), not just
    # MAX_SPIN_GROWTHS times. Only a host that outlasts even that waits on the device.
    spin = [min(max(spin_s, SPIN_MIN_S), SPIN_MAX_S)]
    max_growths = max(MAX_SPIN_GROWTHS, math.ceil(math.log2(SPIN_MAX_S / spin[0])))
    # (chunk, valid, samples, the spin per sample that held it: 0.0 when not held)
    inflight: deque[tuple[Any, bool, int, float]] = deque()
    # hold_every: whether every chunk waits behind a spin. Off at first: a chunk queued behind
    # one still running needs none, and a spin between chunks is an idle gap in which a
    # power-capped GPU recovers its clock. A call (eager, or a graph replay of a tiny op) the
    # host enqueues slower than the device runs it falls behind; the warm-up then turns it on
    # (that op is launch-bound, far from the power cap, so the gap costs it nothing).
    counts = {"retaken": 0, "growths": 0, "hold_every": 0, "taken": 0}
    short_tail = [False]  # whether chunks past min_samples may be short (no span to fill)

    handover = loop_capped is False and plan.warmup_s > 0
    # A handover needs one chunk only to warm the graph and read the clock: a quarter of one
    # (a small op's trial is then shorter by most of a chunk).
    size = [max(1, samples_per_chunk // 4) if handover else samples_per_chunk]

    def enqueue() -> None:
        samples, size[0] = size[0], samples_per_chunk  # a short first chunk, then full ones
        on_their_way = counts["taken"] + len(buffer) + sum(n for _, _, n, _ in inflight)
        if (short_tail[0] and on_their_way >= plan.min_samples
                and all(n == samples_per_chunk for _, _, n, _ in inflight)):
            # Enough samples are already on their way: this chunk is likely waited for and
            # never used, so it is a short one (one at a time: should the median need more,
            # the next is full again and the device stays busy).
            samples = max(1, samples_per_chunk // 4)
        # Held: the first chunk; one behind a chunk the device reached early (it may have
        # caught up with the host) or behind a shorter one (a handover's: the host may not
        # have queued this one by the time the device has run that); every chunk once the
        # host is known to fall behind. The spin covers the enqueue of each sample it holds.
        held = (bool(counts["hold_every"]) or not inflight or not inflight[-1][1]
                or inflight[-1][2] < samples)
        hold = min(SPIN_MIN_S + spin[0] * samples, SPIN_MAX_S) if held else 0.0
        chunk = device.enqueue(work, samples, hold, before_sample)
        # Valid when the device had not reached the chunk's first event once the host had
        # queued all of it: the GPU cannot have waited on the host inside the chunk.
        inflight.append((chunk, not device.reached(chunk), samples, spin[0] if held else 0.0))

    def next_chunk(warming: bool) -> list[tuple[float, float | None]]:
        # The warm-up retries until the spin has grown max_growths times; the sampling
        # retakes at most MAX_RETAKES chunks in a row.
        attempts = MAX_RETAKES + 1 + (max_growths + 2 if warming else 0)
        for _ in range(attempts):
            while len(inflight) < ahead:
                enqueue()
            chunk, valid, samples, spun = inflight.popleft()
            sampling = watch is not None and not warming
            while sampling and not device.finished(chunk):
                watch.poll()
            times = device.wait(chunk)
            if sampling:
                watched(len(times) * calls, sum(times))
            if valid:
                mhz = device.clocks(chunk) or [None] * len(times)
                return [(t / calls, m) for t, m in zip(times, mhz)]
            counts["retaken"] += not warming
            if not spun:
                # Queued behind a running chunk, the device still caught up: the host falls
                # behind (eager launches, or graph replays of a tiny op whose replay and
                # events take the host longer than the device). Hold every chunk.
                counts["hold_every"] = 1
            elif warming and spun == spin[0]:  # grow the spin until it covers the host
                # (in the warm-up; a chunk queued before the last growth says nothing new)
                chunk_spin_s = min(SPIN_MIN_S + spin[0] * samples, SPIN_MAX_S)
                if counts["growths"] == max_growths or chunk_spin_s >= SPIN_MAX_S:
                    raise HostBlocked(f"the host's enqueue still outlasted a "
                                      f"{chunk_spin_s * 1e6:.0f} µs "
                                      f"spin after {counts['growths']} growths: the call "
                                      "waits on the device (a sync or a pageable copy)")
                counts["growths"] += 1
                spin[0] = min(2 * spin[0], SPIN_MAX_S)
        raise HostBlocked(f"the host blocked: the device reached {MAX_RETAKES + 1} chunks in "
                          "a row before the host had queued them")

    begun = [False]

    def watched(chunk_calls: int, busy_s: float) -> None:
        # The window opens when the first sampled chunk completes, so every call it counts
        # ran inside it (retaken chunks too: they ran, and drew power).
        if begun[0]:
            watch.chunk(chunk_calls, busy_s)
        else:
            begun[0] = True
            watch.begin()

    clocks: list[float] = []
    buffer: deque[tuple[float, float | None]] = deque()
    try:
        warmup, verdict = warm_up(lambda: next_chunk(True), plan, wall, read_clock=read_clock,
                                  min_s=DEVICE_WARMUP_S if plan.warmup_s > 0 and not handover
                                  else 0.0, handover=handover, min_capped_s=min_capped_s)

        def take() -> float:
            if not buffer:
                chunk = next_chunk(False)
                if all(mhz is None for _, mhz in chunk):  # no probe: NVML's, once per chunk
                    reading = read_clock() if read_clock is not None else None
                    if reading is not None and reading.clock_mhz is not None:
                        clocks.append(float(reading.clock_mhz))
                buffer.extend(chunk)
            per_call_s, mhz = buffer.popleft()
            counts["taken"] += 1
            if mhz is not None:
                clocks.append(mhz)
            return per_call_s

        min_s, sample_plan = sample_min_s(verdict), plan
        if watch is not None:  # the window's span, however soon the median converges
            min_s = max(min_s, watch.window_s)
            sample_plan = replace(plan, max_samples=max(plan.max_samples, 10**7),
                                  max_time_s=max(plan.max_time_s, 1.5 * min_s))
        short_tail[0] = min_s <= 0
        samples, stop_reason = sample(take, sample_plan, wall, min_s=min_s)
    finally:
        while inflight:  # the chunks queued past the last sample are waited for, not used
            device.wait(inflight.popleft()[0])
    if counts["retaken"]:
        notes.append(f"{counts['retaken']} chunk(s) retaken: the device reached them before "
                     "the host had queued them")
    return Measurement(samples_s=tuple(samples), calls_per_sample=calls,
                       warmup_calls=len(warmup), warmup_s=verdict.elapsed_s,
                       stop_reason=stop_reason, target_rel=plan.target_rel,
                       settled=verdict.settled, settle_reason=verdict.reason,
                       settled_clock_mhz=last_clock(warmup), clock_mhz=tuple(clocks),
                       min_samples=plan.min_samples, power_capped=verdict.capped)
