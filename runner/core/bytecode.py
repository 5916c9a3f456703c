"""Python's compiled bytecode for torch, kept in a cache of opsweep's where Python keeps none.

Why: Python compiles a module's source to bytecode on import and keeps it in the
``__pycache__`` folder beside the source, so the next process only loads it. Two common
set-ups keep nothing: ``PYTHONDONTWRITEBYTECODE=1`` (set in many container images) and a
package folder the user cannot write to, together with an installer that does not compile at
install time (``uv pip install`` without ``--compile-bytecode``). Then every process compiles
all of torch again, about 1,100 modules. On four H100s set up that way a
worker's ``import torch`` took 5.1 s, and 2.3 s once the bytecode was cached. That import is
most of the time from the command to the first trial, and every worker of every command paid
it (docs/scale-out.md, "Torch's bytecode").

So where the package has no bytecode beside it and Python may not write any there, the
process reads and writes its bytecode under ``$XDG_CACHE_HOME/opsweep/bytecode`` (else
``~/.cache/opsweep/bytecode``) through Python's own ``sys.pycache_prefix``: nothing is
written beside the sources, and Python checks each cached file against its source's time and
size, as it does in ``__pycache__``. The first process compiles and writes; later ones load.

The prefix holds for every later import of the process, not only the package's: modules that
have a ``__pycache__`` are compiled into the cache once as well. Deleting the folder clears it.

Left alone: a ``pycache_prefix`` the user set (``PYTHONPYCACHEPREFIX``, ``-X
pycache_prefix``: the workers get it too), a package whose bytecode is there or may be
written there, and ``OPSWEEP_BYTECODE_CACHE=off``. ``OPSWEEP_BYTECODE_CACHE=DIR`` puts the
cache in ``DIR``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

#: The environment variable that moves the cache (a folder) or turns it off (:data:`OFF`).
CACHE_ENV = "OPSWEEP_BYTECODE_CACHE"
#: The values of :data:`CACHE_ENV` that turn the cache off (any case, spaces ignored).
OFF = frozenset({"off", "0", "false", "no", "none"})


def cache_bytecode(package: str) -> str | None:
    """Point this process's bytecode at opsweep's cache when ``package`` (found, not
    imported) has no bytecode beside it that Python could load or write; call it before
    importing ``package``. Returns the cache folder now in use (the user's own prefix
    included), or None where Python keeps bytecode as usual. Never raises: the cache only
    saves time, and a process without it imports as it would have."""
    if sys.pycache_prefix:
        # The user's choice. Given as ``-X pycache_prefix`` it would not reach the workers
        # (multiprocessing passes -B on, not -X options): the environment carries it.
        os.environ.setdefault("PYTHONPYCACHEPREFIX", sys.pycache_prefix)
        return sys.pycache_prefix
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting.lower() in OFF or not _compiles_each_time(package):
        return None
    folder, _ = _usable_folder(setting)
    if folder is None:
        return None  # no cache to be had: the imports compile, as they would have
    sys.pycache_prefix = str(folder)  # the whole process's imports from here on
    sys.dont_write_bytecode = False  # writes go to the cache folder only
    return str(folder)


def setting_error() -> str | None:
    """What is wrong with :data:`CACHE_ENV`, for the command to refuse before anything runs:
    a folder that cannot be made or written to. None when it is unset, off or usable."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    if not setting or setting.lower() in OFF:
        return None
    _, why = _usable_folder(setting)
    if why is None:
        return None
    return (f"{CACHE_ENV}={setting}: {why}; expected a folder this user may write to, or "
            f"one of {', '.join(sorted(OFF))} to keep no cache")


def _usable_folder(setting: str) -> tuple[Path | None, str | None]:
    """The cache folder ``setting`` names (the default where empty), made and writable, or
    None and why not."""
    try:
        folder = (Path(setting).expanduser() if setting else default_folder()).absolute()
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError, KeyError) as exc:  # no home folder, or none to make
        return None, f"the folder cannot be made ({getattr(exc, 'strerror', None) or exc})"
    # A folder Python cannot write to would be worse than none: the prefix holds for every
    # later import, so modules whose __pycache__ was fine would compile in every process.
    if not os.access(folder, os.W_OK | os.X_OK):
        return None, f"{folder} cannot be written to"
    return folder, None


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/opsweep/bytecode``, else ``~/.cache/opsweep/bytecode``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opsweep" / "bytecode"


def _compiles_each_time(package: str) -> bool:
    """Whether importing ``package`` compiles its source in every process: no bytecode of
    its ``__init__`` beside it, and none may be written there."""
    try:
        spec = importlib.util.find_spec(package)  # a top-level name: nothing is executed
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None)
    if spec is None or not origin or not origin.endswith(".py"):
        return False
    if os.path.exists(importlib.util.cache_from_source(origin)):
        return False  # compiled at install time, or by an earlier process
    return sys.dont_write_bytecode or not os.access(os.path.dirname(origin), os.W_OK)
