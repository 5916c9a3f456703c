"""Ops: resolving an op's builder and checking its parameters against its signature.

An op is ``conf/op/<name>.yaml`` whose ``_target_`` names a builder ``build(ctx, **params)``;
the builder's keyword parameters are the op's parameters, and their annotations (``int``,
``bool``, ``Literal[...]``) are the checks applied to ``op.<param>=...`` values.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runner.config.signature import static_params
from runner.config.trials import as_choices
from runner.core.axes import INT64_MAX
from runner.core.errors import ConfigError, bad_value, choices_text
from runner.core.install import CONF_DIR
from runner.core.targets import locate

#: Keys of an op's YAML node that describe the op rather than parametrise it.
OP_META_KEYS: frozenset[str] = frozenset(
    {"_target_", "name", "shape_names", "default_shape", "description"})


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """The options of a config group: the YAML files in ``conf/<group>/``."""
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def resolve_target(target: str, key: str = "op._target_") -> Callable[..., Any]:
    """Import ``pkg.module.func`` or ``pkg.module:func`` (Hydra's rules:
    :mod:`runner.core.targets`)."""
    return locate(target, key)


@dataclass(frozen=True)
class OpParam:
    name: str
    annotation: Any
    choices: tuple[Any, ...] | None
    default: Any = inspect.Parameter.empty

    def check(self, op: str, value: Any) -> Any:
        """The value's type and choices from the annotation, its range from the default."""
        key = f"op.{self.name}"
        if self.choices is not None:
            if value not in self.choices:
                raise bad_value(key, value, self.choices)
            return value
        kind = self.annotation
        if kind is bool and not isinstance(value, bool):
            raise bad_value(key, value, ["true", "false"])
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"invalid value for '{key}': {value!r}. Op '{op}' expects an "
                              "integer.")
        if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"invalid value for '{key}': {value!r}. Op '{op}' expects a "
                              "number.")
        if kind is str and not isinstance(value, str):
            raise ConfigError(f"invalid value for '{key}': {value!r}. Op '{op}' expects a "
                              "string.")
        self._check_range(op, value)
        return value

    def _check_range(self, op: str, value: Any) -> None:
        """A number is finite and, unless it is the default, >= 0 (>= 1 where the default is
        an int >= 1): a negative default is a sentinel (``custom``'s ``flops=-1``: count)."""
        default = self.default
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or isinstance(default, bool) or not isinstance(default, (int, float)):
            return
        minimum = 1 if isinstance(default, int) and default >= 1 else 0
        if math.isfinite(value) and abs(value) <= INT64_MAX \
                and (value >= minimum or value == default):
            return
        sentinel = f" or {default:g} (the default)" if default < minimum else ""
        raise ConfigError(f"invalid value for 'op.{self.name}': {value!r}. Op '{op}' expects a "
                          f"finite number >= {minimum}{sentinel} (default {default:g}).")


def builder_params(builder: Callable[..., Any]) -> dict[str, OpParam]:
    """The op's parameters: keyword parameters of ``build`` after ``ctx``."""
    try:
        hints = typing.get_type_hints(builder)
    except Exception:  # unresolvable annotations: fall back to no type checks
        hints = {}
    params = {}
    for index, (name, parameter) in enumerate(inspect.signature(builder).parameters.items()):
        if index == 0 or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        params[name] = _param(name, hints.get(name, parameter.annotation), parameter.default)
    return params


def _param(name: str, annotation: Any, default: Any) -> OpParam:
    choices = typing.get_args(annotation) if typing.get_origin(annotation) is Literal else None
    return OpParam(name, annotation, choices, default)


def target_params(target: Any) -> tuple[Callable[..., Any] | None, dict[str, OpParam]]:
    """``(builder, parameters)`` of ``op._target_``. A shipped op's parameters are read from
    its source (:mod:`runner.config.signature`; builder None): importing it would import
    torch into the driver, which only the processes running trials need."""
    static = static_params(target, "op._target_")
    if static is None:
        builder = resolve_target(target)
        return builder, builder_params(builder)
    return None, {name: _param(name, annotation, default)
                  for name, annotation, default in static}


@dataclass(frozen=True)
class OpPlan:
    """The op selected for a job: its name, builder and shape signature. ``builder`` is what
    the planning imported to read a parameter signature it could not read from source (else
    None); the process that runs a trial imports the builder from the trial's ``target``
    (``runner.execution.workload.builder``)."""

    name: str
    target: str
    builder: Callable[..., Any] | None
    shape_names: list[str] | None
    default_shape: tuple[int, ...] | None
    params: dict[str, OpParam]


def plan_op(op_cfg: Mapping[str, Any]) -> tuple[OpPlan, dict[str, list[Any]]]:
    """Validate the ``op`` node; return the plan and the op-parameter choices."""
    if not op_cfg or "_target_" not in op_cfg:
        raise ConfigError(f"no op selected. Choose one with op=NAME. Valid choices: "
                          f"{choices_text(group_options('op'))}.")
    target = op_cfg["_target_"]
    builder, params = target_params(target)
    name = str(op_cfg.get("name") or target.rpartition(".")[2])
    choices: dict[str, list[Any]] = {}
    for key, value in op_cfg.items():
        if key in OP_META_KEYS:
            continue
        if key not in params:
            raise bad_value("op", key, sorted(params) or ["(none)"],
                            f"'{key}' is not a parameter of op '{name}' ({target}).")
        choices[key] = list(dict.fromkeys(params[key].check(name, v) for v in as_choices(value)))
        if not choices[key]:
            raise no_trials(f"op.{key}")
    shape_names = op_cfg.get("shape_names")
    default_shape = op_cfg.get("default_shape")
    if shape_names is not None and (not isinstance(shape_names, list)
                                    or not all(isinstance(n, str) for n in shape_names)):
        raise ConfigError(f"invalid value for 'op.shape_names' of op '{name}': "
                          f"{shape_names!r}. Expected a list of dimension names, e.g. "
                          "shape_names: [M, N, K]. Fix the op's YAML.")
    if default_shape is not None and (
            not isinstance(default_shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 1
                for d in default_shape)):
        raise ConfigError(f"invalid value for 'op.default_shape' of op '{name}': "
                          f"{default_shape!r}. Expected a list of positive integers, e.g. "
                          "default_shape: [512, 512, 512]. Fix the op's YAML.")
    plan = OpPlan(name=name, target=str(target), builder=builder,
                  shape_names=list(shape_names) if shape_names else None,
                  default_shape=tuple(default_shape) if default_shape else None,
                  params=params)
    return plan, choices


def no_trials(key: str) -> ConfigError:
    """An empty list where values are expected: the job would run nothing."""
    return ConfigError(f"no trials: {key}=[] is empty. Give at least one value (a list "
                       f"expands into one trial per element), or leave {key} out for its "
                       "default.")


#: ``smoke=true`` clamps every shape dimension to this, so any experiment runs in CI.
