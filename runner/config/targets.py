"""Checking the user function a config names (``op=custom op.target=pkg.module:function``)
before any trial runs. The path itself is resolved by :func:`runner.core.targets.locate`.

For a user function (``op.target``) the checks run *before* any trial and, where possible,
without running the module's top-level code: a module not yet imported is found with
``importlib.util.find_spec`` and its source read with ``ast`` (the function must be defined
there and accept the op's inputs). Only when the name is not visible in the source (a star
import, a compiled module) is the module imported. The trials themselves import it in the
worker process, as any Python program would.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from typing import Any

from runner.core.errors import ConfigError
from runner.core.targets import locate, split_target


def check_function(path: Any, key: str, n_args: int) -> None:
    """A user function named by ``path`` exists, is callable and takes ``n_args`` positional
    tensors; its module's top-level code is not run when its source shows the function."""
    module, attrs = split_target(path, key)
    if module is None:  # dotted: the longest prefix that is a module
        for cut in range(len(attrs) - 1, 0, -1):
            name = ".".join(attrs[:cut])
            if name in sys.modules or _find_spec(name) is not None:
                module, attrs = name, attrs[cut:]
                break
        else:
            raise ConfigError(f"invalid value for '{key}': {path!r}: no module of that path "
                              "can be found. Check the module is importable from the current "
                              "directory or PYTHONPATH.")
    elif module not in sys.modules and _find_spec(module) is None:
        raise ConfigError(f"invalid value for '{key}': {path!r}: module {module!r} cannot be "
                          "found. Check the module is importable from the current directory "
                          "or PYTHONPATH.")
    if module not in sys.modules and len(attrs) == 1:
        node = _source_definition(module, attrs[0], key, path)
        if node is not None:
            _check_arity_ast(node, key, path, n_args)
            return
    _check_arity(locate(f"{module}:{'.'.join(attrs)}", key), key, path, n_args)


def _find_spec(name: str) -> Any:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _source_definition(module: str, name: str, key: str, path: str) -> Any:
    """The ``def``/``class``/assignment of ``name`` at the top level of ``module``'s source;
    None when the source is unavailable or the name comes from elsewhere (star import)."""
    spec = _find_spec(module)
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return None
    try:
        with open(origin, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), origin)
    except (OSError, SyntaxError, ValueError) as exc:
        raise ConfigError(f"invalid value for '{key}': {path!r}: {origin} cannot be read or "
                          f"parsed ({type(exc).__name__}: {exc}).") from None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Constant):
                raise ConfigError(f"invalid value for '{key}': {path!r} is a "
                                  f"{type(node.value.value).__name__}, not a callable. Point "
                                  "it at a function.")
            return None  # e.g. functools.partial(...): known only once imported
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
           for n in tree.body) or any(isinstance(n, (ast.Import, ast.ImportFrom)) and any(
               (a.asname or a.name) == name for a in n.names) for n in tree.body):
        return None
    raise ConfigError(f"invalid value for '{key}': {path!r}: module {module!r} defines no "
                      f"{name!r}. Check the function's name.")


def _check_arity_ast(node: Any, key: str, path: str, n_args: int) -> None:
    if isinstance(node, ast.ClassDef):
        return
    args = node.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    if args.vararg is None and positional < n_args or required > n_args:
        raise ConfigError(f"invalid value for '{key}': {path!r} takes {required}..{positional} "
                          f"positional arguments, but op.n_inputs={n_args} tensors are passed. "
                          "Set op.n_inputs or change the function's signature.")


def _check_arity(func: Callable[..., Any], key: str, path: str, n_args: int) -> None:
    try:
        inspect.signature(func).bind(*range(n_args))
    except TypeError as exc:
        raise ConfigError(f"invalid value for '{key}': {path!r} cannot be called with "
                          f"op.n_inputs={n_args} tensors ({exc}). Set op.n_inputs or change the "
                          "function's signature.") from None
    except ValueError:
        pass  # no signature (a builtin): it is called and any error is that trial's row
