"""Checking user input before any trial runs.

Two entry points share one set of per-axis checks:

* :func:`plan_job` turns a composed job config into an :class:`OpPlan` and the job's
  :class:`~runner.config.trials.TrialSpec` list, or raises :class:`ConfigError`.
* :func:`check_command_line` looks at the raw ``key=value`` overrides *before* Hydra
  composes anything, so that a typo in any job of a multirun fails before the first job runs
  and before any result directory is made.

Every message names the key, the bad value and the valid choices.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf

from runner.config.schema import (
    AXES,
    OP_META_KEYS,
    CompileMode,
    DType,
    GraphMode,
    RunConfig,
    TimerSettings,
)
from runner.config.trials import TrialSpec, as_choices, expand, shape_choices

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


class ConfigError(ValueError):
    """Bad user input: a key, value or combination that cannot run. Exit code 2."""


def choices_text(choices: Iterable[Any]) -> str:
    return ", ".join(str(c) for c in choices)


def bad_value(key: str, value: Any, choices: Iterable[Any], hint: str = "") -> ConfigError:
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(value), choices, n=1)
    msg = f"invalid value for '{key}': {value!r}. Valid choices: {choices_text(choices)}."
    if close:
        msg += f" Did you mean '{close[0]}'?"
    if hint:
        msg += f" {hint}"
    return ConfigError(msg)


# ---------------------------------------------------------------------------------------
# Per-axis checks: each takes one user value and returns the normalised trial value.
# ---------------------------------------------------------------------------------------

def _enum_value(key: str, enum: type[Enum], value: Any) -> Enum:
    try:
        return enum(str(value))
    except ValueError:
        raise bad_value(key, value, [e.value for e in enum]) from None


def _bool_value(key: str, value: Any, allow_null: bool = False) -> bool | None:
    if value is None and allow_null:
        return None
    if isinstance(value, bool):
        return value
    choices = ["true", "false"] + (["null"] if allow_null else [])
    raise bad_value(key, value, choices)


def _int_value(key: str, value: Any, minimum: int, allow_null: bool = False) -> int | None:
    if value is None and allow_null:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        null = " or null" if allow_null else ""
        raise ConfigError(f"invalid value for '{key}': {value!r}. Expected an integer "
                          f">= {minimum}{null}.")
    return value


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(value: Any) -> str:
    """``auto`` → ``cuda:0`` when a GPU is present, else ``cpu``; ``cuda`` → ``cuda:0``."""
    text = str(value)
    n_gpus = cuda_device_count()
    valid = ["auto", "cpu"] + (["cuda"] + [f"cuda:{i}" for i in range(n_gpus)] if n_gpus else [])
    if text == "auto":
        return "cuda:0" if n_gpus else "cpu"
    if text == "cpu":
        return "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if match is None:
        raise bad_value("device", value, valid)
    if n_gpus == 0:
        raise bad_value("device", value, valid,
                        "No CUDA device is available on this machine (torch.cuda.is_available() "
                        "is False); use device=cpu or device=auto.")
    index = int(match.group(1) or 0)
    if index >= n_gpus:
        raise bad_value("device", value, valid, f"This machine has {n_gpus} CUDA device(s).")
    return f"cuda:{index}"


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


AXIS_CHECKS: dict[str, Callable[[Any], Any]] = {
    "dtype": lambda v: _enum_value("dtype", DType, v),
    "device": resolve_device,
    "seed": lambda v: _int_value("seed", v, 0),
    "num_threads": lambda v: _int_value("num_threads", v, 1, allow_null=True),
    "streams": lambda v: _int_value("streams", v, 1),
    "graph": lambda v: _enum_value("graph", GraphMode, v),
    "compile": lambda v: _enum_value("compile", CompileMode, v),
    "compile_dynamic": lambda v: _bool_value("compile_dynamic", v, allow_null=True),
    "fullgraph": lambda v: _bool_value("fullgraph", v),
    "backward": lambda v: _bool_value("backward", v),
}


# ---------------------------------------------------------------------------------------
# Ops: resolving the builder and checking its parameters against its signature.
# ---------------------------------------------------------------------------------------

def resolve_target(target: str, key: str = "op._target_") -> Callable[..., Any]:
    """Import ``pkg.module.func`` or ``pkg.module:func`` (Hydra's rules:
    :mod:`runner.config.targets`)."""
    from runner.config.targets import locate

    return locate(target, key)


@dataclass(frozen=True)
class OpParam:
    name: str
    annotation: Any
    choices: tuple[Any, ...] | None

    def check(self, op: str, value: Any) -> Any:
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
        return value


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
        annotation = hints.get(name, parameter.annotation)
        choices = None
        if typing.get_origin(annotation) is Literal:
            choices = typing.get_args(annotation)
        params[name] = OpParam(name, annotation, choices)
    return params


@dataclass(frozen=True)
class OpPlan:
    """The op selected for a job: its name, builder and shape signature."""

    name: str
    target: str
    builder: Callable[..., Any]
    shape_names: list[str] | None
    default_shape: tuple[int, ...] | None
    params: dict[str, OpParam]


def plan_op(op_cfg: Mapping[str, Any]) -> tuple[OpPlan, dict[str, list[Any]]]:
    """Validate the ``op`` node; return the plan and the op-parameter choices."""
    if not op_cfg or "_target_" not in op_cfg:
        raise ConfigError(f"no op selected. Choose one with op=NAME. Valid choices: "
                          f"{choices_text(group_options('op'))}.")
    target = op_cfg["_target_"]
    builder = resolve_target(target)
    name = str(op_cfg.get("name") or target.rpartition(".")[2])
    params = builder_params(builder)
    choices: dict[str, list[Any]] = {}
    for key, value in op_cfg.items():
        if key in OP_META_KEYS:
            continue
        if key not in params:
            raise bad_value("op", key, sorted(params) or ["(none)"],
                            f"'{key}' is not a parameter of op '{name}' ({target}).")
        choices[key] = list(dict.fromkeys(params[key].check(name, v) for v in as_choices(value)))
    shape_names = op_cfg.get("shape_names")
    default_shape = op_cfg.get("default_shape")
    plan = OpPlan(name=name, target=str(target), builder=builder,
                  shape_names=list(shape_names) if shape_names else None,
                  default_shape=tuple(default_shape) if default_shape else None,
                  params=params)
    return plan, choices


#: ``smoke=true`` clamps every shape dimension to this, so any experiment runs in CI.
SMOKE_MAX_DIM = 16


def _shape_axis(raw: Any, plan: OpPlan, smoke: bool = False) -> list[tuple[int, ...]]:
    if raw is None:
        if plan.default_shape is None:
            raise ConfigError(f"'shape' is not set and op '{plan.name}' has no default_shape. "
                              "Pass shape=[...].")
        shapes = [plan.default_shape]
    elif not isinstance(raw, list):
        raise ConfigError(f"invalid value for 'shape': {raw!r}. Expected a list of integers "
                          "such as shape=[512,512,512].")
    else:
        shapes = shape_choices(raw)
    checked = [check_shape(s, plan.name, plan.shape_names) for s in shapes]
    if smoke:
        checked = [tuple(min(d, SMOKE_MAX_DIM) for d in s) for s in checked]
    return list(dict.fromkeys(checked))


TIMER_CLOCKS = ("event", "host")


def check_timer(timer: Any) -> None:
    """The timer settings must make a valid :class:`~runner.timing.timer.TimerPlan`."""
    from runner.timing.timer import TimerPlan

    if timer.clock not in TIMER_CLOCKS:
        raise bad_value("timer.clock", timer.clock, TIMER_CLOCKS)
    try:
        TimerPlan.from_settings(timer)
    except ValueError as exc:
        raise ConfigError(f"invalid timer settings: {exc}") from None


@dataclass(frozen=True)
class PlannedTrial:
    """One trial and the op that builds it (ops may differ between trials through ``cases``)."""

    op: OpPlan
    spec: TrialSpec


def plan_job(cfg: DictConfig, conf_dir: Path = CONF_DIR) -> list[PlannedTrial]:
    """Validate a composed job config and expand it into trials.

    Without ``cases`` the job is one cartesian product. With ``cases`` (a list of partial
    configs) each case is expanded on its own, on top of the job's values, and the trials are
    concatenated in case order: ``cases`` zips heterogeneous settings (different ops, shapes,
    params), where lists multiply.
    """
    check_timer(cfg.timer)
    values = OmegaConf.to_container(cfg, resolve=True)
    cases = values.get("cases")
    if cases is None:
        return _plan_case(values, {}, "", conf_dir)
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ConfigError(f"invalid value for 'cases': {cases!r}. Expected a list of mappings, "
                          "e.g. cases=[{op: matmul, dtype: bf16}, {op: copy}].")
    planned: list[PlannedTrial] = []
    for index, case in enumerate(cases):
        planned += _plan_case(values, case, f"cases[{index}].", conf_dir)
    return planned


def _plan_case(values: dict[str, Any], case: dict[str, Any], where: str,
               conf_dir: Path) -> list[PlannedTrial]:
    op_node = dict(values.get("op") or {})
    if "op" in case:
        options = group_options("op", conf_dir)
        if case["op"] not in options:
            raise bad_value(f"{where}op", case["op"], options)
        op_node = OmegaConf.to_container(OmegaConf.load(conf_dir / "op" / f"{case['op']}.yaml"))
    case_params = {k: v for k, v in case.items() if k != "op" and k not in AXES}
    plan, _ = plan_op(op_node)
    for key in case_params:
        if key not in plan.params:
            raise bad_value(f"{where}{key}", key, sorted(set(AXES) | set(plan.params) | {"op"}),
                            f"'{key}' is neither an axis nor a parameter of op '{plan.name}'.")
    plan, param_choices = plan_op({**op_node, **case_params})
    axes: dict[str, list[Any]] = {}
    for key in AXES:
        raw = case.get(key, values[key])
        try:
            if key == "shape":
                axes[key] = _shape_axis(raw, plan, smoke=bool(values.get("smoke")))
            else:
                axes[key] = list(dict.fromkeys(AXIS_CHECKS[key](v) for v in as_choices(raw)))
        except ConfigError as exc:
            raise ConfigError(f"{where}{exc}" if where else str(exc)) from None
    specs = expand(axes, param_choices, op=plan.name, target=plan.target)
    return [PlannedTrial(plan, spec) for spec in specs]


# ---------------------------------------------------------------------------------------
# The command line, before Hydra composes anything.
# ---------------------------------------------------------------------------------------

CONFIG_GROUPS = ("op", "timer", "experiment")
TOP_LEVEL_KEYS = tuple(f.name for f in dataclasses.fields(RunConfig))
TIMER_KEYS = tuple(f.name for f in dataclasses.fields(TimerSettings))


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def _override_values(override: Any) -> list[Any]:
    if override.is_discrete_sweep():
        return list(override.sweep_iterator())
    if override.is_sweep_override():
        return []  # interval sweeps (optuna etc.): values are not known up front
    return [override.value()]


def _ops_in_play(overrides: list[Any], conf_dir: Path) -> list[str]:
    """Which op YAMLs a command line can select (see :func:`_presets_in_play`)."""
    return _presets_in_play(overrides, "op", conf_dir)


def _defaults_choice(node: DictConfig, group: str) -> list[str]:
    found = []
    for item in node.get("defaults", []) or []:
        if isinstance(item, (dict, DictConfig)):
            for key, value in item.items():
                if key.split(" ")[-1].strip("/") == group and value is not None:
                    found.append(str(value))
    return found


def check_command_line(args: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Validate ``key=value`` overrides; raise :class:`ConfigError` on the first bad one."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides_text = [a for a in args if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(overrides_text)
    except Exception as exc:  # Hydra's grammar errors are already precise
        raise ConfigError(str(exc).splitlines()[0]) from None
    custom_search = any(ov.key_or_group == "hydra.searchpath" for ov in overrides) or any(
        a.startswith(("--config-dir", "-cd", "--config-path", "-cp")) for a in args)
    op_names = _ops_in_play(overrides, conf_dir)
    timer_overrides: dict[str, Any] = {}
    for ov in overrides:
        key = ov.key_or_group
        if ov.is_hydra_override() or ov.is_delete():
            continue
        values = _override_values(ov)
        if key in CONFIG_GROUPS:
            if custom_search:
                continue
            options = group_options(key, conf_dir)
            for value in values:
                if value is not None and str(value) not in options:
                    raise bad_value(key, value, options)
        elif key.startswith("timer."):
            _check_key(key, key.partition(".")[2], TIMER_KEYS, "timer.")
            _check_timer_value(key, values)
            if len(values) == 1:
                timer_overrides[key.partition(".")[2]] = values[0]
        elif key.startswith("op."):
            if custom_search:
                continue
            _check_op_override(key, values, op_names, conf_dir)
        elif key in AXES:
            _check_axis_values(key, values, op_names, conf_dir)
        else:
            _check_key(key, key, TOP_LEVEL_KEYS, "")
    if timer_overrides and not custom_search:
        for preset in _presets_in_play(overrides, "timer", conf_dir):
            settings = OmegaConf.merge(OmegaConf.structured(TimerSettings),
                                       OmegaConf.load(conf_dir / "timer" / f"{preset}.yaml"),
                                       timer_overrides)
            check_timer(settings)


def _presets_in_play(overrides: list[Any], group: str, conf_dir: Path) -> list[str]:
    """The options of ``group`` a command line selects: its own override, else the
    experiment's ``override /group``, else config.yaml's default."""
    for ov in reversed(overrides):
        if ov.key_or_group == group:
            return [str(v) for v in _override_values(ov)]
    for ov in reversed(overrides):
        if ov.key_or_group == "experiment":
            found = []
            for name in _override_values(ov):
                path = conf_dir / "experiment" / f"{name}.yaml"
                found += _defaults_choice(OmegaConf.load(path), group) if path.exists() else []
            if found:
                return found
    return _defaults_choice(OmegaConf.load(conf_dir / "config.yaml"), group)


def _check_timer_value(key: str, values: list[Any]) -> None:
    """``timer.<field>=value`` must have the field's type (OmegaConf would reject it later,
    with Hydra's exit status 1 and no list of what is expected)."""
    name = key.partition(".")[2]
    kind = {f.name: f.type for f in dataclasses.fields(TimerSettings)}[name]
    for value in values:
        if kind in ("int", int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind in ("float", float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind in ("bool", bool):
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            expected = {"int": "an integer", "float": "a number", "bool": "true or false"}
            raise ConfigError(f"invalid value for '{key}': {value!r}. Expected "
                              f"{expected.get(str(kind), 'a string')}.")
        if name == "clock" and value not in TIMER_CLOCKS:
            raise bad_value(key, value, TIMER_CLOCKS)


def _check_key(full_key: str, key: str, valid: Iterable[str], prefix: str) -> None:
    valid = list(valid)
    if key not in valid:
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
        raise ConfigError(f"unknown config key '{full_key}'.{hint} Valid keys: "
                          f"{choices_text(prefix + v for v in valid)}.")


def _op_yaml(name: str, conf_dir: Path) -> dict[str, Any] | None:
    path = conf_dir / "op" / f"{name}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path)) if path.exists() else None


def _check_op_override(full_key: str, values: list[Any], op_names: list[str],
                       conf_dir: Path) -> None:
    """``op.<param>=...``: the key must be a parameter (or meta key) of every op in play, and a
    closed-choice parameter's values must be among its choices."""
    sub = full_key.partition(".")[2]
    for name in op_names:
        node = _op_yaml(name, conf_dir) or {}
        try:
            params = builder_params(resolve_target(node["_target_"])) if node else {}
        except ConfigError:
            continue  # the op itself is reported by the op= check or inside the job
        if sub in params:
            for value in values:
                for item in as_choices(value):
                    params[sub].check(name, item)
            continue
        if sub in OP_META_KEYS - {"_target_"}:
            continue
        close = difflib.get_close_matches(sub, list(params), n=1)
        hint = f" Did you mean 'op.{close[0]}'?" if close else ""
        listing = (f"Parameters of op '{name}': {choices_text('op.' + p for p in params)}."
                   if params else f"Op '{name}' has no parameters.")
        raise ConfigError(f"unknown config key '{full_key}'.{hint} {listing}")


def _check_axis_values(key: str, values: list[Any], op_names: list[str],
                       conf_dir: Path) -> None:
    for value in values:
        if key != "shape":
            for item in as_choices(value):
                AXIS_CHECKS[key](item)
            continue
        if value is None:
            continue
        if not isinstance(value, list):
            raise ConfigError(f"invalid value for 'shape': {value!r}. Expected a list of "
                              "integers such as shape=[512,512,512].")
        for name in op_names:
            node = _op_yaml(name, conf_dir) or {}
            for shape in shape_choices(value):
                check_shape(shape, node.get("name", name), node.get("shape_names"))
