"""Every config file a run composes is measured before anything loads it: its size once its
YAML aliases are expanded, and how deep it nests.

Why: YAML aliases (``&a`` / ``*a``) let a file of a few lines name 10^9 values (the "billion
laughs"); PyYAML shares the aliased node, but OmegaConf builds every copy, so loading such a
file sat silent until a time limit killed it. And YAML's reader and OmegaConf recurse once per
level, so a file nested a few thousand lists deep overflows Python's stack. Here each file's
nesting is read first from the event stream (no recursion), then its node graph is composed
(aliases stay shared, linear in the file's length) and the expanded size and depth counted
with each node's counts computed once.

The files measured are the ones Hydra would compose: the primary ``config.yaml`` and each
config-group option the command line picks, in every config folder of the run
(``--config-dir``, ``hydra.searchpath``, ``conf/``), and, from each file measured, the
options its ``defaults:`` list picks (an experiment's ``override /op: NAME``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.errors import ConfigError, unwritable

#: Values one config file may expand to. A 5000-shape sweep is ~10^4.
MAX_EXPANDED_NODES = 1_000_000
#: Levels one config file may nest (with its aliases expanded). Real configs nest fewer than
#: ten; OmegaConf's recursion fails between 100 and 150.
MAX_NESTING = 50


def _loaders() -> list[Any]:
    """libyaml's loader where PyYAML has it (ten times faster: a 5000-shape experiment in
    0.3 s, not 1.5 s), then the pure-Python one that OmegaConf reads with, for what libyaml
    refuses and it accepts (a ``\\udce9`` escape, lists nested past libyaml's 1000 levels)."""
    import yaml

    return [yaml.CSafeLoader, yaml.SafeLoader] if hasattr(yaml, "CSafeLoader") \
        else [yaml.SafeLoader]


def _too_deep_at(text: str, loader: Any) -> int | None:
    """The line where ``text`` first nests past :data:`MAX_NESTING` levels, or None. Read
    from the event stream, which keeps its own stack: composing the node graph recurses
    once per level (in Python, or in C with libyaml) and must only see a shallow file."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                return event.start_mark.line + 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _compose(path: Path, what: str) -> Any:
    """The node graph of ``path`` (None when it does not parse: the parse error is reported
    where the file is loaded); :class:`ConfigError` when it nests too deep or is not
    UTF-8 text."""
    import yaml

    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except OSError:
        return None
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"invalid value for {what}: {path} is not UTF-8 text: byte "
                          f"0x{data[exc.start]:02X} on line {line} (in Latin-1 it reads "
                          f"{bytes([data[exc.start]]).decode('latin-1')!r}). Save the file as "
                          "UTF-8.") from None
    for loader in _loaders():
        try:
            line = _too_deep_at(text, loader)
            if line is not None:
                raise _nested_too_deep(path, what, f"more than {MAX_NESTING} levels on line "
                                                   f"{line}")
            return yaml.compose(text, Loader=loader)
        except yaml.YAMLError:
            continue
    return None


def _nested_too_deep(path: Path, what: str, where: str) -> ConfigError:
    return ConfigError(f"invalid value for {what}: {path} nests lists or mappings {where}; "
                       f"at most {MAX_NESTING} are read. Flatten the values.")


def _measure(root: Any) -> tuple[int, int]:
    """(nodes, levels of lists and mappings) of ``root`` once every alias is expanded; each
    shared node counted once, children before parents, without recursion."""
    counts: dict[int, tuple[int, int]] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in counts:
            continue
        children = _children(node)
        if ready:
            below = [counts.get(id(child), (0, 0)) for child in children]
            counts[id(node)] = (1 + sum(n for n, _ in below),
                                max((d for _, d in below), default=0) + _is_collection(node))
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in counts)
    return counts[id(root)]


def expanded_nodes(path: Path) -> int:
    """How many nodes ``path`` holds once every alias is expanded (0 when it does not
    parse)."""
    root = _compose(path, repr(path.name))
    return 0 if root is None else _measure(root)[0]


def _is_collection(node: Any) -> int:
    import yaml

    return int(isinstance(node, yaml.CollectionNode))


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_file(path: Path, what: str) -> Any:
    """:class:`ConfigError` when ``path`` expands past :data:`MAX_EXPANDED_NODES` values or
    nests past :data:`MAX_NESTING` levels; else its node graph (None: it does not parse)."""
    root = _compose(path, what)
    if root is None:
        return None
    count, levels = _measure(root)
    _check_text(root, path, what)
    if count > MAX_EXPANDED_NODES:
        raise ConfigError(f"invalid value for {what}: {path} expands to {count:,} values "
                          f"through YAML aliases (&name / *name), more than "
                          f"{MAX_EXPANDED_NODES:,}. Write the values out, or use fewer "
                          "nested aliases.")
    if levels > MAX_NESTING:
        raise _nested_too_deep(path, what, f"{levels - 1} levels deep through YAML aliases "
                                           "(&name / *name)")
    return root


def _check_text(root: Any, path: Path, what: str) -> None:
    """A file's text is UTF-8 (read strictly), so a lone surrogate comes from an escape in a
    quoted string (``"caf\\udce9"``): it reads, and Hydra's record of the job failed on it
    after the sweep folder was made."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(_children(node))
        if isinstance(node.value, str) and unwritable(node.value):
            char = next(c for c in node.value if 0xD800 <= ord(c) <= 0xDFFF)
            raise ConfigError(f"invalid value for {what}: {path} line {node.start_mark.line + 1}:"
                              f" {node.value!r} has the escape \\u{ord(char):04x}, half of a "
                              "surrogate pair, which no text file holds. Write the character "
                              "itself, or its code point as one escape (\\u00e9 for 'é').")


def check_config_files(cmd: Any) -> None:
    """Each config file the command line composes, before anything loads it: the primary
    config, the options the overrides pick and, from each file, its ``defaults:``."""
    dirs = [Path(folder) for folder in cmd.conf_dirs]
    todo: list[tuple[str, str]] = [("", "config")]
    for override in cmd.overrides:
        group = override.key_or_group.lstrip("+~")
        if "." not in group and not override.is_delete() and any(
                (folder / group).is_dir() for folder in dirs):  # a group: its options
            todo += [(group, str(value)) for value in cmd.values(override)]
    seen: set[Path] = set()
    while todo:
        group, name = todo.pop()
        for path in _options(dirs, group, name):
            if path in seen:
                continue
            seen.add(path)
            what = f"{group!r}: {name!r}" if group else "the primary config"
            root = check_file(path, what)
            todo += _defaults(root, group)


def _options(dirs: list[Path], group: str, name: str) -> list[Path]:
    """The files ``group/name`` may be, first config folder first: each folder's file, as a
    folder earlier on the search path may hold only some of the options."""
    relative = Path(group, f"{name}.yaml") if group else Path(f"{name}.yaml")
    if ".." in relative.parts:
        return []
    return [path for folder in dirs if (path := folder / relative).is_file()]


def _defaults(root: Any, group: str) -> list[tuple[str, str]]:
    """The (group, option) pairs a file's ``defaults:`` list picks, read from its node graph:
    ``override /op: NAME`` (absolute), ``db: NAME`` (also relative to the file's group),
    ``- NAME`` (an option of the file's own group)."""
    import yaml

    if not isinstance(root, yaml.MappingNode):
        return []
    entries = next((value.value for key, value in root.value
                    if isinstance(key, yaml.ScalarNode) and key.value == "defaults"
                    and isinstance(value, yaml.SequenceNode)), [])
    picks: list[tuple[str, str]] = []
    for entry in entries:
        if isinstance(entry, yaml.ScalarNode):
            picks.append((group, entry.value))
            continue
        if not isinstance(entry, yaml.MappingNode):
            continue
        for key, value in entry.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            target = key.value.split(" ")[-1].split("@")[0]
            options = value.value if isinstance(value, yaml.SequenceNode) else [value]
            groups = [target.strip("/")] + ([f"{group}/{target}"] if group and
                                             not target.startswith("/") else [])
            picks += [(g, option.value) for g in groups for option in options
                      if isinstance(option, yaml.ScalarNode)]
    return picks
