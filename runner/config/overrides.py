"""Checking the command line's ``key=value`` overrides before Hydra composes anything.

So a typo in any job of a multirun fails with exit status 2 before the first job runs and
before any result directory is made. Every message names the key, the bad value and the
valid choices.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.config.ops import CONF_DIR, OP_META_KEYS, builder_params, group_options, resolve_target
from runner.config.planner import TIMER_CLOCKS, check_shape, check_shard, check_timer
from runner.config.schema import RunConfig, TimerSettings
from runner.config.trials import as_choices, shape_choices
from runner.core.axes import AXES_BY_NAME, AXIS_NAMES
from runner.core.errors import ConfigError, bad_value, choices_text

# ---------------------------------------------------------------------------------------
# The command line, before Hydra composes anything.
# ---------------------------------------------------------------------------------------

CONFIG_GROUPS = ("op", "timer", "experiment")
TOP_LEVEL_KEYS = tuple(f.name for f in dataclasses.fields(RunConfig))
TIMER_KEYS = tuple(f.name for f in dataclasses.fields(TimerSettings))


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
    sharding: dict[str, list[Any]] = {"shard": [0], "num_shards": [1]}
    for ov in overrides:
        key = ov.key_or_group
        if ov.is_hydra_override() or ov.is_delete():
            continue
        values = _override_values(ov)
        if key in sharding and values:
            sharding[key] = values
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
        elif key in AXIS_NAMES:
            _check_axis_values(key, values, op_names, conf_dir)
        else:
            _check_key(key, key, TOP_LEVEL_KEYS, "")
    from runner.config.expect import check_experiments, config_dirs

    for ov in overrides:  # the experiments' claims (expect:), in every job of a multirun
        if ov.key_or_group == "experiment":
            check_experiments([str(v) for v in _override_values(ov) if v],
                              config_dirs(args, conf_dir))
    # Every job of a multirun must be a valid shard, before the first one runs.
    for shard in sharding["shard"]:
        for num_shards in sharding["num_shards"]:
            check_shard(shard, num_shards)
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
                AXES_BY_NAME[key].check(item)
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

