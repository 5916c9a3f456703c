"""``runner.timing.stats``: the median's distribution-free CI and the summary of raw samples."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest

from runner.timing.stats import (
    Z_95,
    SampleStats,
    median_ci_ranks,
    median_ci_rel_halfwidth,
    summarize,
)


@pytest.mark.parametrize(("n", "ranks"), [
    # half = z·√n/2;  low = max(1, floor(n/2 - half));  high = min(n, ceil(1 + n/2 + half))
    (1, (1, 1)),      # half 0.98: floor(-0.48) -> 1, ceil(2.48) = 3 -> capped at 1
    (5, (1, 5)),      # half 2.19: floor(0.31) = 0 -> 1, ceil(5.69) = 6 -> 5
    (10, (1, 10)),    # half 3.10: floor(1.90) = 1, ceil(9.10) = 10
    (14, (3, 12)),    # half 3.67: floor(3.33) = 3, ceil(11.67) = 12
    (100, (40, 61)),  # half 9.80: floor(40.20) = 40, ceil(60.80) = 61 (Conover's table)
])
def test_median_ci_ranks(n: int, ranks: tuple[int, int]) -> None:
    assert median_ci_ranks(n) == ranks


def test_median_ci_ranks_bracket_the_median_and_stay_in_range() -> None:
    for n in range(1, 400):
        low, high = median_ci_ranks(n)
        assert 1 <= low <= high <= n
        assert low <= (n + 1) / 2 <= high
        if n >= 20:  # the interval narrows as 1/√n: about ±z·√n/2 ranks around the middle
            assert high - low == pytest.approx(Z_95 * math.sqrt(n) + 1, abs=2)


def test_z_is_the_two_sided_95_percent_quantile() -> None:
    assert statistics.NormalDist().inv_cdf(0.975) == pytest.approx(Z_95, rel=1e-12)


def test_median_ci_ranks_reach_95_percent_coverage() -> None:
    # P(x_(low) <= true median <= x_(high)) = P(low <= B <= high - 1), B ~ Binomial(n, 1/2).
    for n in (20, 50, 100, 500):
        low, high = median_ci_ranks(n)
        coverage = sum(math.comb(n, k) for k in range(low, high)) / 2**n
        assert 0.95 <= coverage <= 0.99, (n, coverage)


@pytest.mark.parametrize("n", [2, 3, 4, 7, 10, 37, 100, 101])
def test_summarize_matches_statistics_and_numpy(n: int) -> None:
    rng = random.Random(n)
    samples = [rng.lognormvariate(0, 0.5) for _ in range(n)]
    s = summarize(samples)
    ordered = sorted(samples)
    low, high = median_ci_ranks(n)
    assert s.n == n
    assert s.median == pytest.approx(statistics.median(samples), rel=1e-15)
    assert s.median == pytest.approx(float(np.median(samples)), rel=1e-15)
    assert s.mean == pytest.approx(float(np.mean(samples)), rel=1e-12)
    assert s.std == pytest.approx(float(np.std(samples, ddof=1)), rel=1e-12)
    assert s.min == min(samples) and s.max == max(samples)
    assert s.q25 == pytest.approx(float(np.percentile(samples, 25)), rel=1e-12)
    assert s.q75 == pytest.approx(float(np.percentile(samples, 75)), rel=1e-12)
    assert s.ci_low == ordered[low - 1] and s.ci_high == ordered[high - 1]
    assert s.ci_low <= s.median <= s.ci_high


def test_summarize_ignores_input_order_and_keeps_outliers() -> None:
    samples = [5.0, 1.0, 1000.0, 2.0, 3.0, 4.0]
    s = summarize(samples)
    assert s == summarize(sorted(samples))
    assert s.max == 1000.0  # never trimmed
    assert s.median == 3.5  # the outlier barely moves the median...
    assert s.mean == pytest.approx(1015 / 6)  # ...but drags the mean


def test_summarize_one_sample() -> None:
    s = summarize([2.5])
    assert s == SampleStats(n=1, median=2.5, mean=2.5, std=0.0, min=2.5, max=2.5, q25=2.5,
                            q75=2.5, ci_low=2.5, ci_high=2.5)
    assert s.ci_rel_halfwidth == 0.0


def test_summarize_refuses_zero_samples() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_ci_rel_halfwidth() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])  # n=5: CI is the whole range [1, 5]
    assert s.ci_rel_halfwidth == pytest.approx((5 - 1) / (2 * 3))
    assert summarize([0.0, 0.0, 0.0]).ci_rel_halfwidth == math.inf
    assert summarize([-1.0, 2.0, -3.0]).ci_rel_halfwidth == math.inf  # median <= 0


@pytest.mark.parametrize("n", list(range(1, 30)) + [64, 99, 100, 250])
def test_median_ci_rel_halfwidth_equals_summarize(n: int) -> None:
    rng = random.Random(1000 + n)
    samples = [rng.uniform(0.5, 2.0) for _ in range(n)]
    assert median_ci_rel_halfwidth(sorted(samples)) == pytest.approx(
        summarize(samples).ci_rel_halfwidth, rel=1e-15, abs=0)


def test_median_ci_rel_halfwidth_of_nonpositive_median_is_inf() -> None:
    assert median_ci_rel_halfwidth([0.0, 0.0, 1.0]) == math.inf
    assert median_ci_rel_halfwidth([-2.0, -1.0, 0.0, 5.0]) == math.inf
