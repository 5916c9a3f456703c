"""One line for what Hydra or OmegaConf refused while composing a job: the key, the value
and the fix (``runner.config.preflight`` composes every job before the first runs)."""

from __future__ import annotations

import re

from runner.config import search


def explain(exc: BaseException) -> str:
    """One line naming what Hydra or OmegaConf refused: the key, the value and the fix."""
    from hydra.errors import MissingConfigException
    from omegaconf.errors import (
        ConfigKeyError,
        InterpolationResolutionError,
        OmegaConfBaseException,
    )

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    first = " ".join(str(exc).split())
    source = re.match(r"In '([^']+)'", first)
    where = f" (in {source.group(1)}.yaml)" if source and source.group(1) != "config" else ""
    for error in chain:
        if isinstance(error, MissingConfigException) and error.missing_cfg_file:
            group, _, name = str(error.missing_cfg_file).rpartition("/")
            options = ", ".join(error.options or [])
            return (f"invalid value for '{group or 'config'}': {name!r}{where}: no such "
                    f"config. Valid choices: {options}. Fix the name in the override or in "
                    f"the experiment's defaults list.{search.install_hint(group, name)}")
        if not isinstance(error, OmegaConfBaseException):
            continue
        key = getattr(error, "full_key", None) or getattr(error, "key", None)
        detail = " ".join(str(getattr(error, "msg", "") or "").split())
        detail = detail.partition(" full_key:")[0].rstrip(".")
        if key and isinstance(error, ConfigKeyError):
            return (f"unknown config key '{key}'{where}: {detail}. Remove it or fix its name "
                    "(python -m runner --help lists the keys).")
        if key and isinstance(error, InterpolationResolutionError):
            # its value is the interpolation that failed, never None
            return (f"invalid value for '{key}'{where}: its interpolation does not resolve: "
                    f"{detail}. Set what it reads (export the variable) or give a default, "
                    "e.g. ${oc.env:NAME,fallback}.")
        if key:
            return (f"invalid value for '{key}'{where}: {getattr(error, 'value', None)!r}: "
                    f"{detail}. Give it a value of the declared type (python -m runner --help "
                    "lists the keys and their types).")
    return (f"the config does not compose: {first}. Fix the file or override it names "
            "(python -m runner --help lists the groups and keys).")
