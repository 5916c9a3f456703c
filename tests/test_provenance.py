"""Rows say which version of the code they timed: opsweep's commit, and the commit of the
user's own repository when ``op.target`` / ``_target_`` lives there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner.execution import environment


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


@pytest.fixture
def user_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "userproj" / "userkernels"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "fast.py").write_text("def fn(a, b):\n    return a * b\n")
    _git(package.parent, "init", "-q")
    _git(package.parent, "add", ".")
    _git(package.parent, "commit", "-qm", "first")
    monkeypatch.syspath_prepend(str(package.parent))
    environment._repository_provenance.cache_clear()
    yield package
    sys.modules.pop("userkernels", None)
    sys.modules.pop("userkernels.fast", None)
    environment._repository_provenance.cache_clear()


def test_user_code_in_another_repository_records_its_commit_and_dirt(user_repo: Path) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=user_repo, text=True,
                          capture_output=True, check=True).stdout.strip()
    found = environment.user_code_provenance("userkernels.fast:fn", "ops.custom.build")
    assert found == {"user_git_commit": head, "user_git_dirty": False}
    (user_repo / "fast.py").write_text("def fn(a, b):\n    return a + b\n")
    environment._repository_provenance.cache_clear()
    assert environment.user_code_provenance("userkernels.fast.fn")["user_git_dirty"] is True


def test_opsweep_own_ops_and_unknown_modules_leave_the_user_columns_null() -> None:
    empty = {"user_git_commit": None, "user_git_dirty": None}
    assert environment.user_code_provenance("", "ops.matmul.build") == empty
    assert environment.user_code_provenance("no_such_module_xyz:fn") == empty
