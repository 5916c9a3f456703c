"""Statistics for comparing two timings of the same trial: speedup, its CI, a test, a verdict.

Why these choices:

* **Speedup** is ``median(BASE) / median(NEW)`` (> 1 means NEW is faster). Medians, because
  timing noise is one-sided (interrupts, clock changes only ever add time).
* **95% CI** of the speedup by a percentile bootstrap of the ratio of medians, resampling
  each run's raw samples independently. It makes no normality assumption and works for
  any sample count >= 3. The generator is seeded, so the same inputs give the same CI.
* **p-value**: two-sided Mann-Whitney U on the raw samples (scipy), as Google Benchmark's
  ``compare.py --utest`` does: is one run's distribution shifted against the other?
* **Verdict** (``faster``/``slower``/``same``): a tiny but consistent shift is significant
  with enough samples, and two runs of the same sweep drift by a few percent (clocks,
  temperature, neighbours). So a change is called only when it is *significant and large*:
  ``p < alpha`` **and** the CI excludes 1 **and** ``|speedup - 1|`` (in log terms) is at least
  ``max(threshold, noise)``, where ``noise`` is the larger robust relative spread
  (IQR / 1.349 / median) of the two runs, the nvbench idea of "within the noise is same".
  In ratio terms: ``speedup >= 1 + m`` (faster) or ``speedup <= 1 / (1 + m)`` (slower), with
  ``m = max(threshold, noise)``; :func:`rule_text` prints exactly this under every output.
* **noisy**: a side whose samples one median cannot describe (``runner.timing.spread``:
  clusters, a slow tail, a step; judged from the raw samples, so older files too) cannot
  be judged at all, and a side its run flagged ``noisy`` cannot make a change: either way
  the pair is ``noisy``, never ``slower``. On a busy host a burst of other work makes one
  run 100x slower for a while; that is the host, not a regression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from runner.analysis.values import finite_positive
from runner.timing.spread import mixed_reason

#: Fewest raw samples per side for the bootstrap and the U test.
MIN_SAMPLES = 3
#: Bootstrap replicates per pair (percentile CI); also used for the geomean CI.
N_BOOT = 1000
#: Cap on random draws held at once while bootstrapping (bounds memory on huge sample sets).
_MAX_DRAWS = 4_000_000


@dataclass(frozen=True)
class PairStats:
    """The comparison of one trial's BASE and NEW timings."""

    speedup: float
    ci_low: float
    ci_high: float
    p_value: float | None
    noise: float
    verdict: str
    #: log(speedup) bootstrap replicates (length N_BOOT), for aggregate CIs.
    log_replicates: np.ndarray
    #: why the pair is ``noisy`` (None when it is not)
    noisy_reason: str | None = None


def robust_noise(samples: np.ndarray) -> float:
    """Relative spread of samples: IQR / 1.349 / median (≈ std/mean for normal data)."""
    if len(samples) < 2:
        return 0.0
    q25, med, q75 = np.quantile(samples, [0.25, 0.5, 0.75])
    return float((q75 - q25) / 1.349 / med) if med > 0 else 0.0


def bootstrap_log_ratio(base: np.ndarray, new: np.ndarray, n_boot: int = N_BOOT,
                        seed: int = 0) -> np.ndarray:
    """Bootstrap replicates of ``log(median(base) / median(new))``."""
    rng = np.random.default_rng(seed)
    return np.log(_boot_medians(base, n_boot, rng)) - np.log(_boot_medians(new, n_boot, rng))


