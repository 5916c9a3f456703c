"""Back-to-back device-time samples: what the GPU sustains (``runner.timing.device_time``).

Chunks of samples, each between its own start and end events with a clock probe
(``runner.timing.clock_probe``) between samples, queued ahead of the host with one sync per
chunk: the GPU never idles between samples, so it runs at the clock a job running the op back
to back sustains; the warm-up is the same stream, run until the series has settled
(``runner.timing.settle``). :class:`ChunkStream` holds the stream's state and draws its
transitions (which chunk waits behind a spin kernel, which is retaken, when the host is given
up on); :func:`steady_samples` runs the warm-up and the samples over it."""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runner.timing.chunks import (
    CHUNK_S,
    FILL_MIN_SAMPLE_S,
    LAUNCH_QUEUE_BUDGET,
    MAX_CHUNK_SAMPLES,
    MAX_RETAKES,
    MAX_SPIN_GROWTHS,
    SAMPLE_LAUNCHES,
    SPIN_MAX_S,
    SPIN_MIN_S,
    WATCHED_AHEAD,
    WATCHED_CHUNK_S,
    HostBlocked,
    Queued,
    Watch,
)
from runner.timing.device_plan import DEVICE_WARMUP_S, DeviceTimeOptions, SampleWork
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.sampler import after_warm_up, sample, tail_clocks, tail_power_share, warm_up
from runner.timing.series import Reading, last_clock


