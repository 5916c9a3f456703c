"""The typed schema behind the YAML: dataclasses registered in Hydra's ConfigStore.

Hydra merges ``conf/config.yaml`` onto :class:`RunConfig`, so an unknown top-level key or a
timer setting of the wrong type is rejected by OmegaConf before anything runs.

Axis fields are typed ``Any`` on purpose: every axis may be a scalar *or a list* (a list
expands into one trial per element, see ``runner.config.trials``), and OmegaConf has no union types.
Their values are checked against the closed enums below by ``runner.config.validate``, which names
the key, the bad value and the valid choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore

from runner.timing.timer import TimerPlan


class DType(str, Enum):
    """Numeric formats a trial can run in.

    ``tf32`` is float32 storage with TensorFloat-32 matmul/conv precision
    (``torch.set_float32_matmul_precision("high")``); ``fp32`` pins the precision to
    ``"highest"`` so that fp32 numbers never silently use tensor cores.
    """

    fp64 = "fp64"
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"


class GraphMode(str, Enum):
    """How the op's callable is launched: eagerly, replayed from a captured CUDA graph, or via
    ``torch.cuda.make_graphed_callables`` (which also graphs the backward pass)."""

    none = "none"
    cuda_graph = "cuda_graph"
    graphed_callable = "graphed_callable"


class CompileMode(str, Enum):
    """``torch.compile`` mode; ``none`` runs eagerly."""

    none = "none"
    default = "default"
    reduce_overhead = "reduce-overhead"
    max_autotune = "max-autotune"
    max_autotune_no_cudagraphs = "max-autotune-no-cudagraphs"


class Status(str, Enum):
    """Outcome of one trial. Every trial ends as a row with one of these."""

    ok = "ok"
    error = "error"
    skipped = "skipped"
    oom = "oom"
    #: the worker process died (signal, exit) or its CUDA context was poisoned
    crashed = "crashed"
    #: no result within trial_timeout_s; the worker was killed
    timeout = "timeout"


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


@dataclass
class RunConfig:
    """Top-level config. Each axis below accepts a value or a list of values."""

    op: Any = None
    timer: TimerSettings = field(default_factory=TimerSettings)
    experiment: Any = None

    dtype: Any = "fp32"
    # null → the op's default_shape. A flat list of ints is ONE shape; a list of lists is
    # one trial per shape.
    shape: Any = None
    device: Any = "auto"
    seed: Any = 0
    num_threads: Any = None

    streams: Any = 1
    graph: Any = "none"
    compile: Any = "none"
    compile_dynamic: Any = None
    fullgraph: Any = False
    backward: Any = False

    # Optional list of partial configs (op, axes, op params); each is expanded on its own and
    # the trials concatenated. Lists multiply, cases zip. See README "Sweeps".
    cases: Any = None

    # CI mode: every shape dimension clamped to 16 and the smoke timer, whatever the experiment
    # says. Numbers are meaningless; it proves a config runs end to end.
    smoke: bool = False

    # Seconds of sustained bf16 matmul on each CUDA device before a job's first trial, so that
    # repeated runs start from the same power/thermal state (runner.timing.timer.heat_device).
    # 0: off.
    gpu_warmup_s: float = 0.0

    # Set by the calibrate experiment: store this device's ceilings from the sweep's results
    # under <results_dir>/calibration/ when it ends (runner.analysis.roofline.store_calibration).
    store_calibration: bool = False

    check_accuracy: bool = True
    # process: trials run in a supervised worker process (a crash or hang is a row, the sweep
    # goes on); none: in this process, for debuggers (runner.execution.worker)
    isolation: str = "process"
    # seconds one trial may take (build, compile, timing) before it is a `timeout` row and its
    # worker is replaced; null or 0: no limit. Needs isolation=process.
    trial_timeout_s: Any = 600.0
    results_dir: str = "results"
    sweep_id: str = "${now:%Y-%m-%d_%H-%M-%S.%f}"
    notes: str = ""


#: Config keys that are trial axes (expanded from lists), in expansion order.
AXES: tuple[str, ...] = (
    "shape", "dtype", "device", "seed", "num_threads",
    "streams", "graph", "compile", "compile_dynamic", "fullgraph", "backward",
)

#: Keys of an op's YAML node that describe the op rather than parametrise it.
OP_META_KEYS: frozenset[str] = frozenset(
    {"_target_", "name", "shape_names", "default_shape", "description"})


def register() -> None:
    """Register the schema so ``conf/config.yaml`` can list ``base_config`` in its defaults."""
    ConfigStore.instance().store(name="base_config", node=RunConfig)
