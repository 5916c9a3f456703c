"""Gapped device-time samples: the burst time and the cold-L2 protocol
(``runner.timing.device_time``).

Every sample is ``spin → start event → work → end event → sync`` (with ``flush``: flush, sync,
spin, one call: nvbench's cold protocol). The spin kernel holds the stream while the host
enqueues the sample, so the device never waits on the host inside it; the sync after it lets
a power-capped GPU recover its boost clock between samples, which is what the burst time
measures and what the steady state (``runner.timing.back_to_back``) avoids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from runner.timing.chunks import (
    MAX_RETAKES,
    MAX_SPIN_GROWTHS,
    SPIN_MAX_S,
    SPIN_MIN_S,
    HostBlocked,
)
from runner.timing.device_plan import DEVICE_WARMUP_S, DeviceTimeOptions, SampleWork
from runner.timing.measurement import Measurement, TimerPlan
from runner.timing.sampler import sample, warm_up


@dataclass(frozen=True)
class Timed:
    """One sample as the device saw it, in seconds."""

    work_s: float  # start → end event: the K calls
    spin_s: float  # pre → start event: how long the spin held the stream
    host_s: float  # host time from launching the spin to recording the end event



def gapped_samples(sample_work: SampleWork, plan: TimerPlan, device: Any,
                   options: DeviceTimeOptions, notes: list[str],
                   settling: bool = False) -> Measurement:
    """The gapped protocol (burst and cold; ``device`` is a ``device_time.Device``): warm
    ``sample_work`` up (growing the spin until it covers the host's enqueue), then sample it
    with ``runner.timing.sampler.sample``; each sample is valid or retaken, flushed first
    where ``options.flush`` says so. ``settling``: warm up until settled, else for at most
    :data:`DEVICE_WARMUP_S` (the burst: the boost clock is what it measures)."""
    calls, wall, read_clock = sample_work.calls, options.wall, options.read_clock
    gapped = _Gapped(sample_work.work, calls,
                     min(max(sample_work.spin_s, SPIN_MIN_S), SPIN_MAX_S), device,
                     sample_work.before, options.flush)
    warm_s = min(plan.warmup_s, DEVICE_WARMUP_S)
    warm_plan = plan if settling else replace(plan, warmup_s=warm_s, settle_max_s=warm_s
                                              or DEVICE_WARMUP_S)
    warmup, verdict = warm_up(lambda: [gapped.warm()], warm_plan, wall, min_s=warm_s,
                              read_clock=read_clock if settling else None)
    samples, stop_reason = sample(gapped.take, plan, wall)
    if gapped.retaken:
        notes.append(f"{gapped.retaken} sample(s) retaken: the host's enqueue outlasted the spin")
    return Measurement(samples_s=tuple(samples), calls_per_sample=calls,
                       warmup_calls=len(warmup), warmup_s=verdict.elapsed_s,
                       stop_reason=stop_reason, target_rel=plan.target_rel,
                       settled=verdict.settled if settling else None,
                       settle_reason=verdict.reason if settling else None,
                       min_samples=plan.min_samples)


class _Gapped:
    """One gapped sample at a time: the spin (``spin_s``, grown in the warm-up until it
    covers the host's enqueue, at most :data:`MAX_SPIN_GROWTHS` times) and the samples
    retaken because the host outlasted it."""

    def __init__(self, work: Callable[[], Any], calls: int, spin_s: float, device: Any,
                 before_sample: Callable[[], None] | None,
                 flush: Callable[[], None] | None) -> None:
        self.work, self.calls, self.device = work, calls, device
        self.before_sample, self.flush = before_sample, flush
        self.spin_s, self.growths, self.retaken = spin_s, 0, 0

    def timed(self) -> Timed:
        if self.before_sample:
            self.before_sample()
        return self.device.timed(self.work, self.spin_s, self.flush)

    def warm(self) -> float:
        """A warm-up sample's device seconds (all its calls)."""
        t = self.timed()
        if t.host_s >= t.spin_s:  # not covered: grow the spin (warm-up samples are not used)
            if self.growths == MAX_SPIN_GROWTHS or self.spin_s >= SPIN_MAX_S:
                raise HostBlocked(f"the host's enqueue ({t.host_s * 1e6:.0f} µs) still "
                                  f"outlasted a {t.spin_s * 1e6:.0f} µs spin after "
                                  f"{self.growths} growths: the call waits on the device "
                                  "(a sync or a pageable copy)")
            self.growths += 1
            self.spin_s = min(max(self.spin_s, 2 * t.host_s), SPIN_MAX_S)
        return t.work_s

    def take(self) -> float:
        """A valid sample's seconds per call; at most :data:`MAX_RETAKES` retaken in a row."""
        for _ in range(MAX_RETAKES + 1):
            t = self.timed()
            if t.host_s < t.spin_s:
                return t.work_s / self.calls
            self.retaken += 1
            last = t
        raise HostBlocked(f"the host blocked: enqueueing took {last.host_s * 1e6:.0f} µs, "
                          f"longer than the {last.spin_s * 1e6:.0f} µs spin, "
                          f"{MAX_RETAKES + 1} samples in a row")
