"""The command line of ``python -m runner``, parsed once.

Hydra's own argument parser reads the flags (``-m``, ``--config-dir``, ``--cfg``, ...) and its
override grammar reads the ``key=value`` overrides; every check (``runner.config.overrides``),
the pre-flight composition of every job (``runner.config.preflight``) and the start of the
trial workers (``runner.__main__``) read this one :class:`CommandLine`, never the raw
arguments again; only ``runner.config.early_workers`` reads them before, without Hydra. The
config folders it adds (:attr:`CommandLine.extra_dirs`) travel with it.
Flags and overrides may come in any order (``op=matmul -m dtype=a,b``):
:attr:`CommandLine.argv` puts the flags first, the order Hydra's parser needs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.config import override_errors
from runner.config.ops import CONF_DIR
from runner.core.errors import TEXT_FIX, ConfigError, shown, unwritable

#: Hydra flags after which no trial runs (help, config printing, completion).
NO_TRIALS = ("help", "hydra_help", "cfg", "info", "version", "shell_completion")


@dataclass
class CommandLine:
    """What the user typed: flags, override texts and their parsed form."""

    #: the arguments as given (without the program name)
    given: list[str]
    #: Hydra's parsed flags (``argparse.Namespace``)
    flags: Any
    #: the ``key=value`` texts, in order
    texts: list[str]
    #: Hydra's ``Override`` objects of ``texts``
    overrides: list[Any]
    #: config folders searched before ``conf/`` (``--config-dir``, ``hydra.searchpath``)
    extra_dirs: list[Path] = field(default_factory=list)

    @property
    def multirun(self) -> bool:
        return bool(self.flags.multirun)

    @property
    def runs_trials(self) -> bool:
        return not any(getattr(self.flags, name, None) for name in NO_TRIALS)

    @property
    def argv(self) -> list[str]:
        """The arguments with the flags first and the overrides last, for Hydra's parser
        (argparse stops at the first flag after a run of positional overrides)."""
        rest = list(self.given)
        for text in self.texts:
            rest.remove(text)
        return [*rest, *self.texts]

    @property
    def conf_dirs(self) -> list[Path]:
        """Every folder a config group is looked up in, first match first."""
        return [*self.extra_dirs, CONF_DIR]

    def values(self, override: Any) -> list[Any]:
        """The values one override gives: one, or each of a discrete sweep (``a,b``,
        ``range(4)``); none for interval sweeps (their values are not known up front)."""
        if override.is_discrete_sweep():
            return list(override.sweep_iterator())
        return [] if override.is_sweep_override() else [override.value()]

    def last(self, key: str) -> Any | None:
        """The last override of ``key``, or None."""
        return next((ov for ov in reversed(self.overrides) if ov.key_or_group == key), None)

    def values_of(self, key: str) -> list[Any] | None:
        """The values the last override of ``key`` gives (:meth:`values`; Hydra keeps the
        last), or None when the command line does not set ``key``."""
        override = self.last(key)
        return None if override is None else self.values(override)

    def job_overrides(self) -> list[list[str]]:
        """The override texts of each job, as Hydra's basic sweeper makes them (the cartesian
        product of the sweeps); one job without ``-m``."""
        if not self.multirun:
            return [list(self.texts)]
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

        sweepable = [ov for ov in self.overrides if not ov.is_sweep_override()
                     or ov.is_discrete_sweep()]
        task = [ov for ov in sweepable if not ov.is_hydra_override()]
        hydra = [ov.input_line for ov in sweepable if ov.is_hydra_override()]
        if not task:
            return [hydra]
        return [hydra + job for job in BasicSweeper.split_arguments(task, None)[0]]


def parse_command_line(args: Sequence[str]) -> CommandLine:
    """Parse ``args`` once (Hydra's flags and override grammar); :class:`ConfigError` for
    what neither accepts."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = get_args_parser()
    # argparse exits 2 with its own usage text; opsweep's one-line form instead
    parser.error = _argparse_error  # type: ignore[method-assign]
    flags = parser.parse_intermixed_args(list(args))
    texts = list(flags.overrides)
    _check_bytes(texts)
    try:
        overrides = OverridesParser.create().parse_overrides(texts)
    except Exception as exc:  # Hydra's grammar errors are precise: keep their first line
        raise ConfigError(override_errors.explain(texts, exc)) from None
    _warn_repeats(overrides)
    extra: list[Path] = []
    if flags.config_dir:
        folder = Path(flags.config_dir).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"invalid value for '--config-dir': {flags.config_dir!r}: "
                              f"{os.path.abspath(folder)} is not a folder. Point it at a folder "
                              "of configs (with experiment/, op/ or timer/ in it).")
        extra.append(folder)
    for ov in overrides:
        if ov.key_or_group == "hydra.searchpath" and not ov.is_sweep_override():
            value = ov.value()
            for item in value if isinstance(value, list) else [value]:
                extra += _search_folder(str(item))
    return CommandLine(list(args), flags, texts, overrides, extra)


def _search_folder(entry: str) -> list[Path]:
    """The folder of one ``hydra.searchpath`` entry: ``file://DIR``, ``DIR`` or
    ``pkg://package`` (the package's folder)."""
    if not entry.startswith("pkg://"):
        return [Path(entry.removeprefix("file://"))]
    import importlib.util

    try:
        spec = importlib.util.find_spec(entry.removeprefix("pkg://").strip("/").replace("/", "."))
    except (ImportError, ValueError):
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])][:1] if spec else []


def _argparse_error(message: str) -> None:
    raise ConfigError(f"{message} (see python -m runner --help)")


def _check_bytes(texts: Sequence[str]) -> None:
    """Text that no file can hold (:func:`runner.core.errors.unwritable`): quoted, the grammar
    took it, and Hydra's record of the job failed on it after the sweep folder was made.
    Refused here, quoted or not."""
    for text in texts:
        problem = unwritable(text)
        if problem:
            raise ConfigError(f"invalid value for {text.partition('=')[0]!r} on the command "
                              f"line: {shown(text)} {problem}. {TEXT_FIX}")


def _warn_repeats(overrides: Sequence[Any]) -> None:
    """The same key twice on one command line (``dtype=fp32 dtype=fp64``): Hydra keeps the
    last and drops the first without a word, so a sweep would run less than was typed. A
    warning, not an error: scripts that append an override to a fixed command line rely on
    the last one winning (docs/errors.md)."""
    seen: dict[str, str] = {}
    for ov in overrides:
        key = ov.key_or_group
        if key in seen:
            print(f"opsweep: warning: {key!r} is given twice on the command line "
                  f"({seen[key]!r}, then {ov.input_line!r}): only the last runs. To run "
                  f"both, give a list for one job ({key}=[a,b]) or a sweep with -m "
                  f"({key}=a,b).", file=sys.stderr)
        seen[key] = ov.input_line
