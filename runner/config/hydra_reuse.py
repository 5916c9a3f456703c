"""Hydra parses a command line and composes its config once per run, not four times.

Why: ``python -m runner`` parses the command line (``runner.config.commandline``) and
composes the job to check it (``runner.config.preflight``); then Hydra parses and composes
the same overrides twice more: once to read ``hydra.mode`` (``Hydra.get_mode``) and once to
run. With a 5000-shape ``shape=[[1],...]`` on the command line each parse took ~0.5 s and
each composition ~1.3 s (5000 list nodes), and the first trial came 10-13 s after the command.

The changes, all to Hydra 1.3 internals and all here, in one place
(tests/test_hydra_reuse.py fails when Hydra changes under them):

* ``OverridesParser.parse_rule`` remembers what it parsed, by rule and text: the same
  override text is parsed once per process, and each parse returns a copy of that
  ``Override`` (``parse_overrides`` sets the copy's ``config_loader``; its value, never
  changed after the parse, is shared: a ``shuffle(...)`` sweep reads in one order).
  A list of plain integers (``shape=[[1],[2],...]``) is read as JSON (:func:`plain_list`),
  into the ``Override`` the grammar would make.
* ``ConfigLoaderImpl.load_configuration`` serves the config that the pre-flight check
  composed for exactly these overrides, config name and search path (:func:`hand_over`)
  instead of composing it again: ``Hydra.get_mode`` reads it and ``Hydra.run`` takes it,
  once. In a multirun (:func:`share_bases`), the jobs that differ only in plain values
  (``seed=range(100)``) are composed once: each other job is a copy with its values
  applied by Hydra's own ``_apply_overrides_to_config`` (:func:`_from_base`).
* ``Sweeper.validate_batch_is_legal`` (which composes every job of a batch only to see that
  it composes, before the launcher composes it again) validates only the jobs the pre-flight
  check did not compose and check (:func:`mark_checked`): an experiment's
  ``hydra.sweeper.params`` in another order, a sweep that other code starts.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any

_INSTALLED: list[bool] = []
#: the key of the one config handed over and the config: (config_name, overrides, search path)
_HANDED: dict[tuple[Any, ...], Any] = {}
#: how many override texts are remembered; past it the oldest half is forgotten
MAX_PARSED = 100_000
_PARSED: dict[tuple[Any, ...], Any] = {}
#: compositions that others differing only in plain values start from (:func:`_from_base`)
_BASES: dict[tuple[Any, ...], Any] = {}
_SHARING: list[bool] = []
_GROUPS: dict[tuple[Any, ...], bool] = {}
#: the jobs the pre-flight check composed and checked (:func:`mark_checked`)
_CHECKED: set[tuple[str, ...]] = set()
#: the parser :func:`plain_part` reads overrides with
_PARSER: list[Any] = []
#: what ``Hydra.get_mode``'s caller appends to a run's overrides when no config sets a mode
RUN_MODE = "hydra.mode=RUN"


def install() -> None:
    """Wrap Hydra's override parse and composition once per process (idempotent)."""
    if _INSTALLED:
        return
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.plugins.sweeper import Sweeper
    from hydra.types import RunMode

    parse_rule = OverridesParser.parse_rule
    load_configuration = ConfigLoaderImpl.load_configuration
    validate_batch = Sweeper.validate_batch_is_legal

    def remembered_parse(self: Any, s: str, rule_name: str) -> Any:
        key = (rule_name, s, tuple(sorted(self.functions.definitions)))
        if key not in _PARSED:
            if len(_PARSED) >= MAX_PARSED:
                for old in list(_PARSED)[:MAX_PARSED // 2]:
                    del _PARSED[old]
            plain = plain_list(s) if rule_name == "override" else None
            _PARSED[key] = plain if plain is not None else parse_rule(self, s, rule_name)
        # a copy: parse_overrides then sets the copy's config_loader (its parser's)
        return copy.copy(_PARSED[key])

    def handed_or_composed(self: Any, config_name: Any, overrides: list[str], run_mode: Any,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> Any:
        handed = _handed(config_name, overrides, self.config_search_path,
                         run=run_mode == RunMode.RUN and validate_sweep_overrides,
                         mode_only=not validate_sweep_overrides)
        if handed is not None:
            return handed
        flags = (run_mode, from_shell, validate_sweep_overrides)
        if _SHARING:
            return _from_base(self, load_configuration, config_name, overrides, flags)
        return load_configuration(self, config_name, overrides, *flags)

    def validate_unchecked(self: Any, batch: Any) -> None:
        unchecked = [job for job in batch if _task(job) not in _CHECKED]
        if unchecked:
            validate_batch(self, unchecked)

    remembered_parse.__wrapped__ = parse_rule  # type: ignore[attr-defined]
    handed_or_composed.__wrapped__ = load_configuration  # type: ignore[attr-defined]
    OverridesParser.parse_rule = remembered_parse  # type: ignore[method-assign]
    ConfigLoaderImpl.load_configuration = handed_or_composed  # type: ignore[method-assign]
    validate_unchecked.__wrapped__ = validate_batch  # type: ignore[attr-defined]
    Sweeper.validate_batch_is_legal = validate_unchecked  # type: ignore[method-assign]
    _INSTALLED.append(True)


#: ``key=[[1],[2,3],...]``: a list of non-negative integers and lists of them, nothing else;
#: or ``key=57``: one integer, written as JSON writes it
_PLAIN_LIST = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\[[0-9,\[\]]*\]|-?[1-9][0-9]*|0)")


def plain_list(text: str) -> Any:
    """The ``Override`` Hydra's grammar makes of ``key=[...]`` when the list holds only
    integers and lists of them (a long ``shape=`` list), read as JSON: 0.5 s of ANTLR for a
    5000-shape list becomes milliseconds. The same for ``key=57``: each job of
    ``-m seed='range(0,10000)'`` has its own such text, ~1 ms of ANTLR each. None for
    anything else (the grammar reads it)."""
    match = _PLAIN_LIST.fullmatch(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(2))  # refuses "01", "[1,]" and "[,]" as the grammar does
    except ValueError:
        return None
    from hydra.core.override_parser.types import Override, OverrideType, ValueType

    override = Override(type=OverrideType.CHANGE, key_or_group=match.group(1),
                        value_type=ValueType.ELEMENT, _value=value, input_line=text)
    override.validate()
    return override


def hand_over(config_name: Any, overrides: list[str], search_path: Any, cfg: Any) -> None:
    """Let Hydra's next composition of exactly these overrides use ``cfg`` (a config that
    ``load_configuration`` composed for them, which the caller no longer changes)."""
    _HANDED.clear()
    _HANDED[_key(config_name, overrides, search_path)] = cfg


def mark_checked(overrides: list[str]) -> None:
    """The job with these overrides was composed and checked before Hydra started
    (``runner.config.preflight``): Hydra's sweeper need not compose it again to validate it."""
    _CHECKED.add(_task(overrides))


def _task(overrides: Any) -> tuple[str, ...]:
    """The overrides that reach the job's config: the sweeper's batches hold only these."""
    from runner.config.planner import _task_key

    return _task_key(list(overrides))


def share_bases() -> None:
    """From now until :func:`forget`, compositions that differ only in plain values share
    one composition (a multirun's jobs: :func:`_from_base`)."""
    _BASES.clear()
    _CHECKED.clear()
    _SHARING[:] = [True]


def forget() -> None:
    """Drop a config handed over and not taken (the run stopped before Hydra ran), and the
    shared compositions: config files may change before the next run of this process."""
    _HANDED.clear()
    _BASES.clear()
    _SHARING.clear()
    _GROUPS.clear()
    _CHECKED.clear()


def _from_base(loader: Any, compose: Any, config_name: Any, overrides: list[str],
               flags: tuple[Any, ...]) -> Any:
    """Hydra's composition of ``overrides``, from a copy of an earlier one that differed only
    in the values of plain keys (``seed=3`` where it was ``seed=2``): those values applied
    as Hydra applies them, and the record of the overrides rewritten, as composing would.
    A 100-job ``seed=range(100)`` sweep composes once, not 300 times (~70 ms each)."""
    parsed, plain, key = plain_part(loader, overrides)
    key = (config_name, flags, key)
    base = _BASES.get(key)
    if base is None:
        cfg = compose(loader, config_name, overrides, *flags)
        if shareable(cfg, plain):
            _BASES[key] = copy.deepcopy(cfg)
        return cfg
    try:
        return _with_values(base, parsed, plain)
    except Exception:  # a value the key does not take: Hydra's own error, from its own work
        return compose(loader, config_name, overrides, *flags)


def plain_part(loader: Any, overrides: list[str]) -> tuple[list[Any], list[Any], Any]:
    """``overrides`` parsed, those of them that set plain values (:func:`_is_plain`), and
    what compositions that may share one (:func:`shareable`) have in common: the rest, the
    plain keys, the folder they are composed in and the search path."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not _PARSER:  # one parser: making one registers Hydra's grammar functions (~1 ms)
        _PARSER.append(OverridesParser.create())
    parsed = _PARSER[0].parse_overrides(overrides)  # remembered: no parse
    plain = [_is_plain(o, loader) for o in parsed]
    # A plain value whose key another override also touches (``notes=a ++notes=z``, a parent's
    # merge) is not set apart: set on the shared base, it would win where Hydra's last wins.
    others = [o.key_or_group for o, p in zip(parsed, plain) if not p]
    plain = [p and not any(_related(o.key_or_group, k) for k in others)
             for o, p in zip(parsed, plain)]
    key = (os.getcwd(), _search(loader.config_search_path),
           tuple(o.key_or_group if p else o.input_line for o, p in zip(parsed, plain)))
    return parsed, [o for o, p in zip(parsed, plain) if p], key


def _related(key: str, other: str) -> bool:
    """Whether two dotted keys name the same node, or one holds the other."""
    return key == other or key.startswith(other + ".") or other.startswith(key + ".")


def apply_values(cfg: Any, plain: list[Any]) -> None:
    """Set the ``plain`` overrides' values in ``cfg``, as Hydra's composition sets them."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(plain, cfg)


def _is_plain(override: Any, loader: Any) -> bool:
    """``key=value`` that sets a value, replacing the one before: not a config group, not
    Hydra's own, not a sweep, not added or deleted, not a mapping (which merges)."""
    from hydra.core.override_parser.types import OverrideType, ValueType

    return (override.type == OverrideType.CHANGE and override.package is None
            and override.value_type == ValueType.ELEMENT and not override.is_hydra_override()
            and not isinstance(override.value(), dict) and not _is_group(override, loader))


def _is_group(override: Any, loader: Any) -> bool:
    """Whether the override's key names a config group (looked up once per key and path)."""
    key = (override.key_or_group, _search(loader.config_search_path))
    if key not in _GROUPS:
        _GROUPS[key] = loader.repository.group_exists(override.key_or_group)
    return _GROUPS[key]


def shareable(cfg: Any, plain: list[Any]) -> bool:
    """A composition others may start from: no plain key is a config group after all (one
    only a search path of the config adds), and nothing was read from the environment."""
    choices = cfg.hydra.runtime.choices
    return not cfg.hydra.job.env_copy and not any(o.key_or_group in choices for o in plain)


def _with_values(base: Any, parsed: list[Any], plain: list[Any]) -> Any:
    """A copy of ``base`` with the ``plain`` overrides applied and ``hydra.overrides.task``
    and ``hydra.job.override_dirname`` as composing ``parsed`` sets them."""
    from hydra._internal.config_loader_impl import get_overrides_dirname

    cfg = copy.deepcopy(base)
    apply_values(cfg, plain)
    task = [o for o in parsed if not o.is_hydra_override()]
    cfg.hydra.overrides.task = [o.input_line for o in task]
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=task, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep,
        exclude_keys=dirname.exclude_keys)
    return cfg


