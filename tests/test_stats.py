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
    # exact: the largest l with P(B <= l - 1) <= 2.5%, B ~ Binomial(n, 1/2); high = n + 1 - l
    (1, None),        # even [x_(1), x_(n)] covers only 0%: no finite interval
    (5, None),        # 1 - 2/32 = 93.75% < 95%
    (6, (1, 6)),      # 1 - 2/64 = 96.9%
    (10, (2, 9)),     # P(B <= 1) = 11/1024 = 1.1%; P(B <= 2) = 5.5% > 2.5%
    (14, (3, 12)),
    (100, (40, 61)),  # Conover's table
])
def test_median_ci_ranks(n: int, ranks: tuple[int, int] | None) -> None:
    assert median_ci_ranks(n) == ranks


def test_median_ci_ranks_are_scipys_exact_binomial_ranks() -> None:
    from scipy.stats import binom

    for n in range(1, 300):
        ranks = median_ci_ranks(n)
        if ranks is None:  # no pair of samples reaches 95%
            assert 1 - 2 * binom.cdf(0, n, 0.5) < 0.95, n
            continue
        low, high = ranks
        assert low == int(binom.ppf(0.025, n, 0.5)) or binom.cdf(low - 1, n, 0.5) <= 0.025
        coverage = binom.cdf(high - 1, n, 0.5) - binom.cdf(low - 1, n, 0.5)
        assert coverage >= 0.95, (n, coverage)
        narrower = binom.cdf(high - 2, n, 0.5) - binom.cdf(low, n, 0.5)
        assert narrower < 0.95, n  # and it is the narrowest symmetric one that does


def test_median_ci_ranks_bracket_the_median_and_stay_in_range() -> None:
    for n in range(6, 400):
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


@pytest.mark.parametrize("n", [6, 7, 10, 37, 100, 101])
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


def test_summarize_one_sample_has_an_unbounded_ci_not_a_zero_one() -> None:
    s = summarize([2.5])
    assert s == SampleStats(n=1, median=2.5, mean=2.5, std=0.0, min=2.5, max=2.5, q25=2.5,
                            q75=2.5, ci_low=0.0, ci_high=math.inf)
    assert s.ci_rel_halfwidth == math.inf
    for n in range(2, 6):  # a few identical samples are no more certain
        assert summarize([2.5] * n).ci_rel_halfwidth == math.inf


def test_summarize_refuses_zero_samples() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_ci_rel_halfwidth() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])  # n=6: CI is the whole range [1, 6]
    assert s.ci_rel_halfwidth == pytest.approx((6 - 1) / (2 * 3.5))
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


def test_many_samples_get_a_finite_ci_without_overflow():
    """Thousands of samples (a small op's adaptive stop) must not overflow 2**n as a float."""
    stats = summarize([1.0 + (i % 7) * 1e-3 for i in range(5000)])
    assert 1.0 <= stats.ci_low <= stats.median <= stats.ci_high < 1.01
    low, high = median_ci_ranks(5000)
    assert 2400 < low < 2500 and high == 5001 - low
