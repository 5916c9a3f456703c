"""Checking the user function a config names (``op=custom op.target=pkg.module:function``)
before any trial runs. The path itself is resolved by :func:`runner.core.targets.locate`.

For a user function (``op.target``) the checks run *before* any trial and, where possible,
without running the module's top-level code in this process: a module not yet imported is
found with ``importlib.util.find_spec``, its source read with ``ast`` (the function must be
defined there and accept the op's inputs) and its import tried in a throwaway process
(:func:`check_imports`). Only when the name is not visible in the source (a star
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
            check_imports(module, key, path)
            return
    _check_arity(locate(f"{module}:{'.'.join(attrs)}", key), key, path, n_args)


#: modules whose import in a throwaway process was checked (module -> error or None)
_IMPORTED: dict[str, str | None] = {}
#: a module whose import takes longer is left to the trials (each becomes an error row)
IMPORT_CHECK_TIMEOUT_S = 120


def check_imports(module: str, key: str, path: str) -> None:
    """Import ``module`` in a throwaway Python process (its top-level code never runs in
    this one): a module that fails to import would fail every trial."""
    import os
    import subprocess

    if module not in _IMPORTED:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
        # `import runner` first, as every trial does: it lets `ops.` find an installed copy
        code = "import importlib, sys, runner; importlib.import_module(sys.argv[1])"
        try:
            done = subprocess.run([sys.executable, "-c", code, module], env=env, text=True,
                                  capture_output=True, timeout=IMPORT_CHECK_TIMEOUT_S)
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            _IMPORTED[module] = (lines[-1][:300] if lines else f"exit status {done.returncode}"
                                 ) if done.returncode else None
        except (OSError, subprocess.TimeoutExpired):
            _IMPORTED[module] = None
    if _IMPORTED[module]:
        raise ConfigError(f"invalid value for '{key}': {path!r}: importing module {module!r} "
                          f"fails ({_IMPORTED[module]}). Fix the module or install what it "
                          "imports; every trial would fail the same way.")


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