class ChunkStream:
    """The stream of back-to-back chunks and what it has learnt of the host (module docstring).

    Its state, all named here::

        phase      WARMING ──warm_up() returns──▶ SAMPLING ──sample() stops──▶ drain()
                   (next_chunk(True))              (take() → next_chunk(False))
        holding    FIRST ──an unheld chunk reached early──▶ EVERY          (hold_every)
                   FIRST: a chunk is held (by a spin, or a replay's fill) only with nothing in
                   flight ahead of it, behind a chunk reached early or behind a shorter one
        spin       spin_s ──a held chunk, queued at this spin_s, reached early while
                   WARMING, or the 2nd in a row while SAMPLING with fills──▶ 2 × spin_s
                   (growths; WARMING past max_growths or a hold at SPIN_MAX_S: HostBlocked)
        chunk      queued (held, or behind the chunk before) ──▶ waited ──▶ used if valid,
                   else retaken (counted in retaken while SAMPLING); more than MAX_RETAKES in
                   a row since the last growth: HostBlocked
        window     closed ──the first sampled chunk completes──▶ open (window_open)
        tail       short_tail (SAMPLING with no span to fill): once min_samples are on their
                   way, a chunk queued behind full ones is a short one
        sample_s   estimated ──the first chunk waited for──▶ its median sample (measured):
                   whether a hold is a fill (fills), and how many replays a fill is
    """

    def __init__(self, sample: SampleWork, plan: TimerPlan, device: Any,
                 read_clock: Callable[[], Reading | None] | None, watch: Watch | None,
                 handover: bool) -> None:
        self.work, self.calls, self.plan, self.device = sample.work, sample.calls, plan, device
        self.before_sample, self.read_clock, self.watch = sample.before, read_clock, watch
        spin_s, self.sample_s = sample.spin_s, sample.sample_s
        self.fills_allowed = sample.fill
        self.sample_measured = False  # sample_s is the caller's estimate until a chunk ran
        chunk_s, self.ahead = (WATCHED_CHUNK_S, WATCHED_AHEAD) if watch is not None \
            else (CHUNK_S, 2)
        samples_per_chunk = max(1, min(MAX_CHUNK_SAMPLES,
                                       round(chunk_s / max(self.sample_s, 1e-9))))
        # Every chunk in flight together stays within half the launch queue: past it the host
        # blocks inside a launch and the device catches up (50 ms chunks of a 0.75 ms bmm
        # sample, three ahead, were reached early every time).
        per_sample = sample.launches + SAMPLE_LAUNCHES
        self.samples_per_chunk = max(1, min(samples_per_chunk,
                                            2 * LAUNCH_QUEUE_BUDGET // (self.ahead * per_sample)))
        # The spin per sample of a held chunk (spin_s covers one sample's enqueue; a fill is
        # that long too). The warm-up (and a filled stream's samples) may grow it (doubling)
        # until a chunk's hold reaches SPIN_MAX_S, not just MAX_SPIN_GROWTHS times: only a
        # host that outlasts that waits on the device.
        self.spin_s = min(max(spin_s, SPIN_MIN_S), SPIN_MAX_S)
        self.max_growths = max(MAX_SPIN_GROWTHS, math.ceil(math.log2(SPIN_MAX_S / self.spin_s)))
        self.growths = 0
        # Off at first: a chunk queued behind one still running needs no spin, and a spin
        # between chunks is an idle gap in which a power-capped GPU recovers its clock. A call
        # (eager, or a graph replay of a tiny op) the host enqueues slower than the device runs
        # it falls behind; the warm-up then turns it on. A host that stalls once turns it on
        # for a capped op too: a replay's chunks are then held by more replays (``fills``).
        self.hold_every = False
        self.short_tail = False  # whether chunks past min_samples may be short
        self.window_open = False
        self.retaken = 0  # sampled chunks retaken (the warm-up's are not counted)
        # A handover needs one chunk only to warm the graph and read the clock: a quarter of
        # one (a small op's trial is then shorter by most of a chunk).
        self.next_size = max(1, self.samples_per_chunk // 4) if handover \
            else self.samples_per_chunk
        self.inflight: deque[Queued] = deque()
        self.buffer: deque[tuple[float, float | None]] = deque()  # (s per call, MHz) to take
        self.taken = 0
        self.clocks: list[float] = []  # the samples' clock (MHz), as take() read it
        self.power_shares: list[float] = []  # NVML's averaged power over its limit, a chunk each

    def enqueue(self) -> None:
        """Queue one more chunk: a short first one, then full ones."""
        samples, self.next_size = self.next_size, self.samples_per_chunk
        on_their_way = (self.taken + len(self.buffer)
                        + sum(queued.samples for queued in self.inflight))
        if (self.short_tail and on_their_way >= self.plan.min_samples
                and all(queued.samples == self.samples_per_chunk for queued in self.inflight)):
            # Enough samples are already on their way: this chunk is likely waited for and
            # never used, so it is a short one (one at a time: should the median need more,
            # the next is full again and the device stays busy).
            samples = max(1, self.samples_per_chunk // 4)
        # Held: the first chunk; one behind a chunk the device reached early (it may have
        # caught up with the host) or behind a shorter one (a handover's: the host may not
        # have queued this one by the time the device has run that); every chunk once the
        # host is known to fall behind. The spin covers the enqueue of each sample it holds.
        held = (self.hold_every or not self.inflight or not self.inflight[-1].valid
                or self.inflight[-1].samples < samples)
        hold_s = min(SPIN_MIN_S + self.spin_s * samples, SPIN_MAX_S) if held else 0.0
        fill = 0
        if held and self.fills:  # held by the op's own work, not a low-power spin
            fill, hold_s = math.ceil(hold_s / self.sample_s), 0.0
        chunk = self.device.enqueue(self.work, samples, hold_s, self.before_sample, fill=fill)
        # Valid when the device had not reached the chunk's first event once the host had
        # queued all of it: the GPU cannot have waited on the host inside the chunk.
        self.inflight.append(Queued(chunk, not self.device.reached(chunk), samples,
                                    self.spin_s if held else 0.0, fill,
                                    self.device.queued_s(chunk)))

    def next_chunk(self, warming: bool) -> list[tuple[float, float | None]]:
        """The next valid chunk's (seconds per call, MHz or None) per sample, keeping
        ``ahead`` chunks in flight; at most :data:`MAX_RETAKES` retakes in a row, counted
        afresh after each growth of the hold (:meth:`_reached_early`)."""
        in_a_row = 0
        while True:
            while len(self.inflight) < self.ahead:
                self.enqueue()
            queued = self.inflight.popleft()
            times = self._wait(queued, None if warming else self.watch)
            if not self.sample_measured and times:
                self._measured_sample(statistics.median(times))
            if queued.valid:
                mhz = self.device.clocks(queued.chunk) or [None] * len(times)
                return [(t / self.calls, m) for t, m in zip(times, mhz)]
            in_a_row += 1
            if self._reached_early(queued, warming, in_a_row):
                in_a_row = 0
            elif in_a_row > MAX_RETAKES:
                raise HostBlocked(f"the host blocked: the device reached {in_a_row} chunks "
                                  "in a row before the host had queued them")

    def _wait(self, queued: Queued, watch: Watch | None) -> list[float]:
        """Wait for ``queued``'s chunk, polling ``watch`` (the sampled chunks' window)."""
        while watch is not None and not self.device.finished(queued.chunk):
            watch.poll()
        times = self.device.wait(queued.chunk)
        if watch is not None:
            # The window opens when the first sampled chunk completes, so every call it
            # counts ran inside it (retaken chunks too: they ran, and drew power). A fill
            # ran in it as well, unsampled: counted at the samples' own pace.
            if self.window_open:
                filled_s = sum(times) / max(len(times), 1) * queued.filled
                watch.chunk((len(times) + queued.filled) * self.calls, sum(times) + filled_s)
            else:
                self.window_open = True
                watch.begin()
        return times

    @property
    def fills(self) -> bool:
        """Whether a held chunk is held by more of the op's own work (a replay's fill), not
        a spin: where the work allows it and a sample outruns its own launch."""
        return self.fills_allowed and self.sample_s >= FILL_MIN_SAMPLE_S

    def _measured_sample(self, sample_s: float) -> None:
        """The first chunk's median sample replaces the estimate the stream was made with.
        Hazard: the estimate can be the loop's time per call, which for a call the host
        launches slower than the device runs it (a fork-join of two streams) is the host's:
        an 11 µs replay was estimated at over 100 µs, so its chunks were held by fills, and
        a fill whose replays cost the host about what they give the device never covers the
        host, however often it grows (an H100 gave up after 8 growths). Each sample is one
        replay between its own events, so even a chunk reached early gives its length."""
        self.sample_measured = True
        self.sample_s = sample_s

    def _reached_early(self, queued: Queued, warming: bool, in_a_row: int) -> bool:
        """A chunk the device reached before the host had queued it (the ``in_a_row``-th in
        a row): it is retaken, and the stream learns from it (holding FIRST → EVERY, or the
        hold grows). Whether the hold grew."""
        self.retaken += not warming
        if not queued.spun_s:
            # Queued behind a running chunk, the device still caught up: the host falls
            # behind (eager launches, or graph replays of a tiny op whose replay and events
            # take the host longer than the device). Hold every chunk.
            self.hold_every = True
            return False
        # Grow the hold until it covers the host (a chunk queued before a growth says
        # nothing): in the warm-up; and while sampling where the hold is the op's own work
        # (no gap), once a stall lasts two chunks: a single late chunk (an NVML read, a
        # collection) is only retaken, or a fill would grow on every such stall over 15 s.
        if not (warming or (self.fills and in_a_row >= 2)) or queued.spun_s != self.spin_s:
            return False
        chunk_spin_s = min(SPIN_MIN_S + self.spin_s * queued.samples, SPIN_MAX_S)
        if self.growths == self.max_growths or chunk_spin_s >= SPIN_MAX_S:
            if not warming:  # the samples keep the retakes' own limit
                return False
            # The enqueue's own time tells the two apart: longer than the hold, the host
            # waited (on the device, or stalled); far shorter, the hold ran short.
            hold = (f"fill of {queued.filled} replays" if queued.filled
                    else f"{chunk_spin_s * 1e6:.0f} µs spin")
            raise HostBlocked(f"the host's enqueue ({queued.queued_s * 1e6:.0f} µs, the last "
                              f"chunk's) still outlasted a {hold} after {self.growths} "
                              "growths: the call waits on the device (a sync or a pageable "
                              "copy)")
        self.growths += 1
        self.spin_s = min(2 * self.spin_s, SPIN_MAX_S)
        return True

    def take(self) -> float:
        """One sample's seconds per call (for ``runner.timing.sampler.sample``), recording the
        clock it ran at: the probe's, else NVML's once per chunk."""
        if not self.buffer:
            chunk = self.next_chunk(False)
            reading = self.read_clock() if self.read_clock is not None else None
            if reading is not None:  # once per chunk: the averaged power the samples drew
                if reading.power_avg_share is not None:
                    self.power_shares.append(reading.power_avg_share)
                if reading.clock_mhz is not None and all(mhz is None for _, mhz in chunk):
                    self.clocks.append(float(reading.clock_mhz))  # no probe: NVML's clock
            self.buffer.extend(chunk)
        per_call_s, mhz = self.buffer.popleft()
        self.taken += 1
        if mhz is not None:
            self.clocks.append(mhz)
        return per_call_s

    def drain(self) -> None:
        """The chunks queued past the last sample are waited for, not used."""
        while self.inflight:
            self.device.wait(self.inflight.popleft().chunk)


def steady_samples(sample_work: SampleWork, plan: TimerPlan, device: Any,
                   options: DeviceTimeOptions, notes: list[str],
                   loop_capped: bool | None = None, watch: Watch | None = None) -> Measurement:
    """Back-to-back samples (module docstring) of ``sample_work``: warm up until settled,
    then sample, the settled half of a capped warm-up first
    (``runner.timing.sampler.after_warm_up``), all in one :class:`ChunkStream`. ``options``
    gives the clocks and the warm-up floors; ``loop_capped``: whether a loop-time warm-up
    just before found the op power-capped (None: it could not tell). False: the warm-up is a
    handover of one chunk, judged only if that chunk shows it capped after all (a launch-bound
    op the loop left idle half the time can reach the cap back to back). A capped op warms up
    for all of ``options.min_capped_s`` again: the few tens of ms between the two let an H200
    recover enough headroom that a 0.5 s warm-up read bf16 8192³ 7% fast. ``watch``: polled
    while the host waits for each sampled chunk (None: without one, whatever ``options``
    holds); the samples then span at least its ``window_s``."""
    wall, read_clock, sample_s = options.wall, options.read_clock, sample_work.sample_s
    calls, min_s, min_capped_s = sample_work.calls, options.min_s, options.min_capped_s
    handover = loop_capped is False and plan.warmup_s > 0
    stream = ChunkStream(sample_work, plan, device, read_clock, watch, handover)
    try:
        # warmup_calls samples, unless they would take longer than the warm-up itself (a
        # 21 ms call paid 0.2 s for ten): three then, the least the settle rule compares.
        warm_plan = replace(plan, warmup_calls=min(plan.warmup_calls, max(3, math.ceil(
            DEVICE_WARMUP_S / max(sample_s, 1e-9)))))
        warmup, verdict = warm_up(lambda: stream.next_chunk(True), warm_plan, wall,
                                  read_clock=read_clock,
                                  min_s=min_s if plan.warmup_s > 0 and not handover
                                  else 0.0, handover=handover, min_capped_s=min_capped_s)
        sample_plan, min_s, tail = after_warm_up(plan, verdict, warmup,
                                                 None if watch is None else watch.window_s)
        stream.short_tail = min_s <= 0  # no span to fill: the tail's chunks may be short
        stream.clocks.extend(tail_clocks(tail))
        samples, stop_reason = sample(stream.take, sample_plan, wall, min_s, [
            p.per_call_s for p in tail], verdict.elapsed_s - tail[0].t_s if tail else 0.0)
    finally:
        stream.drain()
    if stream.retaken:
        notes.append(f"{stream.retaken} chunk(s) retaken: the device reached them before "
                     "the host had queued them")
    return Measurement(samples_s=tuple(samples), calls_per_sample=calls,
                       warmup_calls=len(warmup), warmup_s=verdict.elapsed_s,
                       stop_reason=stop_reason, target_rel=plan.target_rel,
                       settled=verdict.settled, settle_reason=verdict.reason,
                       settled_clock_mhz=last_clock(warmup), clock_mhz=tuple(stream.clocks),
                       min_samples=plan.min_samples, power_capped=verdict.capped,
                       settled_samples=len(tail),
                       power_avg_share=tail_power_share(tail, stream.power_shares),
                       back_to_back=True)
