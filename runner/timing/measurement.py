"""What goes into one measurement and what comes out of it: :class:`TimerPlan` (the knobs)
and :class:`Measurement` (the raw samples and how they were taken; statistics are derived)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from runner.timing.spread import busy_host, far_fewer_calls, mixed_reason, slower_than_before
from runner.timing.stats import SampleStats, summarize


@dataclass(frozen=True)
class TimerPlan:
    """The knobs of one measurement (a frozen copy of ``TimerSettings``)."""

    warmup_calls: int = 10
    warmup_s: float = 0.05
    min_samples: int = 10
    max_samples: int = 1000
    target_rel: float = 0.01
    max_time_s: float = 2.0
    batch_below_us: float = 1000.0
    batch_target_us: float = 1000.0
    max_calls_per_sample: int = 10000
    settle_max_s: float = 5.0

    @classmethod
    def from_settings(cls, settings: Any) -> TimerPlan:
        names = cls.__dataclass_fields__
        return cls(**{name: getattr(settings, name) for name in names})

    def __post_init__(self) -> None:
        for name in ("min_samples", "max_samples", "max_calls_per_sample"):
            if getattr(self, name) < 1:
                raise ValueError(f"timer.{name} must be >= 1, got {getattr(self, name)}")
        if self.min_samples > self.max_samples:
            raise ValueError(f"timer.min_samples ({self.min_samples}) must not exceed "
                             f"timer.max_samples ({self.max_samples})")
        if self.target_rel <= 0 or self.max_time_s <= 0:
            raise ValueError("timer.target_rel and timer.max_time_s must be positive")


@dataclass(frozen=True)
class Measurement:
    """Raw samples of one trial and how they were taken. Statistics are derived, never stored.

    ``samples_s`` holds seconds *per call*: each sample's elapsed time divided by
    ``calls_per_sample``.
    """

    samples_s: tuple[float, ...]
    calls_per_sample: int
    warmup_calls: int
    warmup_s: float
    stop_reason: str
    target_rel: float
    #: whether the warm-up settled (``runner.timing.settle``) or hit ``settle_max_s``
    settled: bool | None = None
    settle_reason: str | None = None
    #: SM clock at the end of the warm-up and during the samples (MHz; empty: not read)
    settled_clock_mhz: float | None = None
    clock_mhz: tuple[float, ...] = ()
    #: the preset's min_samples: fewer samples than this is noisy (:attr:`noisy_reason`)
    min_samples: int = 1
    #: whether the warm-up found the op power-capped (``runner.timing.settle.capped``)
    power_capped: bool | None = None
    #: calls per sample the fastest quarter of the samples asks for (None: not judged)
    quiet_calls: int | None = None
    #: why a first block of samples was set aside and these re-measured (None: it was not),
    #: and that block's q25 (s per call: the op can run that fast)
    remeasured: str | None = None
    first_block_q25_s: float | None = None
    #: wall seconds of that first block: in ``warmup_s`` (it warmed the op), but sampling,
    #: not settling (``runner.execution.measured.cost_columns``)
    set_aside_s: float = 0.0
    #: involuntary context switches per second of the samples (None: not read)
    preempted_per_s: float | None = None
    #: how many of ``samples_s`` (the first) are the settled half of the warm-up
    #: (``runner.timing.sampler.settled_tail``: a capped op's clock cycles near once a second)
    settled_samples: int = 0
    #: the board's averaged power over its limit across those settled samples (None: not
    #: read): well under the limit, a capped op's controller still had headroom to give
    power_avg_share: float | None = None
    #: whether the samples ran back to back, the GPU never idle between them (the device
    #: time's stream, ``runner.timing.back_to_back``): see :attr:`statistic`
    back_to_back: bool = False

    @cached_property
    def stats(self) -> SampleStats:
        return summarize(self.samples_s)

    @property
    def statistic(self) -> str:
        """Which statistic of the samples :attr:`time_s` is: ``"median"``, or ``"mean"`` for
        a power-capped series sampled back to back.

        Why: the median is the right number for noise, which on a GPU host only ever makes a
        sample slower (``runner.timing.stats``). A power-capped op's spread is not noise: the
        controller holds the board's *averaged* power at its limit by cycling the clock, with
        a period near a second, and a job running the op back to back pays the average time
        per call that the limit sets. The median of such a series is the phase of the cycle
        the samples dwelt in longest. On three H200s, 152 capped rows of the timing gates
        against 15 s back to back of each op: the mean within 2.11% of it in every row, the
        median up to 4.19% fast (docs/timing.md#the-median-of-a-cycling-clock)."""
        return "mean" if self.back_to_back and self.power_capped else "median"

    @property
    def time_s(self) -> float:
        """The measurement's number, seconds per call: the median of the samples, or their
        mean where :attr:`statistic` says so."""
        return self.stats.mean if self.statistic == "mean" else self.stats.median

    @property
    def noisy(self) -> bool:
        """True when the median is not to be trusted: fewer samples than the preset's
        ``min_samples`` (a call slower than ``max_time_s``), a series one median cannot
        describe (``runner.timing.spread``), or a CI that never got within
        ``target_rel``. Report, don't trust; :attr:`noisy_reason` says which."""
        return self.noisy_reason is not None

    @property
    def noisy_reason(self) -> str | None:
        """Fewer samples than ``min_samples``; a series one median cannot describe
        (``runner.timing.spread``: clusters, a slow tail, a step, or far fewer calls per
        sample than the op needs); or a CI wider than ``target_rel``. The first that holds;
        after a re-measure, with what the first block showed."""
        n = len(self.samples_s)
        if n < self.min_samples:
            return (f"{n} sample{'s' if n != 1 else ''} < min_samples {self.min_samples} "
                    f"(stopped: {self.stop_reason})")
        reason = (mixed_reason(self.samples_s, None)
                  or busy_host(self.preempted_per_s)
                  or slower_than_before(self.stats.median, self.first_block_q25_s)
                  or (far_fewer_calls(self.calls_per_sample, self.quiet_calls)
                      if self.quiet_calls else None))
        wide = self.stats.ci_rel_halfwidth
        if reason is None and wide > self.target_rel:
            reason = f"CI ±{_pct(wide)} > target_rel ±{_pct(self.target_rel)}"
        if reason and self.remeasured:
            reason += f"; re-measured once, the first block showed {self.remeasured}"
        return reason


def _pct(fraction: float) -> str:
    return "inf" if math.isinf(fraction) else f"{100 * fraction:.3g}%"