def _search(search_path: Any) -> tuple[Any, ...]:
    return tuple((p.provider, p.path) for p in search_path.get_path())


def _handed(config_name: Any, overrides: list[str], search_path: Any, *, run: bool,
            mode_only: bool) -> Any:
    """The config handed over for this composition, or None: ``Hydra.get_mode`` (which
    composes without validating sweeps, to read ``hydra.mode`` only) reads it; ``Hydra.run``
    takes it, with the ``hydra.mode=RUN`` that ``get_mode`` appended when no config set a
    mode applied as composing it would (the mode, and the override on record)."""
    key = _key(config_name, overrides, search_path)
    if mode_only:
        return _HANDED.get(key)
    if not run:
        return None
    if key in _HANDED:
        return _HANDED.pop(key)
    if overrides[-1:] != [RUN_MODE]:
        return None
    cfg = _HANDED.pop(_key(config_name, overrides[:-1], search_path), None)
    if cfg is None or cfg.hydra.mode is not None:
        return None
    from hydra.types import RunMode

    cfg.hydra.mode = RunMode.RUN
    cfg.hydra.overrides.hydra.append(RUN_MODE)
    return cfg


def _key(config_name: Any, overrides: list[str], search_path: Any) -> tuple[Any, ...]:
    return (config_name, tuple(overrides), _search(search_path))
