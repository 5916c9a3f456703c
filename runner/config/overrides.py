"""The front door: everything the user typed, checked before Hydra makes anything.

``python -m runner`` (``runner.__main__``) parses the command line once
(:mod:`runner.config.commandline`), then runs :func:`check_overrides`: each key must exist,
and each value passes the rule declared with its key (a setting: its field in
:mod:`runner.config.schema`; an op parameter: its builder's signature; a config group: its
files). Then it composes and plans every job of the sweep
(:func:`runner.config.preflight.preflight`), and the planner checks each trial axis value by
its rule in :mod:`runner.core.axes`, once, wherever it was set (command line, experiment,
``cases``). So a typo in any job of a multirun fails with exit status 2 before the first job
runs and before any folder is made. Every message names the key, the bad value and the valid
choices or the fix. :func:`check_command_line` is the two steps in one call, for tools and
tests.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.config import guards, sweep_size
from runner.config.commandline import CommandLine, parse_command_line
from runner.config.ops import (
    CONF_DIR,
    OP_META_KEYS,
    group_options,
    no_trials,
    target_params,
)
from runner.config.planner import check_shard
from runner.config.schema import RunConfig, TimerSettings
from runner.config.settings import rules
from runner.config.trials import as_choices
from runner.core.errors import ConfigError, bad_value, choices_text

CONFIG_GROUPS = ("op", "timer", "experiment")
TOP_LEVEL_KEYS = tuple(f.name for f in dataclasses.fields(RunConfig))
TIMER_KEYS = tuple(f.name for f in dataclasses.fields(TimerSettings))
RULES = rules(RunConfig)
TIMER_RULES = rules(TimerSettings)


def check_command_line(args: Sequence[str] | CommandLine, conf_dir: Path = CONF_DIR, *,
                       compose: bool = True) -> CommandLine:
    """Check a command line: each override (:func:`check_overrides`), then, with
    ``compose``, every job composed and planned (:func:`runner.config.preflight.preflight`).
    Raises :class:`ConfigError` on the first bad input."""
    cmd = args if isinstance(args, CommandLine) else parse_command_line(args)
    check_overrides(cmd, conf_dir)
    if compose:
        from runner.config import hydra_reuse
        from runner.config.preflight import preflight

        try:
            preflight(cmd, conf_dir)
        finally:  # no Hydra follows here to take what the check left for it
            hydra_reuse.forget()
    return cmd


def check_overrides(cmd: CommandLine, conf_dir: Path = CONF_DIR) -> None:
    """Each ``key=value`` against its key's declared rule; files and folders it names."""
    dirs = [*cmd.extra_dirs, conf_dir]
    op_names = _presets_in_play(cmd, "op", dirs)
    single: dict[str, Any] = {}
    for ov in cmd.overrides:
        key = ov.key_or_group
        if key == "hydra.output_subdir" and not ov.is_delete():
            guards.check_output_subdir(cmd.values(ov))
        if ov.is_hydra_override() or ov.is_delete():
            continue
        if ov.is_sweep_override() and not cmd.multirun:  # counted, before it is listed
            raise sweep_size.needs_multirun(ov, sweep_size.trial_limit(cmd))
        values = cmd.values(ov)
        if len(values) == 1:
            single[key] = values[0]
        if key in CONFIG_GROUPS:
            options = sorted({o for d in dirs for o in group_options(key, d)})
            for value in values:
                if value is not None and str(value) not in options:
                    raise bad_value(key, value, options)
                if key == "experiment" and value is not None:
                    guards.check_experiment_file(str(value), dirs)
        elif key.startswith("timer."):
            name = key.partition(".")[2]
            _check_key(key, name, TIMER_KEYS, "timer.")
            presets = sorted({o for d in dirs for o in group_options("timer", d)})
            for value in values:
                if name == "preset" and str(value) not in presets:
                    raise bad_value(key, value, presets)
                TIMER_RULES[name].enforce(key, value)
        elif key.startswith("op."):
            _check_op_override(key, values, op_names, dirs)
        else:  # a setting, or an axis: its values are the planner's to check, once
            _check_key(key, key, TOP_LEVEL_KEYS, "")
            for value in values:
                if key in RULES:
                    RULES[key].enforce(key, value)
    from runner.config.expect import check_experiments

    experiment = cmd.last("experiment")
    if experiment is not None:  # the claims (expect:), in every job of a multirun
        check_experiments([str(v) for v in cmd.values(experiment) if v], dirs)
    sharding = {key: cmd.values(ov) if (ov := cmd.last(key)) else [default]
                for key, default in (("shard", 0), ("num_shards", 1))}
    for shard in sharding["shard"]:
        for num_shards in sharding["num_shards"]:
            check_shard(shard, num_shards)
    _check_custom_targets(cmd, op_names)
    guards.check_results_dir(str(single.get("results_dir", "results")))
    guards.check_sweep_folder(single)


