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
from runner.core.bytecode import CACHE_ENV, cache_bytecode, setting_error

REPO = Path(__file__).resolve().parent.parent

#: Run in a fresh ``python -B`` (bytecode writing off, as ``PYTHONDONTWRITEBYTECODE=1``).
PROBE = """
import os, sys
from runner.core.bytecode import cache_bytecode
print(cache_bytecode("opsweep_fake_pkg"))
import opsweep_fake_pkg
print(opsweep_fake_pkg.__cached__)
print(os.environ.get("PYTHONPYCACHEPREFIX"))
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
    return out.stdout.split()[:2]


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


def test_a_prefix_the_user_set_is_kept_and_handed_to_the_workers(package: Path,
                                                                  tmp_path: Path) -> None:
    own = tmp_path / "own"
    env = {k: v for k, v in os.environ.items()
           if k not in (CACHE_ENV, "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=os.pathsep.join((str(package), str(REPO))),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    out = subprocess.run([sys.executable, "-B", "-X", f"pycache_prefix={own}", "-c", PROBE],
                         env=env, capture_output=True, text=True, timeout=120)
    folder, cached, exported = out.stdout.split()
    assert folder == str(own) and Path(cached).is_relative_to(own)
    assert exported == str(own), "a spawned worker gets -B, not -X: the environment says it"
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
def test_a_package_folder_python_cannot_write_to_is_cached(
        package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source = str(package / "opsweep_fake_pkg")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == source
                        else real_access(path, mode))
    assert cache_bytecode("opsweep_fake_pkg") == str(tmp_path / "xdg/opsweep/bytecode")


@pytest.mark.usefixtures("python_state")
def test_a_cache_folder_python_cannot_write_to_is_not_used(
        package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worse than none: the prefix holds for every later import, so modules with a fine
    ``__pycache__`` would compile in every process."""
    monkeypatch.syspath_prepend(str(package))
    cache = tmp_path / "xdg/opsweep/bytecode"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == cache
                        else real_access(path, mode))
    assert cache_bytecode("opsweep_fake_pkg") is None
    assert sys.pycache_prefix is None and sys.dont_write_bytecode


@pytest.mark.usefixtures("python_state")
def test_no_home_folder_means_no_cache_not_an_error(
        package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.delenv("XDG_CACHE_HOME")

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert cache_bytecode("opsweep_fake_pkg") is None and sys.pycache_prefix is None


@pytest.mark.usefixtures("python_state")
@pytest.mark.parametrize("value", ["off", "OFF ", "0", "false", "no", "none"])
def test_every_way_of_saying_off(package: Path, monkeypatch: pytest.MonkeyPatch,
                                 value: str) -> None:
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setenv(CACHE_ENV, value)
    assert cache_bytecode("opsweep_fake_pkg") is None and sys.pycache_prefix is None


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
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CACHE_ENV, "relative")  # made absolute: later imports may chdir
    assert cache_bytecode("opsweep_fake_pkg") == str(tmp_path / "relative")


@pytest.mark.usefixtures("python_state")
def test_a_package_not_installed_changes_nothing() -> None:
    assert cache_bytecode("opsweep_no_such_package") is None
    assert sys.pycache_prefix is None
    assert bytecode.default_folder().parts[-2:] == ("opsweep", "bytecode")


def test_the_worker_decides_before_it_imports_torch() -> None:
    """The worker's start (``worker_loop._start``) must call ``cache_bytecode("torch")``
    before ``import torch``: after it, the import would have compiled already."""
    source = (REPO / "runner/execution/worker_loop.py").read_text()
    assert _called_before_import(_function(source, "_start"), "torch")


def test_the_driver_decides_before_it_imports_hydra() -> None:
    source = (REPO / "runner/__main__.py").read_text()
    assert _called_before_import(ast.parse(source), "hydra")


def test_planted_late_cache_call_is_caught() -> None:
    late = '''
def _start():
    import torch
    cache = cache_bytecode("torch")
'''
    assert not _called_before_import(_function(late, "_start"), "torch")
    assert not _called_before_import(ast.parse("import hydra\ncache_bytecode('hydra')\n"),
                                     "hydra")


def _function(source: str, name: str) -> ast.AST:
    return next(node for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.FunctionDef) and node.name == name)


def _called_before_import(tree: ast.AST, package: str) -> bool:
    """Whether ``tree`` calls ``cache_bytecode(package)`` on a line before its first
    ``import package``."""
    calls = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "cache_bytecode"
             and [getattr(a, "value", None) for a in node.args] == [package]]
    imports = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Import)
               and any(alias.name.split(".")[0] == package for alias in node.names)]
    return bool(calls and imports) and min(calls) < min(imports)


@pytest.mark.usefixtures("python_state")
def test_a_cache_folder_that_cannot_be_had_is_named_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("", "off", " False ", str(tmp_path / "fine")):
        monkeypatch.setenv(CACHE_ENV, value)
        assert setting_error() is None, value
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    message = setting_error()
    assert message.startswith(f"{CACHE_ENV}={blocker / 'cache'}: the folder cannot be made")
    assert "expected a folder this user may write to, or one of 0, false, no, none, off" \
        in message


def test_the_command_refuses_it_before_anything_runs(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, CACHE_ENV: str(blocker / "cache"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    out = subprocess.run([sys.executable, "-m", "runner", "op=matmul", "device=cpu"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"opsweep: error: {CACHE_ENV}={blocker / 'cache'}: the folder cannot be made" \
        in out.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "outputs").exists()
