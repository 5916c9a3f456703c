"""The typed schema behind the YAML: dataclasses registered in Hydra's ConfigStore.

Hydra merges ``conf/config.yaml`` onto :class:`RunConfig`, so an unknown top-level key or a
setting of the wrong type is rejected by OmegaConf before anything runs.

The trial axes are not written here: their fields come from the axis registry
(:mod:`runner.core.axes`), which declares each axis once. They are typed ``Any`` because an
axis takes a value *or a list of values*, a union OmegaConf 2.3 cannot express; the registry's
checks enforce the element type before any trial runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hydra.core.config_store import ConfigStore

from runner.claims.spec import Claim, Pivot
from runner.config import help
from runner.config.guards import MAX_NAME_BYTES
from runner.config.ops import CONF_DIR
from runner.config.settings import Constraint, setting
from runner.core.axes import AXES, INT64_MAX
from runner.core.errors import ConfigError
from runner.timing.timer import TimerPlan

#: The axes' fields, derived from the registry: every axis defaults to its declared default.
AxisFields = dataclasses.make_dataclass(
    "AxisFields",
    [(axis.name, Any, field(default=axis.default)) for axis in AXES],
    namespace={"__doc__": "Trial axes (runner.core.axes): a value, or a list of values."},
)


def _workers(key: str, value: Any) -> None:
    if value == "per_gpu" or (isinstance(value, int) and not isinstance(value, bool)
                              and 1 <= value <= INT64_MAX):
        return
    raise ConfigError(f"invalid value for '{key}': {value!r}. Expected an integer >= 1 or "
                      "per_gpu (one worker per visible GPU), e.g. workers=2 or workers=per_gpu.")


def _sweep_id(key: str, value: Any) -> None:
    text = str(value)
    if not text or "/" in text or text in (".", "..") or text.startswith("."):
        raise ConfigError(f"invalid value for '{key}': {value!r}. Expected a folder name (no "
                          "'/', not starting with '.'), e.g. sweep_id=baseline-1.")
    if len(text.encode()) > MAX_NAME_BYTES:
        raise ConfigError(f"invalid value for '{key}': {text[:40]!r}... is {len(text.encode())} "
                          f"bytes long; a folder name may have at most {MAX_NAME_BYTES}. Choose a "
                          "shorter sweep_id.")


SHARDS_EXAMPLE = "-m shard='range(4)' num_shards=4"


@dataclass
class TimerSettings:
    """How the shared timer measures (see ``runner/timing/timer.py`` for the why of each knob).

    The defaults are :class:`runner.timing.timer.TimerPlan`'s, the frozen copy the timer runs with.
    Presets live in ``conf/timer/*.yaml``: smoke, quick, default, precise. Each field declares
    its rule (:func:`runner.config.settings.setting`); rules between fields are
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
    # false: loop time only, as before device time existed.
    device_time: bool = setting(True, "cuda: also take the device time (gpu_time_* columns)")
    # cuda only: also take the burst time (gpu_burst_time_* columns): gapped samples at the
    # boost clock, before the loop time heats the GPU; not what a sustained job sees.
    burst: bool = setting(False, "cuda: also take the burst (boost-clock) device time")

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


@dataclass
class RunConfig(InsightSettings, AxisFields):
    """Top-level config: the trial axes (inherited from the registry), the insight settings
    (inherited from :class:`InsightSettings`) and job settings."""

    op: Any = None
    timer: TimerSettings = field(default_factory=TimerSettings)
    experiment: Any = None

    cases: Any = field(default=None, metadata={"doc": (
        "list of partial configs {op: ..., axis: ...}, each expanded on its own (zip, not "
        "product)")})
    # CI mode: numbers are meaningless; it proves a config runs end to end.
    smoke: bool = setting(False, "clamp every shape dim to 16 and use the smoke timer (CI)")
    # So repeated runs start from the same power/thermal state (runner.timing.heat.heat_device).
    gpu_warmup_s: float = setting(0.0, "seconds of sustained bf16 matmul per CUDA device before "
                                       "the first trial", minimum=0)
    store_calibration: bool = setting(False, "store this device's ceilings under "
                                             "<results_dir>/calibration/ (calibrate experiment)")
    # Scale-out: one big job's trials split over several Hydra jobs (docs/scale-out.md).
    shard: int = setting(0, "run only trials i, i+n, i+2n, ... of the job (i = shard, "
                            "n = num_shards)", minimum=0, example=SHARDS_EXAMPLE)
    num_shards: int = setting(1, "split the job's trials into this many shards: "
                                 "-m shard='range(n)' num_shards=n", minimum=1,
                              example=SHARDS_EXAMPLE)
    # What the experiment asks, in words: typed, checked before any trial
    # (runner.config.expect), rendered by the experiments report (runner.claims.report).
    title: str = setting("", "the experiment's one-line title")
    question: str = setting("", "the question the experiment asks")
    expected: str = setting("", "what the source tutorial measured or claimed, and what to "
                                "expect on this hardware")
    why: str = setting("", "the mechanism: why the answer should be so")
    source: str = setting("", "the tutorial (by title) and lesson the question comes from")
    # What the experiment claims (runner.claims.spec), judged on its results by the report,
    # `check=true` and `python -m runner.check`; pivots are its informational tables.
    expect: list[Claim] = field(default_factory=list, metadata={"doc": (
        "claims the results are judged by (docs/claims.md); set in experiments")})
    pivots: list[Pivot] = field(default_factory=list, metadata={"doc": (
        "informational tables for the experiments report")})
    check: bool = setting(False, "judge `expect` when the sweep ends; exit 1 if a claim did "
                                 "not hold, 3 if none could be judged (a CI gate; "
                                 "docs/claims.md)")
    # Crash isolation (runner.execution.worker): a trial that kills, poisons or hangs its
    # worker becomes a `crashed` / `timeout` row and a fresh worker runs the next one.
    isolation: str = setting("process", "process: trials run in a supervised worker process | "
                                        "none: in this process (debuggers)",
                             choices=("process", "none"))
    # In-job scale-out (runner.execution.pool): N supervised workers, one per GPU.
    workers: Any = setting(1, "worker processes running this job's trials at once, one per "
                              "GPU: an int >= 1 or per_gpu (docs/scale-out.md)", check=_workers)
    trial_timeout_s: Any = setting(600.0, "seconds a trial may take before it becomes a "
                                          "`timeout` row (0 or null: no limit)",
                                   kind=float, minimum=0, nullable=True,
                                   meaning="0 or null: no limit")
    check_accuracy: bool = setting(True, "compare one call against a float64 reference "
                                         "before timing")
    results_dir: str = field(default="results", metadata={"doc": "where sweeps are written"})
    sweep_id: str = setting("${now:%Y-%m-%d_%H-%M-%S.%f}", "the sweep's folder name under "
                                                          "results_dir", check=_sweep_id)
    max_trials: int = setting(100_000, "most trials a sweep (all its jobs together) may plan; "
                                       "past it the sweep exits 2 before it starts, with its "
                                       "size and the override that allows it", minimum=1)
    # One writer per sweep (runner.storage.lock): run, resume and collect lock its folder.
    lock_wait_s: float = setting(0.0, "seconds to wait while another process writes the same "
                                      "sweep (0: exit 2 at once)", minimum=0)
    notes: str = field(default="", metadata={"doc": "free text stored with the results"})

    CONSTRAINTS: ClassVar[tuple[Constraint, ...]] = (
        Constraint(("shard", "num_shards"), lambda shard, num_shards: shard < num_shards,
                   lambda prefix, shard, num_shards, **_: (
                       f"invalid value for '{prefix}shard': {shard}. With num_shards="
                       f"{num_shards} it must be in 0..{num_shards - 1}; e.g. -m "
                       f"shard='range({num_shards})' num_shards={num_shards}.")),
    )


def register() -> None:
    """Register the schema so ``conf/config.yaml`` can list ``base_config`` in its defaults, and
    opsweep's ``--help`` (``hydra/help=opsweep``)."""
    ConfigStore.instance().store(name="base_config", node=RunConfig)
    help.register(CONF_DIR, RunConfig)
