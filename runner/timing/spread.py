"""Is one median a fair summary of these samples?

The stop rule (``runner.timing.sampler.sample``) stops once the median's confidence interval is
tight. That interval cannot see a series that is really two series: on a busy host a burst
of other work slows a run of samples by 100x, and with 60% of the samples in one cluster the
median sits tightly in whichever cluster holds the middle rank. The CI then says ±0.5% about a
number that is the load, not the op (a 128³ matmul read 15,900 µs with q25 at 35 µs).

So the samples' shape is judged too, from the raw series, before a median is trusted. What
fits here of the tools it follows: ``torch.utils.benchmark``'s ``Measurement`` warns when the
interquartile range is a large share of the median ("environmental influence"), and pyperf's
``check`` warns when the extremes stray far from the centre. Both warn only; opsweep also
refuses to stop early on such a series and re-measures it once in a fresh block (the
timer's job), and a series that stays mixed is ``noisy`` with the reason this module gives.

Five shapes, checked in this order (the first found is the reason):

* **clusters**: a gap between consecutive sorted samples of more than :data:`CLUSTER_GAP`x,
  with at least :data:`CLUSTER_SHARE` of the samples on each side;
* **median far above q25**: the middle rank is already in the slow part;
* **slow tail**: at least :data:`TAIL_SHARE` of the samples slower than :data:`TAIL_RATIO`x
  the median (one or two outliers are fine: the median ignores them);
* **wide**: an interquartile range over :data:`IQR_SHARE` of the median (the threshold at
  which ``torch.utils.benchmark`` warns of "significant environmental influence"): a host
  time-slicing the op among other processes spreads every sample without making clusters;
* **step**: the first and the last third of the series, in time order, have medians more than
  :data:`STEP_REL` apart and confidence intervals that do not overlap.

A quiet series (a few % of spread, a stray outlier) has none of them. Samples are never
dropped: a mixed series keeps every sample and says so.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence

from runner.timing.stats import median_ci_ranks

#: Sorted neighbours further apart than this ratio split the samples into two clusters.
CLUSTER_GAP = 1.5
#: Each cluster holds at least this share of the samples (fewer: a tail, judged below).
CLUSTER_SHARE = 0.25
#: A median more than this many times q25 is not the typical sample.
MEDIAN_OVER_Q25 = 1.5
#: A sample slower than this many medians belongs to the tail...
TAIL_RATIO = 1.5
#: ...and a tail holding this share of the samples contaminates the series.
TAIL_SHARE = 0.2
#: An interquartile range wider than this share of the median: the host, not the op.
IQR_SHARE = 0.25
#: First and last third medians further apart than this (and outside each other's CI): a step.
STEP_REL = 0.10
#: Calls per sample up to which a burst of other work lands whole in one sample.
FEW_CALLS = 16
#: Fewer samples than this are not judged (too few to tell; the CI says noisy anyway).
MIN_JUDGED = 8


def _median(ordered: Sequence[float]) -> float:
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.0f} µs" if us >= 1000 else f"{us:.3g} µs"


def _clusters(ordered: Sequence[float]) -> str | None:
    n = len(ordered)
    least = max(2, int(CLUSTER_SHARE * n + 0.999))
    best, at = 0.0, -1
    for i in range(least - 1, n - least):  # split after ordered[i]
        low = ordered[i]
        if low > 0 and ordered[i + 1] / low > best:
            best, at = ordered[i + 1] / low, i
    if best <= CLUSTER_GAP:
        return None
    fast, slow = ordered[: at + 1], ordered[at + 1:]
    return (f"two clusters: {len(fast)} samples near {_us(_median(fast))}, {len(slow)} near "
            f"{_us(_median(slow))}")


def _median_over_q25(ordered: Sequence[float]) -> str | None:
    q25 = statistics.quantiles(ordered, n=4, method="inclusive")[0]
    median = _median(ordered)
    if q25 > 0 and median > MEDIAN_OVER_Q25 * q25:
        return f"median {_us(median)} is {median / q25:.3g}x q25 {_us(q25)}"
    return None


def _tail(ordered: Sequence[float]) -> str | None:
    median = _median(ordered)
    slow = len(ordered) - bisect.bisect_right(ordered, TAIL_RATIO * median)
    if slow >= TAIL_SHARE * len(ordered):
        return (f"slow tail: {slow} of {len(ordered)} samples above {TAIL_RATIO:g}x the "
                f"median {_us(median)} (slowest {_us(ordered[-1])})")
    return None


def _wide(ordered: Sequence[float]) -> str | None:
    q25, median, q75 = statistics.quantiles(ordered, n=4, method="inclusive")
    if median > 0 and q75 - q25 > IQR_SHARE * median:
        return (f"wide: the interquartile range {_us(q25)}..{_us(q75)} is "
                f"{100 * (q75 - q25) / median:.0f}% of the median {_us(median)}")
    return None


def _step(samples: Sequence[float]) -> str | None:
    third = len(samples) // 3
    if median_ci_ranks(third) is None:
        return None
    first, last = sorted(samples[:third]), sorted(samples[-third:])
    low, high = median_ci_ranks(third)
    a, b = _median(first), _median(last)
    apart = abs(b - a) > STEP_REL * min(a, b)
    disjoint = first[high - 1] < last[low - 1] or last[high - 1] < first[low - 1]
    if apart and disjoint:
        return (f"step: the first third's median {_us(a)}, the last third's {_us(b)} "
                f"({100 * (b / a - 1):+.0f}%)")
    return None


def mixed_reason(samples: Sequence[float], ordered: Sequence[float] | None = None
                 ) -> str | None:
    """Why one median cannot describe ``samples`` (seconds, in time order), or None.

    ``ordered``: the same samples sorted, when the caller keeps them so (the stop rule does).
    """
    if len(samples) < MIN_JUDGED:
        return None
    ordered = sorted(samples) if ordered is None else ordered
    return (_clusters(ordered) or _median_over_q25(ordered) or _tail(ordered)
            or _wide(ordered) or _step(samples))


def far_fewer_calls(calls_per_sample: int, quiet_calls: int) -> str | None:
    """A sample of ``calls_per_sample`` calls where the fastest quarter of the samples asks
    for ``quiet_calls`` (``runner.timing.timer.choose_calls_per_sample``): the warm-up ran
    slow (a burst of other work), so each sample is one or a few calls and every burst lands
    whole in a sample. Far fewer: under a quarter, and at most :data:`FEW_CALLS` (a tiny op
    batched by the thousand reads a few times slower one call at a time, the clock's own
    cost: that K is merely smaller than ideal, not at the mercy of each burst)."""
    if calls_per_sample <= FEW_CALLS and quiet_calls > 4 * calls_per_sample:
        return (f"calls_per_sample {calls_per_sample}, where the fastest quarter needs "
                f"{quiet_calls}: the warm-up ran slow")
    return None


#: A re-measured median this many times the first block's q25 is still the load.
SLOWER_THAN_BEFORE = 3.0


def slower_than_before(median_s: float, earlier_q25_s: float | None) -> str | None:
    """A fresh block whose samples are all slow (a burst that outlasted the re-measure) has
    no shape to tell; the first block's fastest quarter does: noise only ever adds time, so
    the op can run that fast, and a median far above it is the load."""
    if earlier_q25_s and earlier_q25_s > 0 and median_s > SLOWER_THAN_BEFORE * earlier_q25_s:
        return (f"median {_us(median_s)} is {median_s / earlier_q25_s:.3g}x the first "
                f"block's q25 {_us(earlier_q25_s)}: the load outlasted the re-measure")
    return None


#: Involuntary context switches per second of sampling above which other processes took
#: the CPU from the timed process (quiet: a few a second; two CPU hogs beside other work on
#: two cores: about 100, every 20 ms call of a 0.2 ms matmul cut twice).
PREEMPTED_PER_S = 30.0


def busy_host(preempted_per_s: float | None) -> str | None:
    """Other processes competing for the CPU slow every call alike (each is cut into time
    slices), so the samples can be tight and still 100x the op's time: no shape shows it,
    but the kernel's count of involuntary context switches does."""
    if preempted_per_s is not None and preempted_per_s > PREEMPTED_PER_S:
        return (f"busy host: the OS preempted the timing process {preempted_per_s:.0f} times "
                f"a second while sampling (above {PREEMPTED_PER_S:.0f}): other processes "
                "took its CPU")
    return None


def involuntary_switches() -> int | None:
    """This process's involuntary context switches so far (all threads); None where the
    platform does not count them."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
