"""Statistics derived from raw timing samples.

Samples are never dropped or trimmed: outliers stay in the data and show up as a wide
confidence interval and the ``noisy`` flag. Too few samples show up the same way: the
median's interval is exact (binomial ranks), and with fewer than 6 samples it is unbounded.
The median is the headline number because timing noise on a GPU host is one-sided
(preemption, clock changes, other tenants only ever make a sample slower), which drags the
mean but hardly moves the median.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

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


#: Above this many samples the median's CI ranks come from the normal approximation.
EXACT_CI_MAX_N = 1000


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int] | None:
    """1-based order-statistic ranks bounding the median's confidence interval, or None
    when no two samples can.

    Exact and distribution-free (Conover's *Practical Nonparametric Statistics*): the number
    of samples below the true median is B ~ Binomial(n, 1/2), so ``[x_(l), x_(n+1-l)]`` covers
    it with probability ``1 - 2·P(B <= l - 1)``; ``l`` is the largest rank whose coverage is
    still at least ``level``. No assumption that timing samples are normal, which they never
    are. Below 6 samples even the whole range covers less than 95% (at n = 5, 1 - 2/32 =
    94%): then there is no finite interval, and :func:`summarize` says so with ``[0, inf)``
    rather than a confident zero or near-zero width. The binomial CDF is summed exactly in
    integers (the values of ``scipy.stats.binom.cdf``; the timer must not import scipy).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n > EXACT_CI_MAX_N:
        # 2**n overflows a float past n = 1023, and the exact sum costs O(n) big integers per
        # new n while the adaptive stop asks after every sample. Here the normal approximation
        # to the binomial is within a rank of the exact one.
        half_width = NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(n) / 2
        low = max(1, math.floor(n / 2 - half_width))
        return low, n + 1 - low
    limit = (1 - level) / 2 * 2 ** n  # P(B <= k) <= tail, in counts of the 2^n outcomes
    low, term, below = 0, 1, 0
    for k in range(n):  # term = C(n, k), below = C(n, 0) + ... + C(n, k)
        below += term
        if below > limit:
            break
        low = k + 1
        term = term * (n - k) // (k + 1)
    if low < 1:
        return None
    return low, n + 1 - low


def median_ci_rel_halfwidth(ordered: Sequence[float]) -> float:
    """``SampleStats.ci_rel_halfwidth`` from already-sorted samples: the adaptive stop checks
    it after every sample, so it must not re-sort (the ranks are cached per n)."""
    n = len(ordered)
    ranks = median_ci_ranks(n)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    if median <= 0 or ranks is None:
        return math.inf
    low, high = ranks
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
    ranks = median_ci_ranks(n)
    ci_low, ci_high = (0.0, math.inf) if ranks is None else (ordered[ranks[0] - 1],
                                                              ordered[ranks[1] - 1])
    return SampleStats(
        n=n,
        median=statistics.median(ordered),
        mean=statistics.fmean(ordered),
        std=statistics.stdev(ordered) if n > 1 else 0.0,
        min=ordered[0],
        max=ordered[-1],
        q25=q25,
        q75=q75,
        ci_low=ci_low,
        ci_high=ci_high,
    )
