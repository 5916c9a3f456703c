"""The loop time, and the measurement hazards every time opsweep takes is guarded against.

Every trial, whatever its op or execution mode, is measured by :func:`measure`. Ops and modes
hand over a zero-argument callable; this module warms it up, decides how many calls go into one
sample, flushes L2 if asked, reads the clock and decides when to stop. Nothing else times an op
but the device time (``runner.timing.device_time``), which shares its sampler.

Clocks are injectable (``runner.timing.clocks.Clock``), as is the wall clock that enforces
``max_time_s`` (:class:`LoopTimeOptions`), so tests drive the whole loop with a fake clock and
check exact statistics.

Measurement hazards (each is commented where it is handled: here, in ``runner.timing.clocks``
and in ``runner.timing.sampler``):

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
the same sampler and warm-up (``runner.timing.sampler``); docs/timing.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.timing.clocks import Clock
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.sampler import sample, sample_min_s, warm_up
from runner.timing.series import Point, Reading, last_clock
from runner.timing.settle import CAPPED_MIN_S, Settled
from runner.timing.spread import busy_host, far_fewer_calls, involuntary_switches, mixed_reason


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


@dataclass(frozen=True)
class LoopTimeOptions:
    """How the loop time of one op is taken (:func:`measure`), beyond its plan and clock:
    the hooks around each sample, the wall clock, and what a handover from the device time
    (``runner.execution.timed.handover_plan``) already knows."""

    #: the clock that enforces ``warmup_s`` and ``max_time_s`` (tests inject a fake)
    wall: Callable[[], float] = time.perf_counter
    #: run before every timed region, outside it (backward mode resets grads there, as
    #: ``triton.testing.do_bench`` does with ``grad_to_none``)
    before_sample: Callable[[], None] | None = None
    #: flush L2 before every sample, outside the timed region (hazard 4)
    flush: Callable[[], None] | None = None
    #: reads the SM clock and power (a ``Reading``) for the settle rule (None: time alone)
    read_clock: Callable[[], Reading | None] | None = None
    #: the op has just run back to back at its sustained state (the device time's samples,
    #: which tell its clock), so the warm-up only checks that its time per call holds,
    #: without probing the clock (``runner.timing.settle.settle``)
    handover: bool = False
    #: the shortest warm-up (None: the plan's ``warmup_s``)
    min_warmup_s: float | None = None
    #: the shortest warm-up of a power-capped op
    min_capped_warmup_s: float = CAPPED_MIN_S
    #: the shortest span of the samples, whatever the warm-up found (a handover's; None:
    #: ``runner.timing.sampler.sample_min_s``)
    min_span_s: float | None = None
    #: the calls per sample, known already: a handover with no warm-up to speak of
    #: (``min_warmup_s`` 0) then runs none, not even the call that would size them (one
    #: call of a 21 ms op is 21 ms). None: chosen from the warm-up's last calls
    calls_per_sample: int | None = None


def measure(fn: Callable[[], Any], plan: TimerPlan, clock: Clock,
            options: LoopTimeOptions = LoopTimeOptions()) -> Measurement:
    """Warm ``fn`` up until settled, then sample it until the median is stable or a cap is
    reached; a block of samples a burst of other work spoilt is set aside once and re-taken.
    ``options`` (:class:`LoopTimeOptions`): the hooks around each sample, the wall clock and
    what a handover already knows."""
    warmup, verdict, calls = _warm_up_loop(fn, plan, clock, options)
    wall, flush = options.wall, options.flush
    # With an L2 flush every call must start cold: one call per sample (hazard 4).
    loop = _LoopSampler(fn, plan, clock, options, calls=1 if flush else calls,
                        span_s=sample_min_s(verdict) if options.min_span_s is None
                        else options.min_span_s)
    begun = wall()
    samples, stop_reason, preempted = loop.block()
    # K came from the median of the last five warm-up calls; fewer (the smoke preset's one
    # cold call) choose no K worth judging
    judged = not flush and len(warmup) >= 5
    quiet = _quiet_calls(samples, plan) if judged else None
    set_aside = (mixed_reason(samples) or (far_fewer_calls(loop.calls, quiet) if quiet else None)
                 or busy_host(preempted))
    extra_calls, extra_s, first_q25 = 0, 0.0, None
    if set_aside:
        # A burst of other work during the block (or the warm-up that chose K): once, count
        # the block as warm-up and take a fresh one at the K its fastest quarter asks for.
        # Still mixed: noisy, with both reasons.
        extra_calls, extra_s, loop.calls = len(samples), wall() - begun, quiet or loop.calls
        first_q25 = sorted(samples)[len(samples) // 4]
        samples, stop_reason, preempted = loop.block()
        quiet = _quiet_calls(samples, plan) if judged else None
    return Measurement(samples_s=tuple(samples), calls_per_sample=loop.calls,
                       warmup_calls=len(warmup) + extra_calls,
                       warmup_s=verdict.elapsed_s + extra_s,
                       stop_reason=stop_reason, target_rel=plan.target_rel,
                       settled=verdict.settled, settle_reason=verdict.reason,
                       settled_clock_mhz=last_clock(warmup), min_samples=plan.min_samples,
                       power_capped=verdict.capped, quiet_calls=quiet, remeasured=set_aside,
                       set_aside_s=extra_s,
                       first_block_q25_s=first_q25, preempted_per_s=preempted)


def _warm_up_loop(fn: Callable[[], Any], plan: TimerPlan, clock: Clock,
                  options: LoopTimeOptions) -> tuple[list[Point], Settled, int]:
    """Hazard 2: the loop's warm-up (``runner.timing.sampler.warm_up``), one call per step,
    the clock probed while it runs (an event clock that can: ``probing``); and the calls per
    sample its last calls ask for (``calls_per_sample``, where known, skips a handover's one
    call)."""
    handover, calls = options.handover, options.calls_per_sample
    if calls is not None and handover and not options.min_warmup_s:
        return [], Settled(True, 0.0, capped=False), calls
    before_sample = options.before_sample

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
        warmup, verdict = warm_up(lambda: [one_call()], plan, options.wall,
                                  read_clock=options.read_clock, min_s=options.min_warmup_s,
                                  handover=handover,
                                  min_capped_s=options.min_capped_warmup_s)
    finally:
        if probing:
            clock.probing = False  # type: ignore[attr-defined]
    recent = sorted(point.per_call_s for point in warmup[-5:])
    return warmup, verdict, choose_calls_per_sample(recent[len(recent) // 2], plan)


class _LoopSampler:
    """The loop time's samples: ``calls`` calls of ``fn`` per timed region (hazard 3; a
    re-measure changes it), spanning at least ``span_s``."""

    def __init__(self, fn: Callable[[], Any], plan: TimerPlan, clock: Clock,
                 options: LoopTimeOptions, *, calls: int, span_s: float) -> None:
        self.fn, self.plan, self.clock, self.wall = fn, plan, clock, options.wall
        self.before_sample, self.flush = options.before_sample, options.flush
        self.calls, self.span_s = calls, span_s

    def take(self) -> float:
        """One sample's seconds per call."""
        if self.before_sample:
            self.before_sample()
        if self.flush:
            self.flush()  # hazard 4: outside the timed region
        token = self.clock.start()
        for _ in range(self.calls):
            self.fn()
        return self.clock.stop(token) / self.calls

    def block(self) -> tuple[list[float], str, float | None]:
        """A block of samples (``runner.timing.sampler.sample``), its stop reason and the
        host's involuntary context switches per second over it (None: not read)."""
        # the preemption rate is read on the real clock; an injected wall is a test's
        switches, started = involuntary_switches(), time.perf_counter()
        got, why = sample(self.take, self.plan, self.wall, min_s=self.span_s)
        if switches is None or self.wall is not time.perf_counter:
            return got, why, None
        return got, why, (involuntary_switches() - switches) / max(
            time.perf_counter() - started, 1e-9)


def _quiet_calls(samples: list[float], plan: TimerPlan) -> int:
    """The calls per sample the fastest quarter of the samples asks for."""
    return choose_calls_per_sample(sorted(samples)[len(samples) // 4], plan)
