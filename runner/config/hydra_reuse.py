"""Hydra parses a command line and composes its config once per run, not four times.

Why: ``python -m runner`` parses the command line (``runner.config.commandline``) and
composes the job to check it (``runner.config.preflight``); then Hydra parses and composes
the same overrides twice more: once to read ``hydra.mode`` (``Hydra.get_mode``) and once to
run. With a 5000-shape ``shape=[[1],...]`` on the command line each parse took ~0.5 s and
each composition ~1.3 s (5000 list nodes), and the first trial came 10-13 s after the command.

The two changes, both to Hydra 1.3 internals and both here, in one place
(tests/test_hydra_reuse.py fails when Hydra changes under them):

* ``OverridesParser.parse_rule`` remembers what it parsed, by rule and text: the same
  override text is parsed once per process. Hydra's ``Override`` objects are not changed
  after the parse, so sharing one is safe (a ``shuffle(...)`` sweep is then the same order
  each time it is read, which is what the user meant).
  A list of plain integers (``shape=[[1],[2],...]``) is read as JSON (:func:`plain_list`),
  into the ``Override`` the grammar would make.
* ``ConfigLoaderImpl.load_configuration`` serves the config that the pre-flight check
  composed for exactly these overrides, config name and search path (:func:`hand_over`)
  instead of composing it again: ``Hydra.get_mode`` reads it and ``Hydra.run`` takes it,
  once. Any other composition (a multirun's jobs, ``--cfg``, another search path) is
  Hydra's own.
"""

from __future__ import annotations

import json
import re
from typing import Any

_INSTALLED: list[bool] = []
#: the key of the one config handed over and the config: (config_name, overrides, search path)
_HANDED: dict[tuple[Any, ...], Any] = {}
#: how many override texts are remembered; past it the oldest half is forgotten
MAX_PARSED = 100_000
_PARSED: dict[tuple[Any, ...], Any] = {}
#: what ``Hydra.get_mode``'s caller appends to a run's overrides when no config sets a mode
RUN_MODE = "hydra.mode=RUN"


def install() -> None:
    """Wrap Hydra's override parse and composition once per process (idempotent)."""
    if _INSTALLED:
        return
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    parse_rule = OverridesParser.parse_rule
    load_configuration = ConfigLoaderImpl.load_configuration

    def remembered_parse(self: Any, s: str, rule_name: str) -> Any:
        key = (rule_name, s, tuple(sorted(self.functions.definitions)))
        if key not in _PARSED:
            if len(_PARSED) >= MAX_PARSED:
                for old in list(_PARSED)[:MAX_PARSED // 2]:
                    del _PARSED[old]
            plain = plain_list(s) if rule_name == "override" else None
            _PARSED[key] = plain if plain is not None else parse_rule(self, s, rule_name)
        return _PARSED[key]

    def handed_or_composed(self: Any, config_name: Any, overrides: list[str], run_mode: Any,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> Any:
        handed = _handed(config_name, overrides, self.config_search_path,
                         run=run_mode == RunMode.RUN and validate_sweep_overrides,
                         mode_only=not validate_sweep_overrides)
        if handed is not None:
            return handed
        return load_configuration(self, config_name, overrides, run_mode, from_shell,
                                  validate_sweep_overrides)

    remembered_parse.__wrapped__ = parse_rule  # type: ignore[attr-defined]
    handed_or_composed.__wrapped__ = load_configuration  # type: ignore[attr-defined]
    OverridesParser.parse_rule = remembered_parse  # type: ignore[method-assign]
    ConfigLoaderImpl.load_configuration = handed_or_composed  # type: ignore[method-assign]
    _INSTALLED.append(True)


#: ``key=[[1],[2,3],...]``: a list of non-negative integers and lists of them, nothing else
_PLAIN_LIST = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\[[0-9,\[\]]*\])")


def plain_list(text: str) -> Any:
    """The ``Override`` Hydra's grammar makes of ``key=[...]`` when the list holds only
    integers and lists of them (a long ``shape=`` list), read as JSON: 0.5 s of ANTLR for a
    5000-shape list becomes milliseconds. None for anything else (the grammar reads it)."""
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


def forget() -> None:
    """Drop a config handed over and not taken (the run stopped before Hydra ran)."""
    _HANDED.clear()


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
    return (config_name, tuple(overrides),
            tuple((p.provider, p.path) for p in search_path.get_path()))
