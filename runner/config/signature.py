"""An op builder's parameters read from its source, without importing it.

Why: every shipped op module imports torch at its top, and the driver (which only plans,
checks and hands trials to worker processes) would pay torch's import (seconds) before the
first trial just to read ``build``'s keyword parameters. This reads the same names,
annotations and defaults from the module's syntax tree instead.

It only answers for the project's own ``ops`` package, and only when every parameter is
plain: annotation ``int``, ``float``, ``bool``, ``str``, ``Literal[...]`` of constants, or
none, and a literal default. Anything else (a user's module, an alias, ``int | None``, a
computed default) returns None and the caller imports the builder as before, so the checks
are exactly as strict either way. ``tests/test_configs.py`` checks both readings agree for
every op in ``conf/op/``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path
from typing import Any, Literal

from runner.core.install import alias_ops
from runner.core.targets import split_target

#: The package whose modules may be read statically: shipped with the runner, importable.
OPS_DIR = alias_ops()
_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}


def static_params(target: Any, key: str) -> list[tuple[str, Any, Any]] | None:
    """``[(name, annotation, default), ...]`` of the keyword parameters after ``ctx`` of the
    function ``target`` names in ``ops/``; None when it cannot be read without importing."""
    module, attrs = split_target(target, key)
    if module is None:
        module, attrs = ".".join(attrs[:-1]), attrs[-1:]
    if not module.startswith("ops.") or len(attrs) != 1:
        return None
    try:
        spec = importlib.util.find_spec(module)  # imports the `ops` package: torch-free
    except (ImportError, ValueError):
        return None
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None or origin.suffix != ".py" or origin.parent != OPS_DIR:
        return None
    try:
        tree = ast.parse(origin.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.Assign
                                                       | ast.AnnAssign | ast.ClassDef
                                                       | ast.AsyncFunctionDef)
            and _binds(node, attrs[0])]
    if len(defs) != 1 or not isinstance(defs[0], ast.FunctionDef) or defs[0].decorator_list:
        return None
    return _parameters(defs[0].args, _aliases(tree))


def _aliases(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once, by a plain ``NAME = value`` (``Impl = Literal[...]``,
    ``AUTO = -1.0``): annotations and defaults may name them."""
    bound: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        for name in _bound_names(node):
            bound.setdefault(name, []).append(node)
    aliases: dict[str, ast.expr] = {
        name: nodes[0].value for name, nodes in bound.items()
        if len(nodes) == 1 and isinstance(nodes[0], ast.Assign) and len(nodes[0].targets) == 1}
    if "*" in bound:
        aliases["*"] = ast.Constant(None)
    return aliases


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).partition(".")[0] for a in node.names]
    if isinstance(node, ast.Expr | ast.Pass):  # the docstring
        return []
    return ["*"]  # if/for/with/try at the top: anything may be bound; nothing is trusted


def _binds(node: ast.stmt, name: str) -> bool:
    """Whether a top-level statement binds ``name``."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name == name
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def _parameters(args: ast.arguments,
                aliases: dict[str, ast.expr]) -> list[tuple[str, Any, Any]] | None:
    if "*" in aliases:
        return None
    positional = [*args.posonlyargs, *args.args]
    defaults: list[Any] = [inspect.Parameter.empty] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True))
    pairs += list(zip(args.kwonlyargs, [d or inspect.Parameter.empty for d in args.kw_defaults],
                      strict=True))
    out = []
    for arg, default in pairs[1:]:  # the first is ctx
        annotation = _annotation(arg.annotation, aliases)
        if annotation is None:
            return None
        if default is not inspect.Parameter.empty:
            if isinstance(default, ast.Name) and default.id in aliases:
                default = aliases[default.id]
            try:
                default = ast.literal_eval(default)
            except ValueError:
                return None
        out.append((arg.arg, annotation, default))
    return out


def _annotation(node: ast.expr | None, aliases: dict[str, ast.expr]) -> Any:
    """The annotation's value, ``inspect.Parameter.empty`` when absent, None when not plain."""
    if node is None:
        return inspect.Parameter.empty
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Name) and node.id in aliases:
        node = aliases[node.id]  # ``Impl = Literal[...]``
    if isinstance(node, ast.Name):
        return _TYPES.get(node.id)
    if isinstance(node, ast.Subscript) and _is_literal(node.value):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if all(isinstance(item, ast.Constant) for item in items):
            return Literal[tuple(item.value for item in items)]
    return None


def _is_literal(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Literal") or (
        isinstance(node, ast.Attribute) and node.attr == "Literal"
        and isinstance(node.value, ast.Name) and node.value.id in ("typing", "typing_extensions"))
