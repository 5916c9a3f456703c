"""The typed schema behind the YAML: dataclasses registered in Hydra's ConfigStore.

Hydra merges ``conf/config.yaml`` onto :class:`RunConfig`, so an unknown top-level key or a
setting of the wrong type is rejected by OmegaConf before anything runs.

The trial axes are not written here: their fields come from the axis registry
(:mod:`runner.config.axes`), which declares each axis once. They are typed ``Any`` because an
axis takes a value *or a list of values*, a union OmegaConf 2.3 cannot express; the registry's
checks enforce the element type before any trial runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from runner.claims.spec import Claim, Pivot
from runner.config.axes import AXES
from runner.timing.timer import TimerPlan

#: The axes' fields, derived from the registry: every axis defaults to its declared default.
AxisFields = dataclasses.make_dataclass(
    "AxisFields",
    [(axis.name, Any, field(default=axis.default)) for axis in AXES],
    namespace={"__doc__": "Trial axes (runner.config.axes): a value, or a list of values."},
)


@dataclass
class TimerSettings:
    """How the shared timer measures (see ``runner/timer.py`` for the why of each knob).

    The defaults are :class:`runner.timing.timer.TimerPlan`'s, the frozen copy the timer runs with.
    Presets live in ``conf/timer/*.yaml``: smoke, quick, default, precise.
    """

    preset: str = "default"
    # Warm-up runs until BOTH limits are met: caches, cuBLAS handles, autotuning and lazy
    # module loading all happen in the first calls and must stay out of the samples.
    warmup_calls: int = TimerPlan.warmup_calls
    warmup_s: float = TimerPlan.warmup_s
    # Adaptive stop: after min_samples, stop once the 95% CI of the median is within
    # target_rel of the median; never exceed max_samples or max_time_s.
    min_samples: int = TimerPlan.min_samples
    max_samples: int = TimerPlan.max_samples
    target_rel: float = TimerPlan.target_rel
    max_time_s: float = TimerPlan.max_time_s
    # Ops shorter than batch_below_us are timed as calls_per_sample back-to-back calls per
    # event pair, so a sample lasts about batch_target_us and the launch edge of the first
    # call (~5-10 us) is ~1% of it (runner/timer.py, hazard 3).
    batch_below_us: float = TimerPlan.batch_below_us
    batch_target_us: float = TimerPlan.batch_target_us
    max_calls_per_sample: int = TimerPlan.max_calls_per_sample
    # Flush L2 before every sample (outside the timed region) to measure cold-cache time;
    # forces one call per sample.
    flush_l2: bool = False
    # cuda only: "event" times with CUDA events; "host" with perf_counter around a sync.
    clock: str = "event"
    # cuda only: also take the device time (gpu_time_* columns; runner/timing/device_time.py).
    # false: loop time only, as before device time existed.
    device_time: bool = True


@dataclass
class RunConfig(AxisFields):
    """Top-level config: the trial axes (inherited from the registry) and job settings."""

    op: Any = None
    timer: TimerSettings = field(default_factory=TimerSettings)
    experiment: Any = None

    cases: Any = field(default=None, metadata={"doc": (
        "list of partial configs {op: ..., axis: ...}, each expanded on its own (zip, not "
        "product)")})
    # CI mode: numbers are meaningless; it proves a config runs end to end.
    smoke: bool = field(default=False, metadata={"doc": (
        "clamp every shape dim to 16 and use the smoke timer (CI)")})
    # So repeated runs start from the same power/thermal state (runner.timing.timer.heat_device).
    gpu_warmup_s: float = field(default=0.0, metadata={"doc": (
        "seconds of sustained bf16 matmul per CUDA device before the first trial")})
    store_calibration: bool = field(default=False, metadata={"doc": (
        "store this device's ceilings under <results_dir>/calibration/ (calibrate experiment)")})
    # Scale-out: one big job's trials split over several Hydra jobs (docs/scale-out.md).
    shard: int = field(default=0, metadata={"doc": (
        "run only trials i, i+n, i+2n, ... of the job (i = shard, n = num_shards)")})
    num_shards: int = field(default=1, metadata={"doc": (
        "split the job's trials into this many shards: -m shard='range(n)' num_shards=n")})
    # What the experiment claims (runner.claims.spec), judged on its results by the report,
    # `check=true` and `python -m runner.check`; pivots are its informational tables.
    expect: list[Claim] = field(default_factory=list, metadata={"doc": (
        "claims the results are judged by (docs/claims.md); set in experiments")})
    pivots: list[Pivot] = field(default_factory=list, metadata={"doc": (
        "informational tables for the experiments report")})
    check: bool = field(default=False, metadata={"doc": (
        "judge `expect` when the sweep ends; exit 1 if a claim did not hold (a CI gate)")})
    # After timing, outside the samples (runner.execution.insight). Both off: no cost.
    profile: bool = field(default=False, metadata={"doc": (
        "a torch.profiler pass per trial after timing: trace file + kernel columns")})
    profile_calls: int = field(default=10, metadata={"doc": "calls in the profiled pass"})
    energy: bool = field(default=False, metadata={"doc": (
        "CUDA: energy per call from NVML's counter over a back-to-back window after timing")})
    energy_window_s: float = field(default=5.0, metadata={"doc": (
        "seconds of the energy window (the counter steps every ~100 ms: 5 s ~ 2%)")})
    energy_idle_s: float = field(default=1.0, metadata={"doc": (
        "seconds of idle baseline before the energy window (0: none)")})
    # Crash isolation (runner.execution.worker): a trial that kills, poisons or hangs its
    # worker becomes a `crashed` / `timeout` row and a fresh worker runs the next one.
    isolation: str = field(default="process", metadata={"doc": (
        "process: trials run in a supervised worker process | none: in this process "
        "(debuggers)")})
    # In-job scale-out (runner.execution.pool): N supervised workers, one per GPU.
    workers: Any = field(default=1, metadata={"doc": (
        "worker processes running this job's trials at once, one per GPU: an int >= 1 or "
        "per_gpu (docs/scale-out.md)")})
    trial_timeout_s: Any = field(default=600.0, metadata={"doc": (
        "seconds a trial may take before it becomes a `timeout` row (0 or null: no limit)")})
    check_accuracy: bool = field(default=True, metadata={"doc": (
        "compare one call against a float64 reference before timing")})
    results_dir: str = field(default="results", metadata={"doc": "where sweeps are written"})
    sweep_id: str = field(default="${now:%Y-%m-%d_%H-%M-%S.%f}", metadata={"doc": (
        "the sweep's folder name under results_dir")})
    # One writer per sweep (runner.storage.lock): run, resume and collect lock its folder.
    lock_wait_s: float = field(default=0.0, metadata={"doc": (
        "seconds to wait while another process writes the same sweep (0: exit 2 at once)")})
    notes: str = field(default="", metadata={"doc": "free text stored with the results"})



#: Keys of an op's YAML node that describe the op rather than parametrise it.
OP_META_KEYS: frozenset[str] = frozenset(
    {"_target_", "name", "shape_names", "default_shape", "description"})


def register() -> None:
    """Register the schema so ``conf/config.yaml`` can list ``base_config`` in its defaults, and
    opsweep's ``--help`` (``hydra/help=opsweep``)."""
    from runner.config import help
    from runner.config.ops import CONF_DIR

    ConfigStore.instance().store(name="base_config", node=RunConfig)
    help.register(CONF_DIR)
