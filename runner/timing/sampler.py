"""The warm-up and the adaptive sampling loop that every time opsweep reports shares (the
loop time, ``runner.timing.timer``; the device and burst times, ``runner.timing.back_to_back``
and ``runner.timing.gapped``), so all of them get the same statistics and the same stop rule."""

from __future__ import annotations

import bisect
import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from runner.timing.measurement import TimerPlan
from runner.timing.series import Point, Reading, TimeView
from runner.timing.settle import CAPPED_MIN_S, CAPPED_SAMPLE_S, Settled, settle
from runner.timing.spread import mixed_reason
from runner.timing.stats import median_ci_rel_halfwidth


def sample_min_s(verdict: Settled, capped_span_s: float = CAPPED_SAMPLE_S) -> float:
    """Shortest span of the samples: ``capped_span_s``
    (:data:`runner.timing.settle.CAPPED_SAMPLE_S`) for a power-capped op (its clock still
    swings once settled), else none."""
    return capped_span_s if verdict.capped else 0.0  # None (not told): not capped


def settled_tail(points: Sequence[Point], verdict: Settled) -> Sequence[Point]:
    """The last half of a power-capped warm-up that settled: the two quarters :func:`judge`
    compared and found free of trend, at the state the samples that follow measure. They
    count as samples (:data:`CAPPED_SAMPLE_S`): the clock cycles slower than a short span of
    samples can average, and a second of them is paid for already. Nothing for a warm-up
    that hit its cap, or an op that is not capped (its samples need no span)."""
    if not (verdict.settled and verdict.capped) or not points:
        return ()
    return points[bisect.bisect_right(TimeView(points), verdict.elapsed_s / 2):]


def tail_clocks(tail: Sequence[Point]) -> list[float]:
    """The clocks of ``tail``'s samples as the samples' own are recorded
    (``runner.timing.back_to_back.ChunkStream.take``): each probed sample's effective clock,
    else one NVML reading per chunk (a chunk's points share their time), not one per point."""
    clocks: list[float] = []
    for _, chunk in itertools.groupby(tail, key=lambda point: point.t_s):
        points = list(chunk)
        probed = [p.effective_mhz for p in points if p.effective_mhz is not None]
        if probed:
            clocks += probed
        elif points[0].clock_mhz is not None:
            clocks.append(points[0].clock_mhz)
    return clocks


def tail_power_share(tail: Sequence[Point], sampled: Sequence[float] = ()) -> float | None:
    """The median averaged board power over its limit while the samples ran: ``sampled``,
    read once per chunk of the fresh samples, where there are any (the state they measured:
    a board that went on drawing the limit through the warm-up's settled half can draw less
    under the samples, as one H100 did at a higher clock), else across ``tail`` (a capped
    op's settled half: the first of its samples). None where it was not read."""
    shares = list(sampled) or [p.power_avg_share for p in tail if p.power_avg_share is not None]
    return statistics.median(shares) if shares else None


def after_warm_up(plan: TimerPlan, verdict: Settled, warmup: Sequence[Point],
                  watch_s: float | None = None) -> tuple[TimerPlan, float, Sequence[Point]]:
    """The device time's samples after its warm-up: their plan, their shortest span
    (:func:`sample_min_s`) and the warm-up points that open them (:func:`settled_tail`).
    ``watch_s``: a watch's window (the energy counter), which every sample it counts must
    fill: then the span is at least that long, and no warm-up point opens the samples."""
    min_s = sample_min_s(verdict)
    # A warm-up that was not judged (no warm-up to speak of: timer=smoke) has no settled half.
    tail = settled_tail(warmup, verdict) if plan.warmup_s > 0 else ()
    if watch_s is None:
        return replace(plan, max_samples=plan.max_samples + len(tail)), min_s, tail
    min_s = max(min_s, watch_s)  # the window's span, however soon the median converges
    return (replace(plan, max_samples=max(plan.max_samples, 10**7),
                    max_time_s=max(plan.max_time_s, 1.5 * min_s)), min_s, ())


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
           min_s: float = 0.0, seed: Sequence[float] = (),
           seed_s: float = 0.0) -> tuple[list[float], str]:
    """The adaptive sampling loop shared by every time opsweep reports (loop time and device
    time alike, so both get the same statistics and the same stop rule).

    ``take`` takes one sample and returns seconds per call. Stops once the median's 95% CI
    is within ``target_rel`` (after ``min_samples``), or at ``max_samples`` / ``max_time_s``.
    Returns the raw samples and the stop reason (converged | max_samples | max_time).
    ``min_s``: the samples span at least this long before they may stop as converged
    (:func:`sample_min_s`); ``max_time_s`` still ends them. ``seed``: samples already taken
    in the same regime, over the ``seed_s`` just before (the settled half of the warm-up:
    :func:`settled_tail`); they open the list and count toward ``min_samples``,
    ``max_samples`` (the caller raises it: :func:`after_warm_up`) and the span ``min_s``,
    while ``max_time_s`` is the new samples' own budget.
    """
    samples: list[float] = list(seed)
    ordered: list[float] = sorted(samples)  # kept sorted for the O(1) stopping check
    stop_reason = "max_samples"
    start = wall()
    while len(samples) < plan.max_samples:
        samples.append(take())
        bisect.insort(ordered, samples[-1])
        if len(samples) >= plan.min_samples and (min_s <= 0
                                                 or wall() - start + seed_s >= min_s):
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