def _presets_in_play(cmd: CommandLine, group: str, dirs: list[Path]) -> list[str]:
    """The options of ``group`` a command line selects: its own override, else the
    experiment's ``override /group``, else config.yaml's default."""
    chosen = cmd.last(group)
    if chosen is not None:
        return [str(v) for v in cmd.values(chosen)]
    experiment = cmd.last("experiment")
    found: list[str] = []
    for name in cmd.values(experiment) if experiment is not None else []:
        path = _find(dirs, "experiment", name)
        found += _defaults_choice(path, group) if path else []
    return found or _defaults_choice(CONF_DIR / "config.yaml", group)


def _find(dirs: list[Path], group: str, name: Any) -> Path | None:
    return next((p for d in dirs if (p := d / group / f"{name}.yaml").is_file()), None)


def _defaults_choice(path: Path, group: str) -> list[str]:
    try:
        node = OmegaConf.load(path)
    except Exception:  # a broken file is reported by check_experiment_file / the pre-flight
        return []
    found = []
    # a bare YAML list has .get too, but indexes by number: check_experiment_file names it
    defaults = node.get("defaults", []) if isinstance(node, DictConfig) else []
    for item in defaults or []:
        if hasattr(item, "items"):
            for key, value in item.items():
                if str(key).split(" ")[-1].strip("/") == group and value is not None:
                    found.append(str(value))
    return found


def _check_key(full_key: str, key: str, valid: Iterable[str], prefix: str) -> None:
    valid = list(valid)
    if key not in valid:
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
        raise ConfigError(f"unknown config key '{full_key}'.{hint} Valid keys: "
                          f"{choices_text(prefix + v for v in valid)}.")


def _op_yaml(name: str, dirs: list[Path]) -> dict[str, Any] | None:
    path = _find(dirs, "op", name)
    if path is None:
        return None
    node = OmegaConf.to_container(OmegaConf.load(path))
    return node if isinstance(node, dict) else None


def _check_op_override(full_key: str, values: list[Any], op_names: list[str],
                       dirs: list[Path]) -> None:
    """``op.<param>=...``: the key must be a parameter (or meta key) of every op in play, and
    each value must pass the parameter's check (type, choices, range)."""
    sub = full_key.partition(".")[2]
    for name in op_names:
        node = _op_yaml(name, dirs) or {}
        try:
            params = target_params(node["_target_"])[1] if node else {}
        except (ConfigError, KeyError):
            continue  # the op itself is reported by the pre-flight composition
        if sub in params:
            for value in values:
                if value == []:
                    raise no_trials(full_key)
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


def _check_custom_targets(cmd: CommandLine, op_names: list[str]) -> None:
    """``op.target`` of ``op=custom`` on the command line (every value of a multirun)."""
    if not op_names or any(name != "custom" for name in op_names):
        return
    n_inputs = next((v for ov in cmd.overrides if ov.key_or_group == "op.n_inputs"
                     for v in cmd.values(ov)), 2)
    for ov in cmd.overrides:
        if ov.key_or_group == "op.target":
            for value in cmd.values(ov):
                for item in as_choices(value):
                    guards.check_custom_target({"target": item, "n_inputs": n_inputs})

