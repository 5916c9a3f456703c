"""Statistics derived from raw timing samples.

Samples are never dropped or trimmed: outliers stay in the data and show up as a wide
confidence interval and the ``noisy`` flag. The median is the headline number because
timing noise on a GPU host is one-sided (preemption, clock changes, other tenants only ever
make a sample slower), which drags the mean but hardly moves the median.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: z for a two-sided 95% interval.
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class SampleStats:
    """Summary of one trial's samples, all in the samples' unit."""

    n: int
    median: float
    mean: float
    std: float
    min: float
    max: float
    q25: float
    q75: float
    ci_low: float
    ci_high: float

    @property
    def ci_rel_halfwidth(self) -> float:
        """Half the width of the median's 95% CI relative to the median."""
        if self.median <= 0:
            return math.inf
        return (self.ci_high - self.ci_low) / (2 * self.median)


def median_ci_ranks(n: int, z: float = Z_95) -> tuple[int, int]:
    """1-based order-statistic ranks bounding the median's confidence interval.

    Distribution-free (the normal approximation to the binomial, as in Conover's *Practical
    Nonparametric Statistics*): the true median lies between the order statistics of ranks
    ``n/2 - z·√n/2`` and ``1 + n/2 + z·√n/2`` with ≈95% probability. No assumption that timing
    samples are normal, which they never are. With fewer than ~6 samples the interval is the
    whole range.
    """
    half_width = z * math.sqrt(n) / 2
    low = max(1, math.floor(n / 2 - half_width))
    high = min(n, math.ceil(1 + n / 2 + half_width))
    return low, high


def median_ci_rel_halfwidth(ordered: Sequence[float]) -> float:
    """``SampleStats.ci_rel_halfwidth`` from already-sorted samples, in O(1): the adaptive
    stop checks it after every sample, so it must not re-sort."""
    n = len(ordered)
    low, high = median_ci_ranks(n)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    if median <= 0:
        return math.inf
    return (ordered[high - 1] - ordered[low - 1]) / (2 * median)


def summarize(samples: Sequence[float]) -> SampleStats:
    """Derive every statistic from the raw samples. Quartiles use linear interpolation
    (``numpy.percentile``'s default), so pandas gives the same numbers."""
    if not samples:
        raise ValueError("cannot summarise zero samples; the timer always takes at least one")
    ordered = sorted(samples)
    n = len(ordered)
    if n == 1:
        q25 = q75 = ordered[0]
    else:
        q25, _, q75 = statistics.quantiles(ordered, n=4, method="inclusive")
    low, high = median_ci_ranks(n)
    return SampleStats(
        n=n,
        median=statistics.median(ordered),
        mean=statistics.fmean(ordered),
        std=statistics.stdev(ordered) if n > 1 else 0.0,
        min=ordered[0],
        max=ordered[-1],
        q25=q25,
        q75=q75,
        ci_low=ordered[low - 1],
        ci_high=ordered[high - 1],
    )
