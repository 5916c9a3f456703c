"""The one resolver of a dotted path to code: ``op._target_``, ``op.target``, a claim's
``_target_``.

Two forms, as Hydra 1.3 reads ``_target_`` (``hydra._internal.utils._locate``):

* ``pkg.module:attr.path``: the module, then attributes;
* ``pkg.module.attr``: the longest prefix that imports is the module, the rest attributes;

no relative paths (empty parts). The object found must be callable. Every failure is a
:class:`~runner.core.errors.ConfigError` naming the key, the path and the fix.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from runner.core.errors import ConfigError

FORMS = "'pkg.module.function' or 'pkg.module:function'"


def split_target(path: Any, key: str) -> tuple[str | None, list[str]]:
    """``(module, attributes)`` for ``module:attrs``; ``(None, parts)`` for a dotted path."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"invalid value for '{key}': {path!r}. Expected {FORMS}, "
                          "e.g. ops.examples:gelu_mul.")
    if path.count(":") > 1:
        raise ConfigError(f"invalid value for '{key}': {path!r} has more than one ':'. "
                          f"Expected {FORMS}.")
    module, sep, attrs = path.partition(":")
    parts = (module.split(".") + attrs.split(".")) if sep else path.split(".")
    if any(not p.isidentifier() for p in parts) or (sep and not attrs):
        raise ConfigError(f"invalid value for '{key}': {path!r} is not a valid path (empty or "
                          f"non-identifier part; relative imports are not supported). Expected "
                          f"{FORMS}.")
    return (module, attrs.split(".")) if sep else (None, parts)


def locate(path: Any, key: str = "op._target_") -> Callable[..., Any]:
    """Import and return the callable ``path`` names (the rules are in the module doc)."""
    module, attrs = split_target(path, key)
    candidates = [(module, attrs)] if module is not None else \
        [(".".join(attrs[:cut]), attrs[cut:]) for cut in range(len(attrs) - 1, 0, -1)]
    errors: list[str] = []
    for name, rest in candidates:
        try:
            obj: Any = importlib.import_module(name)
        except ImportError as exc:
            errors.append(f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            continue
        for attr in rest:
            if not hasattr(obj, attr):
                raise ConfigError(f"invalid value for '{key}': {path!r}: {name} has no "
                                  f"attribute {'.'.join(rest)!r}. Check the function's name.")
            obj = getattr(obj, attr)
        if not callable(obj):
            raise ConfigError(f"invalid value for '{key}': {path!r} is a {type(obj).__name__}, "
                              "not a callable. Point it at a function.")
        return obj
    raise ConfigError(f"invalid value for '{key}': {path!r} could not be imported "
                      f"({errors[0] if errors else 'no module part'}). Check the module is "
                      "importable from the current directory or PYTHONPATH and the name is "
                      "right.")
