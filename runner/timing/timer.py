"""The one place in opsweep that times anything.

Every trial, whatever its op or execution mode, is measured by :func:`measure`. Ops and modes
hand over a zero-argument callable; this module warms it up, decides how many calls go into one
sample, flushes L2 if asked, reads the clock and decides when to stop.

Clocks are injectable (:class:`Clock`), as is the wall clock that enforces ``max_time_s``, so
tests drive the whole loop with a fake clock and check exact statistics.

Measurement hazards handled here (each is commented where it is handled):

1. CUDA work is asynchronous. A host timer around a launch measures the launch, not the
   kernel. CUDA events are recorded *on the stream* and read only after the end event has
   completed.
2. The first calls are slow (CUDA context, cuBLAS handles, lazy module loading, autotuning,
   the caching allocator growing), and a compute-bound op near the power cap runs at the boost
   clock for its first second. They stay out of the samples: warm-up by count *and* time, and
   until the series has settled (``runner.timing.settle``), up to ``settle_max_s``.
3. A sample that starts on an idle GPU charges the first launch's latency (~5-10 µs of host
   time between the start event and the kernel) to the op. For a 1 ms op that is noise; for a
   5 µs op it doubles the time, and whether a 9 µs op got batched or not would flip the
   result. So every op shorter than ``batch_below_us`` (1 ms) is timed as K back-to-back calls
   per event pair, K chosen so a sample lasts about ``batch_target_us``: the edge effect is
   then ~1% and the number is the steady-state time per call of a tight loop (the launch
   rate for launch-bound ops, GPU time otherwise).
4. Repeated calls over the same inputs measure the L2 cache, not memory. ``flush_l2`` writes a
   buffer twice the L2 size before each sample, outside the timed region, and then forces one
   call per sample (the 2nd..Kth call of a batch would run warm). The flush is *not*
   synchronised: like ``triton.testing.do_bench``'s cache clear, the flush kernel keeps the
   GPU busy while the host enqueues the start event and the op, so the single call is timed
   without its launch latency.
5. Noise is one-sided; we report the median with a distribution-free CI, keep every raw sample,
   and stop adaptively once the CI is tight rather than after a fixed count.

This is the *loop time*: what the op costs in a back-to-back eager loop on this host. On CUDA,
``runner.timing.device_time`` also takes the *device time* (the GPU's own time per call) with
the same sampler (:func:`sample`) and warm-up (:func:`warm_up`); docs/timing.md.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from runner.timing.settle import (
    CAPPED_MIN_S,
    CAPPED_SAMPLE_S,
    Point,
    Reading,
    Settled,
    last_clock,
    settle,
)
from runner.timing.spread import (
    busy_host,
    far_fewer_calls,
    involuntary_switches,
    mixed_reason,
    slower_than_before,
)
from runner.timing.stats import SampleStats, median_ci_rel_halfwidth, summarize


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

    While ``probing`` (the warm-up: :func:`measure` turns it on), a clock probe
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
        event = self._torch.cuda.Event(enable_timing=True)
        event.record(self._torch.cuda.current_stream(self._device))
        return event, stamps

    def stop(self, token: Any) -> float:
        start, stamps = token
        end = self._torch.cuda.Event(enable_timing=True)
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


def heat_device(device: Any, seconds: float, wall: Callable[[], float] = time.perf_counter,
                size: int = 8192) -> int:
    """Run back-to-back bf16 matmuls on ``device`` for ``seconds``; return how many ran.

    An H200 under sustained matmul load drops from 1980 MHz towards 1470 MHz on its power cap,
    and how far it has dropped depends on what ran in the minute before. Two runs of the same
    sweep therefore differ by several percent if one follows heavy work and the other does
    not. Heating the GPU to its sustained-load state before a job (``gpu_warmup_s``) makes
    every run start from the same state. Synchronises every 20 launches so the host never
    queues far beyond ``seconds``.
    """
    import torch

    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    start, launched = wall(), 0
    while wall() - start < seconds:
        for _ in range(20):
            torch.mm(a, b)
        launched += 20
        torch.cuda.synchronize(device)
    return launched


@dataclass(frozen=True)
class TimerPlan:
    """The knobs of one measurement (a frozen copy of ``TimerSettings``)."""

    warmup_calls: int = 10
    warmup_s: float = 0.05
    min_samples: int = 10
    max_samples: int = 1000
    target_rel: float = 0.01
    max_time_s: float = 2.0
    batch_below_us: float = 1000.0
    batch_target_us: float = 1000.0
    max_calls_per_sample: int = 10000
    settle_max_s: float = 5.0

    @classmethod
    def from_settings(cls, settings: Any) -> TimerPlan:
        names = cls.__dataclass_fields__
        return cls(**{name: getattr(settings, name) for name in names})

    def __post_init__(self) -> None:
        for name in ("min_samples", "max_samples", "max_calls_per_sample"):
            if getattr(self, name) < 1:
                raise ValueError(f"timer.{name} must be >= 1, got {getattr(self, name)}")
        if self.min_samples > self.max_samples:
            raise ValueError(f"timer.min_samples ({self.min_samples}) must not exceed "
                             f"timer.max_samples ({self.max_samples})")
        if self.target_rel <= 0 or self.max_time_s <= 0:
            raise ValueError("timer.target_rel and timer.max_time_s must be positive")


@dataclass(frozen=True)
class Measurement:
    """Raw samples of one trial and how they were taken. Statistics are derived, never stored.

    ``samples_s`` holds seconds *per call*: each sample's elapsed time divided by
    ``calls_per_sample``.
    """

    samples_s: tuple[float, ...]
    calls_per_sample: int
    warmup_calls: int
    warmup_s: float
    stop_reason: str
    target_rel: float
    #: whether the warm-up settled (``runner.timing.settle``) or hit ``settle_max_s``
    settled: bool | None = None
    settle_reason: str | None = None
    #: SM clock at the end of the warm-up and during the samples (MHz; empty: not read)
    settled_clock_mhz: float | None = None
    clock_mhz: tuple[float, ...] = ()
    #: the preset's min_samples: fewer samples than this is noisy (:attr:`noisy_reason`)
    min_samples: int = 1
    #: whether the warm-up found the op power-capped (``runner.timing.settle.capped``)
    power_capped: bool | None = None
    #: calls per sample the fastest quarter of the samples asks for (None: not judged)
    quiet_calls: int | None = None
    #: why a first block of samples was set aside and these re-measured (None: it was not),
    #: and that block's q25 (s per call: the op can run that fast)
    remeasured: str | None = None
    first_block_q25_s: float | None = None
    #: involuntary context switches per second of the samples (None: not read)
    preempted_per_s: float | None = None

    @cached_property
    def stats(self) -> SampleStats:
        return summarize(self.samples_s)

    @property
    def noisy(self) -> bool:
        """True when the median is not to be trusted: fewer samples than the preset's
        ``min_samples`` (a call slower than ``max_time_s``), a series one median cannot
        describe (``runner.timing.spread``), or a CI that never got within
        ``target_rel``. Report, don't trust; :attr:`noisy_reason` says which."""
        return self.noisy_reason is not None

    @property
    def noisy_reason(self) -> str | None:
        """Fewer samples than ``min_samples``; a series one median cannot describe
        (``runner.timing.spread``: clusters, a slow tail, a step, or far fewer calls per
        sample than the op needs); or a CI wider than ``target_rel``. The first that holds;
        after a re-measure, with what the first block showed."""
        n = len(self.samples_s)
        if n < self.min_samples:
            return (f"{n} sample{'s' if n != 1 else ''} < min_samples {self.min_samples} "
                    f"(stopped: {self.stop_reason})")
        reason = (mixed_reason(self.samples_s, None)
                  or busy_host(self.preempted_per_s)
                  or slower_than_before(self.stats.median, self.first_block_q25_s)
                  or (far_fewer_calls(self.calls_per_sample, self.quiet_calls)
                      if self.quiet_calls else None))
        wide = self.stats.ci_rel_halfwidth
        if reason is None and wide > self.target_rel:
            reason = f"CI ±{_pct(wide)} > target_rel ±{_pct(self.target_rel)}"
        if reason and self.remeasured:
            reason += f"; re-measured once, the first block showed {self.remeasured}"
        return reason


