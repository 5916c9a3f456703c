"""The settings a trial runs with: the timer's (``timer.*``) and the passes after its samples
(``profile``, ``energy``), declared once here and merged into the run's schema
(:class:`runner.config.schema.RunConfig`).

Apart from :mod:`runner.config.schema` because the process that runs trials needs these and
nothing of Hydra or OmegaConf: importing them there cost a worker ~0.3 s before its first trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from runner.config.settings import Constraint, setting
from runner.timing.measurement import TimerPlan


@dataclass
class TimerSettings:
    """How the shared timer measures (see ``runner/timing/timer.py`` for the why of each knob).

    The defaults are :class:`runner.timing.timer.TimerPlan`'s, the frozen copy the timer runs
    with. Presets live in ``conf/timer/*.yaml``: smoke, quick, default, precise, sustained.
    Each field declares its rule (:func:`runner.config.settings.setting`); rules between fields are
    ``CONSTRAINTS``.
    """

    # A preset file's name; the command line's check holds it against the timer presets of
    # every config folder in play (runner.config.overrides), which only it knows.
    preset: str = setting("default", "the preset's name, recorded in every row")
    # Warm-up runs until BOTH limits are met: caches, cuBLAS handles, autotuning and lazy
    # module loading all happen in the first calls and must stay out of the samples.
    warmup_calls: int = setting(TimerPlan.warmup_calls, "calls before sampling", minimum=0)
    warmup_s: float = setting(TimerPlan.warmup_s, "seconds of warm-up before sampling",
                              minimum=0)
    # Adaptive stop: after min_samples, stop once the 95% CI of the median is within
    # target_rel of the median; never exceed max_samples or max_time_s.
    min_samples: int = setting(TimerPlan.min_samples, "samples before the stop rule applies",
                               minimum=1)
    max_samples: int = setting(TimerPlan.max_samples, "most samples per trial", minimum=1)
    target_rel: float = setting(TimerPlan.target_rel,
                                "stop when the median's 95% CI is within this fraction",
                                above=0)
    max_time_s: float = setting(TimerPlan.max_time_s, "most seconds of sampling per trial",
                                above=0)
    # Ops shorter than batch_below_us are timed as calls_per_sample back-to-back calls per
    # event pair, so a sample lasts about batch_target_us and the launch edge of the first
    # call (~5-10 us) is ~1% of it (runner/timing/timer.py, hazard 3).
    batch_below_us: float = setting(TimerPlan.batch_below_us,
                                    "ops shorter than this are batched", minimum=0)
    batch_target_us: float = setting(TimerPlan.batch_target_us,
                                     "a batched sample lasts about this long", minimum=0)
    max_calls_per_sample: int = setting(TimerPlan.max_calls_per_sample,
                                        "most calls in one batched sample", minimum=1)
    # Warm-up continues past warmup_s until the samples are settled (no trend in the time per
    # call, the SM clock no longer falling), for at most settle_max_s (runner/timing/settle.py).
    # warmup_s=0 turns settling off (the smoke preset).
    settle_max_s: float = setting(TimerPlan.settle_max_s,
                                  "most seconds a warm-up may run to settle", above=0)
    # Flush L2 before every sample (outside the timed region) to measure cold-cache time;
    # forces one call per sample.
    flush_l2: bool = setting(False, "flush L2 before every sample (cold cache)")
    # cuda only: "event" times with CUDA events; "host" with perf_counter around a sync.
    clock: str = setting("event", "cuda: event (CUDA events) or host (perf_counter + sync)",
                         choices=("event", "host"))
    # cuda only: also take the device time (gpu_time_* columns; runner/timing/device_time.py).
    # false: the loop time only.
    device_time: bool = setting(True, "cuda: also take the device time (gpu_time_* columns)")
    # cuda only: also take the burst time (gpu_burst_time_* columns): gapped samples at the
    # boost clock, before the loop time heats the GPU; not what a sustained job sees.
    burst: bool = setting(False, "cuda: also take the burst (boost-clock) device time")
    # cuda, warm L2: an op that moves bytes more than it computes and fits in L2 reads the
    # same lines call after call, and where the allocator put them moves its time between
    # processes; it is timed on this many allocations of its inputs
    # (runner/execution/allocations.py). 1: its own only.
    allocations: int = setting(4, "cuda, warm L2: time an L2-resident memory-bound op on "
                                  "this many allocations of its inputs", minimum=1)

    CONSTRAINTS: ClassVar[tuple[Constraint, ...]] = (
        Constraint(("min_samples", "max_samples"), lambda low, high: low <= high,
                   "invalid timer settings: {prefix}min_samples ({min_samples}) must not exceed "
                   "{prefix}max_samples ({max_samples}). Raise max_samples or lower "
                   "min_samples."),
        Constraint(("batch_below_us", "batch_target_us"), lambda below, target: below <= target,
                   "contradictory timer settings: '{prefix}batch_below_us' ({batch_below_us}) > "
                   "'{prefix}batch_target_us' ({batch_target_us}): ops are batched only up to "
                   "a sample of batch_target_us. Raise batch_target_us or lower "
                   "batch_below_us."),
        Constraint(("flush_l2", "clock"), lambda flush, clock: not (flush is True
                                                                     and clock == "host"),
                   "contradictory timer settings: '{prefix}flush_l2'=true with "
                   "'{prefix}clock'=host: the host clock cannot exclude the flush from a "
                   "sample. Use clock=event with flush_l2."),
    )


@dataclass
class InsightSettings:
    """The passes a trial may run after its timed samples (``runner.execution.insight``).
    Their command-line keys stay flat (``profile=true energy_window_s=10``): these fields are
    declared here once and :class:`RunConfig` inherits them."""

    # After timing, outside the samples (runner.execution.insight). Both off: no cost.
    profile: bool = setting(False, "a torch.profiler pass per trial after timing: trace file + "
                                   "kernel columns")
    profile_calls: int = setting(10, "calls in the profiled pass", minimum=1)
    energy: bool = setting(False, "CUDA: energy per call from NVML's counter over a "
                                  "back-to-back window after timing")
    energy_window_s: float = setting(5.0, "seconds of the energy window (the counter steps "
                                          "every ~100 ms: 5 s ~ 2%)", above=0)
    energy_idle_s: float = setting(1.0, "seconds of idle baseline before the energy window "
                                        "(0: none)", minimum=0)
