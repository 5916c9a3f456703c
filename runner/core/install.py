"""Where opsweep's configs and ops are: a repository checkout or an installed wheel.

The repository keeps them beside the runner (``conf/``, ``ops/``); the wheel puts them inside
it (folders ``conf`` and ``_ops`` of the runner: pyproject's ``package-dir``), so that nothing
installs under the generic top-level names ``conf`` (no package at all) or ``ops`` (another
project's name on PyPI). Configs and users name the ops ``ops.<module>`` in both layouts
(``_target_: ops.matmul.build``, ``op.target=ops.examples:gelu_mul``): :func:`alias_ops` lets
that name find the bundled copy when there is one.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RUNNER_DIR = Path(__file__).resolve().parents[1]
#: The import name of the ops inside an installed runner (pyproject's package-dir maps it to
#: the repository's ``ops/``; a checkout run through ``PYTHONPATH`` has no such module).
BUNDLED_OPS = __name__.partition(".")[0] + "._ops"


def _first_dir(*candidates: Path) -> Path:
    """The first folder that exists; else the last (its absence is reported where used)."""
    return next((path for path in candidates if path.is_dir()), candidates[-1])


#: The config folder: ``runner/conf`` in a wheel, the repository's ``conf/`` otherwise.
CONF_DIR = _first_dir(RUNNER_DIR / "conf", RUNNER_DIR.parent / "conf")
#: The guides (Markdown): ``runner/docs`` in a wheel, the repository's ``docs/`` otherwise.
DOCS_DIR = _first_dir(RUNNER_DIR / "docs", RUNNER_DIR.parent / "docs")


def bundled_ops_dir() -> Path | None:
    """The folder of the ops shipped inside the runner (a wheel's ``runner/_ops``, or the
    repository's ``ops/`` through an editable install's mapping); None in a plain checkout
    run with ``PYTHONPATH``, where ``ops`` is the repository's top-level package."""
    try:
        spec = importlib.util.find_spec(BUNDLED_OPS)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]).resolve() if locations else None


class _OpsAlias(importlib.abc.MetaPathFinder):
    """Finds the top-level name ``ops`` in ``folder`` (its submodules then follow the
    package's ``__path__`` as usual), ahead of any other ``ops`` on ``sys.path``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "ops":
            return None
        return importlib.util.spec_from_file_location(
            "ops", self.folder / "__init__.py", submodule_search_locations=[str(self.folder)])


def alias_ops() -> Path:
    """Make ``import ops`` find opsweep's ops, and return their folder (idempotent)."""
    for finder in sys.meta_path:
        if isinstance(finder, _OpsAlias):
            return finder.folder
    folder = bundled_ops_dir()
    if folder is None:  # a checkout: `ops` is the repository's top-level package
        return RUNNER_DIR.parent / "ops"
    sys.meta_path.insert(0, _OpsAlias(folder))
    return folder
