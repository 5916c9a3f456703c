"""What a comparison can be asked: :class:`CompareOptions`, the times and metrics it judges.

Why a module of its own: ``runner.compare``'s command line and every Python caller of
:func:`~runner.analysis.compare_engine.compare` speak this vocabulary. One frozen object
carries it, so that a call names only what it changes
(``compare(base, new, CompareOptions(time="gpu"))``), and :meth:`CompareOptions.check`
refuses a bad option with the same message wherever it came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runner.analysis.significance import N_BOOT, StatsSettings

#: ``--time`` choices: auto (device time where both rows have it, else loop), gpu, loop.
TIME_CHOICES = ("auto", "gpu", "loop")
#: ``--metric`` choices → the column each reads (``time`` reads the times, by ``--time``).
#: All are lower-is-better; each needs the run setting named in the "not compared" reason.
METRICS = {"time": None, "energy_per_call_mJ": "energy_per_call_mJ",
           "energy_above_idle_per_call_mJ": "energy_above_idle_per_call_mJ",
           "avg_power_W": "avg_power_W", "kernel_time_sum_us": "kernel_time_sum_us",
           "kernel_count": "kernel_count"}
#: The run setting that records each metric (named when a trial lacks it).
METRIC_SETTING = {"kernel_time_sum_us": "profile=true", "kernel_count": "profile=true"}


@dataclass(frozen=True)
class CompareOptions:
    """How :func:`~runner.analysis.compare_engine.compare` joins and judges two result sets.

    filters
        ``axis=value[,value]`` strings applied to both sides (``op=matmul``, ``impl=cublas``).
    ignore
        Axes left out of the join (e.g. ``device_requested`` to compare cpu with cuda, or a
        ``param_*`` that only one side has).
    alpha, threshold
        Significance level and minimum effect (fraction) of the verdict rule.
    time
        ``auto``: the device time (``gpu_time_*``) where both rows have one, else the loop
        time; ``gpu``: the device time only (pairs without it are not compared); ``loop``:
        the loop time, host cost included (what eager code pays), for every pair.
    n_boot
        Bootstrap replicates per pair (the 95% CIs).
    metric
        ``time`` (default, by the ``time`` rule) or a per-trial scalar of :data:`METRICS`,
        e.g. ``energy_per_call_mJ``; it ignores ``time`` (``compare_engine`` says why).
    """

    filters: Iterable[str] = ()
    ignore: Iterable[str] = ()
    alpha: float = 0.05
    threshold: float = 0.03
    time: str = "auto"
    n_boot: int = N_BOOT
    metric: str = "time"

    def __post_init__(self) -> None:
        # tuples: the options stay unchanged and reusable (a generator would be spent once)
        object.__setattr__(self, "filters", tuple(self.filters))
        object.__setattr__(self, "ignore", tuple(self.ignore))

    def check(self) -> None:
        """A ValueError naming the bad option and what it accepts."""
        if self.metric not in METRICS:
            raise ValueError(f"metric {self.metric!r} is not one of {', '.join(METRICS)}")
        if self.time not in TIME_CHOICES:
            raise ValueError(f"time={self.time!r} is not one of {', '.join(TIME_CHOICES)}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha={self.alpha} must be between 0 and 1 (e.g. 0.05)")
        if self.threshold < 0:
            raise ValueError(f"threshold={self.threshold} must be >= 0 (a fraction, e.g. 0.03 "
                             "for 3%)")

    def stats(self, seed: int) -> StatsSettings:
        """The test settings of one pair, whose bootstrap draws from ``seed`` (each pair its
        own, so that pairs are resampled independently)."""
        return StatsSettings(alpha=self.alpha, threshold=self.threshold, n_boot=self.n_boot,
                             seed=seed)
