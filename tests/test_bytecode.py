"""The bytecode cache (``runner.core.bytecode``): where a package would be compiled from
source in every process, the first process compiles it into opsweep's cache and later ones
load it; everywhere else Python is left alone."""

from __future__ import annotations

import ast
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from runner.core import bytecode
from runner.core.bytecode import CACHE_ENV, cache_bytecode

REPO = Path(__file__).resolve().parent.parent

#: Run in a fresh ``python -B`` (bytecode writing off, as ``PYTHONDONTWRITEBYTECODE=1``).
PROBE = """
import sys
from runner.core.bytecode import cache_bytecode
print(cache_bytecode("opsweep_fake_pkg"))
import opsweep_fake_pkg
print(opsweep_fake_pkg.__cached__)
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A package with no bytecode beside it; returns the folder that holds it."""
    folder = tmp_path / "site"
    (folder / "opsweep_fake_pkg").mkdir(parents=True)
    (folder / "opsweep_fake_pkg" / "__init__.py").write_text("VALUE = 1\n")
    return folder


@pytest.fixture
def python_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This process's bytecode settings, restored after the test; the cache under tmp."""
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _probe(package: Path, cache_home: Path, *flags: str) -> list[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (CACHE_ENV, "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=os.pathsep.join((str(package), str(REPO))),
               XDG_CACHE_HOME=str(cache_home))
    out = subprocess.run([sys.executable, "-B", *flags, "-c", PROBE], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_the_first_process_compiles_into_the_cache_and_the_next_loads_it(
        package: Path, tmp_path: Path) -> None:
    cache = tmp_path / "xdg" / "opsweep" / "bytecode"
    folder, cached = _probe(package, tmp_path / "xdg")
    assert folder == str(cache)
    assert Path(cached).is_file() and Path(cached).is_relative_to(cache)
    assert not (package / "opsweep_fake_pkg" / "__pycache__").exists(), \
        "nothing is written beside the sources"
    written = Path(cached).stat().st_mtime_ns
    assert _probe(package, tmp_path / "xdg") == [folder, cached]
    assert Path(cached).stat().st_mtime_ns == written, "the second process loaded it"


def test_a_prefix_the_user_set_is_kept(package: Path, tmp_path: Path) -> None:
    own = tmp_path / "own"
    folder, cached = _probe(package, tmp_path / "xdg", "-X", f"pycache_prefix={own}")
    assert folder == str(own)
    assert not (tmp_path / "xdg").exists()


@pytest.mark.usefixtures("python_state")
def test_a_package_with_bytecode_beside_it_is_left_alone(package: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    py_compile.compile(str(package / "opsweep_fake_pkg" / "__init__.py"))
    assert cache_bytecode("opsweep_fake_pkg") is None
    assert sys.pycache_prefix is None and sys.dont_write_bytecode


@pytest.mark.usefixtures("python_state")
def test_a_package_python_may_compile_beside_is_left_alone(package: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert cache_bytecode("opsweep_fake_pkg") is None
    assert sys.pycache_prefix is None


@pytest.mark.usefixtures("python_state")
def test_off_a_folder_or_no_folder(package: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_bytecode("opsweep_fake_pkg") is None and sys.pycache_prefix is None
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))  # cannot be made
    assert cache_bytecode("opsweep_fake_pkg") is None and sys.dont_write_bytecode
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "chosen"))
    assert cache_bytecode("opsweep_fake_pkg") == str(tmp_path / "chosen")
    assert sys.pycache_prefix == str(tmp_path / "chosen") and not sys.dont_write_bytecode


@pytest.mark.usefixtures("python_state")
def test_a_package_not_installed_changes_nothing() -> None:
    assert cache_bytecode("opsweep_no_such_package") is None
    assert sys.pycache_prefix is None
    assert bytecode.default_folder().parts[-2:] == ("opsweep", "bytecode")


def test_the_worker_decides_before_it_imports_torch() -> None:
    """The worker's start (``worker_loop._start``) must call ``cache_bytecode("torch")``
    before ``import torch``: after it, the import would have compiled already."""
    assert _cache_before_torch((REPO / "runner/execution/worker_loop.py").read_text())


def test_planted_late_cache_call_is_caught() -> None:
    late = '''
def _start():
    import torch
    cache = cache_bytecode("torch")
'''
    assert not _cache_before_torch(late)


def _cache_before_torch(source: str) -> bool:
    start = next(node for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef) and node.name == "_start")
    lines = {"call": None, "torch": None}
    for node in ast.walk(start):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "cache_bytecode":
            lines["call"] = node.lineno
        if isinstance(node, ast.Import) and any(a.name == "torch" for a in node.names):
            lines["torch"] = node.lineno
    return None not in lines.values() and lines["call"] < lines["torch"]
