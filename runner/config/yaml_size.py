"""A config file whose YAML aliases expand past any sane size is refused before it is loaded.

Why: YAML aliases (``&a`` / ``*a``) let a file of a few lines name 10^9 values (the "billion
laughs"); PyYAML shares the aliased node, but OmegaConf builds every copy, so loading such an
experiment file sat silent until a time limit killed it. Here the file's node graph is composed
(aliases stay shared, linear in the file's length) and the expanded size counted with each
node's count computed once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.errors import ConfigError

#: Values one config file may expand to. A 5000-shape sweep is ~10^4.
MAX_EXPANDED_NODES = 1_000_000


def expanded_nodes(path: Path) -> int:
    """How many nodes ``path`` holds once every alias is expanded (0 when it does not parse:
    the parse error is reported where the file is loaded)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            root = yaml.compose(handle, Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return 0
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    # children before parents, without recursion (a deep file must not hit the stack limit)
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if ready:
            sizes[id(node)] = 1 + sum(sizes.get(id(child), 0) for child in children)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_file(path: Path, what: str) -> None:
    """:class:`ConfigError` when ``path`` expands past :data:`MAX_EXPANDED_NODES`."""
    count = expanded_nodes(path)
    if count > MAX_EXPANDED_NODES:
        raise ConfigError(f"invalid value for {what}: {path} expands to {count:,} values "
                          f"through YAML aliases (&name / *name), more than "
                          f"{MAX_EXPANDED_NODES:,}. Write the values out, or use fewer "
                          "nested aliases.")


def check_experiments(cmd: Any) -> None:
    """Each experiment file the command line names, before anything loads it."""
    override = cmd.last("experiment")
    if override is None:
        return
    for name in cmd.values(override):
        for folder in cmd.conf_dirs:
            path = Path(folder) / "experiment" / f"{name}.yaml"
            if path.is_file():
                check_file(path, f"'experiment': {name!r}")
                break
