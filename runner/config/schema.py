"""The typed schema behind the YAML: dataclasses registered in Hydra's ConfigStore.

The settings a trial runs with (:class:`TimerSettings`, :class:`InsightSettings`) live in
:mod:`runner.config.trial_settings`, which imports neither Hydra nor OmegaConf: the process
that runs trials imports them and no more.

Hydra merges ``conf/config.yaml`` onto :class:`RunConfig`, so an unknown top-level key or a
setting of the wrong type is rejected by OmegaConf before anything runs.

The trial axes are not written here: their fields come from the axis registry
(:mod:`runner.core.axes`), which declares each axis once. They are typed ``Any`` because an
axis takes a value *or a list of values*, a union OmegaConf 2.3 cannot express; the registry's
checks enforce the element type before any trial runs.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any, ClassVar

from runner.claims.spec import Claim, Pivot
from runner.config import help
from runner.config.guards import MAX_NAME_BYTES, config_yaml
from runner.config.ops import CONF_DIR
from runner.config.settings import Constraint, setting
from runner.config.trial_settings import InsightSettings, TimerSettings
from runner.core.axes import AXES, INT64_MAX
from runner.core.errors import ConfigError

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
    if "\0" in text:
        raise ConfigError(f"invalid value for '{key}': {value!r} holds a NUL byte (\\0), which "
                          "no folder name can hold. Remove it, e.g. sweep_id=baseline-1.")
    if len(text.encode()) > MAX_NAME_BYTES:
        raise ConfigError(f"invalid value for '{key}': {text[:40]!r}... is {len(text.encode())} "
                          f"bytes long; a folder name may have at most {MAX_NAME_BYTES}. Choose a "
                          "shorter sweep_id.")


SHARDS_EXAMPLE = "-m shard='range(4)' num_shards=4"


def _objective(key: str, value: Any) -> None:
    """A numeric result column (runner.storage.columns), or null: what a search minimises."""
    if value is None:
        return
    from runner.storage.column_types import numeric_columns

    columns = numeric_columns()
    if value not in columns:
        close = difflib.get_close_matches(str(value), columns, n=1)
        raise ConfigError(f"invalid value for '{key}': {value!r}. Expected a numeric result "
                          "column, e.g. objective=time_median_us (the loop time) or "
                          "objective=gpu_time_us (the device time; CUDA only)"
                          + (f". Did you mean '{close[0]}'?" if close else "."))


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
    # What one worker's trial leaves the device in is where the next starts
    # (runner.execution.order).
    trial_order: str = setting("heat", "heat: one worker runs the power-capped trials "
                                       "first, those that differ only in shape together and "
                                       "largest first, so each after the first starts hot, "
                                       "then the light ones longest first | plan: in plan "
                                       "order (rows are stored in plan order either way)",
                               choices=("heat", "plan"))
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
    # Search instead of a grid (hydra/sweeper=optuna, docs/scale-out.md): the sweeper
    # minimises what each job returns (runner.execution.objective).
    objective: Any = setting(None, "the result column a search sweeper (hydra/sweeper=optuna) "
                                   "minimises: each job returns its value, the geometric mean "
                                   "over the job's trials", kind=str, nullable=True,
                             check=_objective)

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
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RunConfig)
    help.register(CONF_DIR, RunConfig)


def recorded_yaml(cfg: Any, node: str, replaced: dict[str, Any]) -> str:
    """``cfg`` as YAML, resolved, with ``replaced`` merged into its ``node``: the config of
    ``OmegaConf.to_yaml(OmegaConf.merge(cfg, {node: replaced}), resolve=True)``, without
    copying the whole config to merge one node (0.5 s for a 5000-shape job), and written by
    libyaml (``runner.config.guards.config_yaml``)."""
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    merged = OmegaConf.merge(cfg[node], replaced)
    container[node] = OmegaConf.to_container(merged, resolve=True, enum_to_str=True)
    return config_yaml(container)