def _boot_medians(samples: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``n_boot`` resamples (with replacement) of ``samples``.

    With the samples sorted, a resample's order statistics are the samples at its sorted
    *indices*, so sorting small integer rows replaces gathering and partitioning floats
    (about 5x faster, the same numbers).
    """
    ordered = np.sort(samples)
    n = len(ordered)
    lo, hi = (n - 1) // 2, n // 2
    chunk = max(1, min(n_boot, _MAX_DRAWS // max(n, 1)))
    out = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = np.sort(rng.integers(0, n, size=(stop - start, n), dtype=np.int32), axis=1)
        out[start:stop] = 0.5 * (ordered[idx[:, lo]] + ordered[idx[:, hi]])
    return out


def mann_whitney_p(base: np.ndarray, new: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 when the samples cannot differ (all tied)."""
    try:
        p = stats.mannwhitneyu(base, new, alternative="two-sided").pvalue
    except ValueError:
        return 1.0
    return 1.0 if p is None or math.isnan(p) else float(p)


def verdict(speedup: float, ci_low: float, ci_high: float, p_value: float | None,
            noise: float, *, alpha: float, threshold: float) -> str:
    """``faster``/``slower``/``same`` by the rule in the module docstring.

    ``threshold`` is a fraction (0.03 = 3%). Without a p-value (too few samples), the CI
    alone stands for significance.
    """
    if not (speedup > 0 and math.isfinite(speedup)):
        return "same"
    bound = 1.0 + max(threshold, noise)  # the m of rule_text: ratio bounds 1+m and 1/(1+m)
    significant = (p_value is None or p_value < alpha) and (ci_low > 1.0 or ci_high < 1.0)
    if significant and abs(math.log(speedup)) >= math.log(bound):
        return "faster" if speedup > 1 else "slower"
    return "same"


def rule_text(alpha: float, threshold: float) -> str:
    """The rule :func:`verdict` and :func:`compare_samples` apply, in words, for the footer
    of every comparison (a test evaluates this text against :func:`verdict`)."""
    return (f"verdict: faster needs speedup >= 1+m, slower needs speedup <= 1/(1+m), "
            f"m = max({threshold * 100:g}%, noise), each with p < {alpha:g} and a 95% CI "
            f"excluding 1; noisy: either side's samples one median cannot describe, or a "
            f"side flagged noisy that would make a change (never 'slower'; a regression gate reads "
            f"its fastest samples)")


def flag_or_reason(flag: object, reason: object) -> object:
    """A run's ``noisy`` flag, or its ``noisy_reason`` when it is flagged and has one: what
    :attr:`PairSide.noisy` holds."""
    flagged = isinstance(flag, (bool, np.bool_)) and bool(flag)
    return reason if flagged and isinstance(reason, str) and reason else flagged


def side_noise(samples: np.ndarray, flagged: object, side: str) -> tuple[str | None, bool]:
    """``(reason, mixed)`` for one side: the shape of its raw samples in µs (``mixed``: the
    pair cannot be judged at all), else its run's ``noisy`` flag (the pair cannot make a
    change). ``mixed_reason`` reads seconds, as the timer keeps them, and writes µs."""
    mixed = mixed_reason((samples * 1e-6).tolist()) if len(samples) else None
    if mixed:
        return f"{side}: {mixed}", True
    if isinstance(flagged, str) and flagged:
        return f"{side}: {flagged}", False
    if isinstance(flagged, (bool, np.bool_)) and flagged:
        return f"{side}: flagged noisy", False
    return None, False


@dataclass(frozen=True)
class PairSide:
    """One side (BASE or NEW) of a pair: a trial's timing in one run.

    The same fields describe both sides, so one object per side keeps a pair's two timings
    from being mixed up in a long list of ``base_*``/``new_*`` arguments.
    """

    #: raw samples in µs (None, or fewer than ``MIN_SAMPLES``: the summaries decide)
    samples: np.ndarray | None
    median: float
    #: the run's own CI of its median (low, high), for a pair without enough samples
    ci: tuple[float, float] | None = None
    #: the run's ``noisy`` flag, or its reason (``noisy_reason``): see :func:`flag_or_reason`
    noisy: object = None


@dataclass(frozen=True)
class StatsSettings:
    """How a pair is tested: the verdict rule's ``alpha`` and ``threshold`` (a fraction,
    0.03 = 3%) and the bootstrap's replicates and seed, as one argument (a comparison gives
    each pair its own seed, ``CompareOptions.stats``)."""

    alpha: float = 0.05
    threshold: float = 0.03
    n_boot: int = N_BOOT
    seed: int = 0


def compare_samples(base: PairSide, new: PairSide,
                    settings: StatsSettings = StatsSettings()) -> PairStats:
    """Compare one trial's BASE and NEW timings (raw samples in µs, or only summaries).

    With at least ``MIN_SAMPLES`` raw samples each: bootstrap CI and U test. Otherwise the
    CI is bounded by the runs' own median CIs (:attr:`PairSide.ci`), which is conservative,
    and there is no p-value. :attr:`PairSide.noisy` of each side feeds the ``noisy`` verdict.
    """
    base_samples = _clean(base.samples)
    new_samples = _clean(new.samples)
    n_boot = settings.n_boot
    if len(base_samples) >= MIN_SAMPLES and len(new_samples) >= MIN_SAMPLES:
        speedup = float(np.median(base_samples) / np.median(new_samples))
        reps = bootstrap_log_ratio(base_samples, new_samples, n_boot=n_boot, seed=settings.seed)
        lo, hi = np.exp(np.quantile(reps, [0.025, 0.975]))
        p = mann_whitney_p(base_samples, new_samples)
        noise = max(robust_noise(base_samples), robust_noise(new_samples))
    else:
        speedup = base.median / new.median if new.median and new.median > 0 else float("nan")
        lo, hi = _ci_from_summaries(base, new)
        p = None
        noise = 0.0
        reps = np.full(n_boot, math.log(speedup) if speedup > 0 else float("nan"))
    lo, hi = min(lo, speedup), max(hi, speedup)
    label = verdict(speedup, lo, hi, p, noise, alpha=settings.alpha, threshold=settings.threshold)
    why_base, mixed_base = side_noise(base_samples, base.noisy, "BASE")
    why_new, mixed_new = side_noise(new_samples, new.noisy, "NEW")
    why = "; ".join(w for w in (why_base, why_new) if w) or None
    if why and (mixed_base or mixed_new or label != "same"):
        label = "noisy"
    else:
        why = None
    return PairStats(speedup, float(lo), float(hi), p, noise, label, reps, why)


def fastest(samples: np.ndarray | None) -> float:
    """The fastest valid sample (NaN without any): what load cannot slow down, since load
    only ever adds time (``runner.analysis.compare_gate``)."""
    clean = _clean(samples)
    return float(clean.min()) if len(clean) else float("nan")


def _clean(samples: np.ndarray | None) -> np.ndarray:
    if samples is None:
        return np.empty(0)
    arr = np.asarray(samples, dtype=float).ravel()
    return arr[np.isfinite(arr) & (arr > 0)]


def _ci_from_summaries(base: PairSide, new: PairSide) -> tuple[float, float]:
    speedup = base.median / new.median if new.median else float("nan")
    base_ci, new_ci = base.ci, new.ci
    if not base_ci or not new_ci or not all(finite_positive(v) for v in (*base_ci, *new_ci)):
        return speedup, speedup
    return base_ci[0] / new_ci[1], base_ci[1] / new_ci[0]


def geomean_ci(log_speedups: np.ndarray, log_replicates: np.ndarray | None
               ) -> tuple[float, float, float]:
    """Geometric-mean speedup and its 95% CI from per-pair bootstrap replicates.

    ``log_replicates`` has one row per pair; replicate ``j`` of the geomean is the mean over
    pairs of their ``j``-th replicates (pairs resampled independently, as measured).
    """
    if len(log_speedups) == 0:
        return float("nan"), float("nan"), float("nan")
    g = float(np.exp(np.mean(log_speedups)))
    if log_replicates is None or len(log_replicates) == 0:
        return g, g, g
    means = np.nanmean(log_replicates, axis=0)
    lo, hi = np.exp(np.nanquantile(means, [0.025, 0.975]))
    return g, float(min(lo, g)), float(max(hi, g))
