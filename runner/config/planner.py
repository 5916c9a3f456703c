"""The trial planner: a composed job config → the op plans and frozen trial specs to run.

The one place where trial axis values are checked (each by its rule in the axis registry,
:func:`runner.core.axes.Axis.check`; the op parameters by the op's signature) and expanded
into :class:`~runner.config.trials.TrialSpec` s: the pre-flight (``runner.config.preflight``)
plans every job before the first trial runs, so a bad value raises :class:`ConfigError` naming
the key, the value and the choices, with exit status 2, before anything is on disk.

The expansion rule (documented in docs/usage.md):

* ``shape``: a flat list of ints is ONE shape; a list of lists is one trial per shape.
* every other axis (``runner.core.axes.AXES``) and every op parameter: a scalar is one
  value, a list is one trial per element.
* the trials of a job are the cartesian product of all axes, in registry order, then the op
  parameters in YAML order; the last varies fastest. With ``cases``, each case is one such
  product, the cases concatenated.

Hydra multirun (``-m``, ``hydra.sweeper.params``) makes *jobs* on top of this; each job
expands its own trials.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.config.ops import CONF_DIR, OpPlan, group_options, no_trials, plan_op
from runner.config.schema import RunConfig
from runner.config.settings import check_settings
from runner.config.sweep_size import check_trials
from runner.config.trials import TrialSpec, as_choices, shape_choices
from runner.core.axes import AXES_BY_NAME, AXIS_NAMES
from runner.core.errors import ConfigError, bad_value


def check_shape(value: Any, op: str, shape_names: list[str] | None) -> tuple[int, ...]:
    rank_text = (f"{len(shape_names)} ({', '.join(shape_names)})" if shape_names
                 else "any rank >= 1")
    example = "[" + ",".join(["512"] * (len(shape_names) if shape_names else 2)) + "]"
    if (not isinstance(value, tuple) or not value
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in value)):
        raise ConfigError(f"invalid value for 'shape': {_show(value)}. Op '{op}' takes a list "
                          f"of integers of rank {rank_text}, e.g. shape={example}; several "
                          f"shapes are a list of lists, e.g. shape=[{example},{example}].")
    if shape_names and len(value) != len(shape_names):
        raise ConfigError(f"invalid value for 'shape': {_show(value)} has rank {len(value)}, "
                          f"but op '{op}' takes rank {rank_text}, e.g. shape={example}.")
    if any(s < 1 for s in value):
        raise ConfigError(f"invalid value for 'shape': {_show(value)}. Every size must be a "
                          f"positive integer, e.g. shape={example}.")
    return value


def _show(value: Any) -> str:
    return str(list(value)) if isinstance(value, tuple) else repr(value)


SMOKE_MAX_DIM = 16


def _shape_axis(raw: Any, plan: OpPlan, smoke: bool = False) -> list[tuple[int, ...]]:
    if raw is None:
        if plan.default_shape is None:
            raise ConfigError(f"'shape' is not set and op '{plan.name}' has no default_shape. "
                              "Pass shape=[...].")
        shapes = [plan.default_shape]
    elif raw == []:
        raise no_trials("shape")
    elif not isinstance(raw, list):
        raise ConfigError(f"invalid value for 'shape': {raw!r}. Expected a list of integers "
                          "such as shape=[512,512,512].")
    else:
        shapes = shape_choices(raw)
    checked = [check_shape(s, plan.name, plan.shape_names) for s in shapes]
    if smoke:
        checked = [tuple(min(d, SMOKE_MAX_DIM) for d in s) for s in checked]
    return list(dict.fromkeys(checked))


@dataclass(frozen=True)
class PlannedTrial:
    """One trial and the op that builds it (ops may differ between trials through ``cases``).

    ``index`` is the trial's position in the job's whole plan, before sharding: the shards of
    one job together hold every index once (the ``trial_index`` column).
    """

    op: OpPlan
    spec: TrialSpec
    index: int = 0


#: Plans made by the command line's check (``runner.config.preflight``), by the job's
#: overrides: the job that Hydra then launches in this process takes its plan from here
#: instead of planning again (a 5000-trial job took ~1 s to plan).
_PLANNED: dict[tuple[str, ...], list[PlannedTrial]] = {}


def remember(overrides: list[str], planned: list[PlannedTrial]) -> None:
    """Keep the plan of the job with these overrides for :func:`recall`."""
    _PLANNED[_task_key(overrides)] = planned


def recall(overrides: list[str]) -> list[PlannedTrial] | None:
    """The plan :func:`remember` kept for these overrides (once), or ``None``."""
    return _PLANNED.pop(_task_key(overrides), None)


def _task_key(overrides: list[str]) -> tuple[str, ...]:
    """The overrides that reach the job's config (Hydra's own, ``hydra.*``, do not)."""
    return tuple(text for text in overrides
                 if not text.lstrip("+~").startswith(("hydra.", "hydra/")))


def plan_job(cfg: DictConfig, conf_dir: Path = CONF_DIR, *,
             devices_here: bool = True) -> list[PlannedTrial]:
    """Validate a composed job config and expand it into trials.

    Without ``cases`` the job is one cartesian product. With ``cases`` (a list of partial
    configs) each case is expanded on its own, on top of the job's values, and the trials are
    concatenated in case order: ``cases`` zips heterogeneous settings (different ops, shapes,
    params), where lists multiply. ``devices_here=False``: the job runs on another machine (a
    SLURM or Ray launcher), which resolves ``device`` against its own GPUs; every other value
    is checked here.
    """
    values = OmegaConf.to_container(cfg, resolve=True)
    check_settings(values, RunConfig)  # every setting's declared rule (runner.config.settings)
    shard, num_shards = check_shard(values.get("shard", 0), values.get("num_shards", 1))
    cases = values.get("cases")
    if cases is None:
        grids = [_case_grid(values, {}, "", conf_dir, devices_here)]
    elif not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ConfigError(f"invalid value for 'cases': {cases!r}. Expected a list of mappings, "
                          "e.g. cases=[{op: matmul, dtype: bf16}, {op: copy}].")
    elif not cases:
        raise no_trials("cases")
    else:
        grids = [_case_grid(values, case, f"cases[{index}].", conf_dir, devices_here)
                 for index, case in enumerate(cases)]
    # counted before anything is expanded: a 10^7-trial job is refused in milliseconds
    count = sum(math.prod(len(v) for v in (*axes.values(), *params.values()))
                for _, axes, params in grids)
    check_trials(-(-count // num_shards), values.get("max_trials"), values.get("timer"))
    planned = [PlannedTrial(plan, spec) for plan, axes, params in grids
               for spec in expand(axes, params, op=plan.name, target=plan.target)]
    from runner.config.expect import check_job

    check_job(values, planned)  # the claims, against the planned ops' parameters
    numbered = [dataclasses.replace(trial, index=index) for index, trial in enumerate(planned)]
    # Round-robin, not contiguous blocks: neighbouring trials (one op's sizes) cost alike, so
    # every shard gets a similar mix of slow and fast ones.
    return numbered[shard::num_shards]


def check_shard(shard: Any, num_shards: Any) -> tuple[int, int]:
    """``shard=i num_shards=n``: this job runs the trials whose index is ``i`` modulo ``n``
    (the rules are the two settings' own, declared in ``RunConfig``)."""
    check_settings({"shard": shard, "num_shards": num_shards}, RunConfig)
    return shard, num_shards


#: One case's op, the checked choices of each axis, and those of each op parameter.
Grid = tuple[OpPlan, dict[str, list[Any]], dict[str, list[Any]]]


def _case_grid(values: dict[str, Any], case: dict[str, Any], where: str, conf_dir: Path,
               devices_here: bool = True) -> Grid:
    """One case's op and the checked choices of each axis and op parameter (not expanded)."""
    op_node = dict(values.get("op") or {})
    if "op" in case:
        options = group_options("op", conf_dir)
        if case["op"] not in options:
            raise bad_value(f"{where}op", case["op"], options)
        op_node = OmegaConf.to_container(OmegaConf.load(conf_dir / "op" / f"{case['op']}.yaml"))
    case_params = {k: v for k, v in case.items() if k != "op" and k not in AXIS_NAMES}
    plan, _ = plan_op(op_node)
    for key in case_params:
        if key not in plan.params:
            valid = sorted(set(AXIS_NAMES) | set(plan.params) | {"op"})
            raise bad_value(f"{where}{key}", key, valid,
                            f"'{key}' is neither an axis nor a parameter of op '{plan.name}'.")
    plan, param_choices = plan_op({**op_node, **case_params})
    axes: dict[str, list[Any]] = {}
    for key in AXIS_NAMES:
        try:
            axes[key] = axis_choices(key, case.get(key, values[key]), plan,
                                     smoke=bool(values.get("smoke")), devices_here=devices_here)
        except ConfigError as exc:
            raise ConfigError(f"{where}{exc}" if where else str(exc)) from None
    return plan, axes, param_choices


def axis_choices(key: str, raw: Any, plan: Any, *, smoke: bool = False,
                 devices_here: bool = True) -> list[Any]:
    """The checked, distinct choices of axis ``key`` given ``raw`` (a value or a list);
    ``plan``: the op, which only ``shape`` reads (its rank)."""
    if key == "shape":
        choices = _shape_axis(raw, plan, smoke=smoke)
    elif key == "device" and not devices_here:  # resolved where the job runs
        choices = list(dict.fromkeys(str(v) for v in as_choices(raw)))
    else:
        choices = list(dict.fromkeys(AXES_BY_NAME[key].check(v) for v in as_choices(raw)))
    if not choices:
        raise no_trials(key)
    return choices


def expand(axes: Mapping[str, list[Any]], params: Mapping[str, list[Any]], *,
           op: str, target: str) -> list[TrialSpec]:
    """Cartesian product of already-checked axis choices and op-parameter choices."""
    axis_names = list(AXIS_NAMES)
    param_names = list(params)
    grids = [axes[name] for name in axis_names] + [params[name] for name in param_names]
    specs = []
    for combo in itertools.product(*grids):
        axis_values = dict(zip(axis_names, combo[: len(axis_names)]))
        param_values = tuple(sorted(zip(param_names, combo[len(axis_names):])))
        specs.append(TrialSpec(op=op, target=target, params=param_values, **axis_values))
    return specs