def _pct(fraction: float) -> str:
    return "inf" if math.isinf(fraction) else f"{100 * fraction:.3g}%"


def choose_calls_per_sample(per_call_s: float, plan: TimerPlan) -> int:
    """Hazard 3: batch ops shorter than ``batch_below_us`` so one sample lasts about
    ``batch_target_us``. ``per_call_s`` comes from warm-up calls timed one by one, which
    over-estimates short ops (it includes the launch edge); K is then smaller than ideal but
    a sample still lasts a large multiple of that edge."""
    per_call_us = per_call_s * 1e6
    if per_call_us >= plan.batch_below_us:
        return 1
    calls = math.ceil(plan.batch_target_us / max(per_call_us, 1e-3))
    return max(1, min(calls, plan.max_calls_per_sample))


def measure(fn: Callable[[], Any], plan: TimerPlan, clock: Clock, *,
            wall: Callable[[], float] = time.perf_counter,
            before_sample: Callable[[], None] | None = None,
            flush: Callable[[], None] | None = None,
            read_clock: Callable[[], Reading | None] | None = None,
            handover: bool = False, min_s: float | None = None,
            min_capped_s: float = CAPPED_MIN_S,
            capped_span_s: float = CAPPED_SAMPLE_S,
            span_s: float | None = None) -> Measurement:
    """Warm ``fn`` up until settled, then sample it until the median is stable or a cap is
    reached.

    ``before_sample`` runs before every timed region, outside it (backward mode resets grads
    there, as ``triton.testing.do_bench`` does with ``grad_to_none``). ``flush`` too (L2).
    ``wall`` is the clock that enforces ``warmup_s`` and ``max_time_s``; tests inject a fake.
    ``read_clock`` reads the SM clock and power (a ``Reading``) for the settle rule (None:
    time alone). ``handover``: the op has just run back to back at its sustained state (the
    device time's samples, which tell its clock), so the warm-up only checks that its time
    per call holds, without probing the clock (``runner.timing.settle.settle``); ``min_s``:
    the shortest warm-up (default ``warmup_s``); ``min_capped_s``: the shortest warm-up of a
    power-capped op; ``capped_span_s``: the shortest span of its samples; ``span_s``: the
    shortest span of the samples, whatever the warm-up found (a handover's).
    """
    def one_call() -> tuple[float, float | None]:
        if before_sample:
            before_sample()
        token = clock.start()
        fn()
        seconds = clock.stop(token)
        return seconds, getattr(clock, "last_mhz", None)

    # A handover's op has just been probed by the device time: the loop's own regime (a
    # launch-bound op leaves the GPU idle and its clock drifts up) is judged by time alone.
    probing = hasattr(clock, "probing") and not handover
    if probing:
        clock.probing = True  # type: ignore[attr-defined]
    try:
        warmup, verdict = warm_up(lambda: [one_call()], plan, wall, read_clock=read_clock,
                                  min_s=min_s, handover=handover, min_capped_s=min_capped_s)
    finally:
        if probing:
            clock.probing = False  # type: ignore[attr-defined]
    warmup_times = [p.per_call_s for p in warmup]
    recent = sorted(warmup_times[-5:])
    # With an L2 flush every call must start cold: one call per sample (hazard 4).
    calls = 1 if flush else choose_calls_per_sample(recent[len(recent) // 2], plan)

    def take() -> float:
        if before_sample:
            before_sample()
        if flush:
            flush()  # hazard 4: outside the timed region
        token = clock.start()
        for _ in range(calls):
            fn()
        return clock.stop(token) / calls

    def block() -> tuple[list[float], str, float | None]:
        # the preemption rate is read on the real clock; an injected wall is a test's
        switches, started = involuntary_switches(), time.perf_counter()
        got, why = sample(take, plan, wall, min_s=sample_min_s(verdict, capped_span_s)
                          if span_s is None else span_s)
        if switches is None or wall is not time.perf_counter:
            return got, why, None
        return got, why, (involuntary_switches() - switches) / max(
            time.perf_counter() - started, 1e-9)

    begun = wall()
    samples, stop_reason, preempted = block()
    quiet = 1 if flush else choose_calls_per_sample(sorted(samples)[len(samples) // 4], plan)
    # K came from the median of the last five warm-up calls; fewer (the smoke preset's one
    # cold call) choose no K worth judging
    judged = not flush and len(warmup_times) >= 5
    quiet = quiet if judged else None
    set_aside = (mixed_reason(samples) or (far_fewer_calls(calls, quiet) if quiet else None)
                 or busy_host(preempted))
    extra_calls, extra_s, first_q25 = 0, 0.0, None
    if set_aside:
        # A burst of other work during the block (or the warm-up that chose K): once, count
        # the block as warm-up and take a fresh one at the K its fastest quarter asks for
        # (take() reads ``calls`` when it runs). Still mixed: noisy, with both reasons.
        extra_calls, extra_s, calls = len(samples), wall() - begun, quiet or calls
        first_q25 = sorted(samples)[len(samples) // 4]
        samples, stop_reason, preempted = block()
        quiet = choose_calls_per_sample(sorted(samples)[len(samples) // 4], plan) \
            if judged else None
    return Measurement(samples_s=tuple(samples), calls_per_sample=calls,
                       warmup_calls=len(warmup_times) + extra_calls,
                       warmup_s=verdict.elapsed_s + extra_s,
                       stop_reason=stop_reason, target_rel=plan.target_rel,
                       settled=verdict.settled, settle_reason=verdict.reason,
                       settled_clock_mhz=last_clock(warmup), min_samples=plan.min_samples,
                       power_capped=verdict.capped, quiet_calls=quiet, remeasured=set_aside,
                       first_block_q25_s=first_q25, preempted_per_s=preempted)


def sample_min_s(verdict: Settled, capped_span_s: float = CAPPED_SAMPLE_S) -> float:
    """Shortest span of the samples: ``capped_span_s``
    (:data:`runner.timing.settle.CAPPED_SAMPLE_S`) for a power-capped op (its clock still
    swings once settled), else none."""
    return capped_span_s if verdict.capped else 0.0  # None (not told): not capped


def warm_up(step: Callable[[], list[Any]], plan: TimerPlan,
            wall: Callable[[], float] = time.perf_counter, *,
            read_clock: Callable[[], Reading | None] | None = None,
            min_s: float | None = None, handover: bool = False,
            min_capped_s: float = CAPPED_MIN_S) -> tuple[list[Point], Settled]:
    """Hazard 2: run ``step`` (which times itself and returns seconds per call, or (seconds,
    effective MHz) pairs, one per sample) until ``warmup_calls`` samples and ``warmup_s`` (or
    ``min_s``) have passed AND the series has settled (``runner.timing.settle``), or until
    ``settle_max_s``. At least one step always runs; a step slower than the cap ends warm-up
    after it. ``handover``: ``runner.timing.settle.settle`` (one step, then judged only if
    power-capped); ``min_capped_s``: the shortest warm-up of a power-capped series."""
    return settle(step, min_s=plan.warmup_s if min_s is None else min_s,
                  cap_s=max(plan.settle_max_s, min(plan.warmup_s, plan.max_time_s)),
                  min_calls=1 if handover else plan.warmup_calls, wall=wall,
                  read_clock=read_clock, handover=handover, min_capped_s=min_capped_s)


def sample(take: Callable[[], float], plan: TimerPlan,
           wall: Callable[[], float] = time.perf_counter,
           min_s: float = 0.0) -> tuple[list[float], str]:
    """The adaptive sampling loop shared by every time opsweep reports (loop time and device
    time alike, so both get the same statistics and the same stop rule).

    ``take`` takes one sample and returns seconds per call. Stops once the median's 95% CI
    is within ``target_rel`` (after ``min_samples``), or at ``max_samples`` / ``max_time_s``.
    Returns the raw samples and the stop reason (converged | max_samples | max_time).
    ``min_s``: the samples span at least this long before they may stop as converged
    (:func:`sample_min_s`); ``max_time_s`` still ends them.
    """
    samples: list[float] = []
    ordered: list[float] = []  # kept sorted for the O(1) stopping check
    stop_reason = "max_samples"
    start = wall()
    while len(samples) < plan.max_samples:
        samples.append(take())
        bisect.insort(ordered, samples[-1])
        if len(samples) >= plan.min_samples and (min_s <= 0 or wall() - start >= min_s):
            # A tight CI about a mixed series is confident about the wrong number
            # (runner.timing.spread): extend instead, to max_samples / max_time.
            if (median_ci_rel_halfwidth(ordered) <= plan.target_rel
                    and mixed_reason(samples, ordered) is None):
                stop_reason = "converged"
                break
        if wall() - start >= plan.max_time_s:
            stop_reason = "max_time"
            break
    return samples, stop_reason
