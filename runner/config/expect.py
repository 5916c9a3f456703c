"""An experiment's description (``title``, ``question``, ``expected``, ``why``, ``source``),
claims (``expect:``) and tables (``pivots:``), checked with the rest of its config before any
trial runs: a typo in a claim is a :class:`ConfigError` naming the key, the value and the fix,
not a surprise when the sweep ends (``runner.claims.spec`` has the claim checks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from runner.claims.spec import Claim, ClaimSpecError, Pivot, check, parse
from runner.config.ops import OP_META_KEYS
from runner.core.errors import ConfigError

#: The experiment's description: typed text keys of the run config (runner.config.schema),
#: rendered by the experiments report.
DESCRIPTION_KEYS = ("title", "question", "expected", "why", "source")


def check_description(node: Mapping[str, Any], where: str = "") -> None:
    """Each description key, when present, is one piece of text."""
    for key in DESCRIPTION_KEYS:
        value = node.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"invalid value for '{where}{key}': {value!r}. Expected text (a string), e.g. "
                f"{key}: \"does a second stream overlap two matmuls?\"; quote text that "
                "contains ': ' or starts with '[' or '{'.")


def check_expectations(node: Mapping[str, Any], params: Iterable[str], where: str = "") -> None:
    """Parse and check ``node``'s description, ``expect`` and ``pivots``; selectors may name
    ``params``."""
    check_description(node, where)
    try:
        claims = parse(node.get("expect"), Claim, "expect")
        pivots = parse(node.get("pivots"), Pivot, "pivots")
        check(claims, pivots, params)
    except ClaimSpecError as exc:
        raise ConfigError(f"{where}{exc}") from None


def check_job(values: Mapping[str, Any], planned: Sequence[Any]) -> None:
    """A composed job's claims, against the parameters of the ops it plans."""
    params = {name for trial in planned for name in trial.op.params}
    check_expectations(values, params)


def check_experiments(names: Iterable[str], conf_dirs: Sequence[Path]) -> None:
    """The claims of the experiments a command line selects, before Hydra composes anything
    (so the last experiment of a multirun cannot fail after the first one ran). Each is read
    from the first of ``conf_dirs`` that has it; selectors may name any parameter an op YAML
    of those directories declares."""
    import yaml  # PyYAML's C loader when present: ~30 op files in a few ms

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    params = set()
    for conf_dir in conf_dirs:
        for path in (conf_dir / "op").glob("*.yaml"):
            params |= set(yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {})
    params -= OP_META_KEYS
    for name in names:
        paths = [d / "experiment" / f"{name}.yaml" for d in conf_dirs]
        path = next((p for p in paths if p.is_file()), None)
        if path is not None:
            check_expectations(OmegaConf.load(path), params, f"experiment {name}: ")


def config_dirs(args: Sequence[str], conf_dir: Path) -> list[Path]:
    """``--config-dir DIR`` (``-cd DIR``, ``--config-dir=DIR``) of a command line, searched
    first as Hydra does, then ``conf_dir``."""
    found = []
    for index, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in ("--config-dir", "-cd"):
            value = value if eq else (args[index + 1] if index + 1 < len(args) else "")
            if value:
                found.append(Path(value))
    return [*found, conf_dir]
