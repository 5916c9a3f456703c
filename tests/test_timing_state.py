"""How a trial is timed reads as one story with its state in the open: in ``runner/timing``
and ``runner/execution/timed.py`` no module keeps trial state in a global (what a trial hands
to the next is the worker's ``runner.execution.timed.WorkerTiming``). The rule that no
function takes more than eight parameters holds for all of ``runner`` and is part of the
package's contract (``tests/test_architecture.py``).

Caches of per-process CUDA resources are named in :data:`CACHES` with their reason, so the
list can only shrink. Each rule is tested on a copy of the tree with a violation planted in
it.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: ``module:name`` -> why a module-level mutable value is a cache, not trial state.
CACHES: dict[str, str] = {
    "timing/cuda_device.py:_CAPTURE_STREAMS": "one side stream per device and process",
    "timing/cuda_device.py:_CYCLES_PER_S": "the GPU's clock rate, read once per process",
    "timing/cuda_device.py:_PINNED": "pinned host buffers reused by every chunk",
    "timing/clock_probe.py:_PROBES": "the loaded clock probe, once per device and process",
}
#: Calls at module level that build a value nobody can change: anything else built there
#: (a dict, a deque, an instance of a class of ours) is state.
IMMUTABLE_CALLS = {"MappingProxyType", "frozenset", "tuple", "TypeVar", "compile"}


def timing_modules(runner: Path) -> list[Path]:
    return sorted((runner / "timing").glob("*.py")) + [runner / "execution" / "timed.py"]


def _mutable(value: ast.AST | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                          ast.SetComp)):
        return True
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name not in IMMUTABLE_CALLS


def violations(runner: Path) -> list[str]:
    out = []
    for path in timing_modules(runner):
        rel = path.relative_to(runner).as_posix()
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if (isinstance(target, ast.Name) and _mutable(node.value)
                        and f"{rel}:{target.id}" not in CACHES):
                    out.append(f"runner/{rel}: module global {target.id} holds mutable state: "
                               "keep it in the worker's WorkerTiming and pass it in")
    return out


def test_timing_keeps_no_trial_state_in_globals() -> None:
    assert violations(ROOT / "runner") == []


def test_every_named_cache_still_exists() -> None:
    """CACHES only shrinks: an entry whose global is gone must go too."""
    names = set()
    for path in timing_modules(ROOT / "runner"):
        rel = path.relative_to(ROOT / "runner").as_posix()
        tree = ast.parse(path.read_text())
        names.update({f"{rel}:{t.id}" for node in tree.body
                      if isinstance(node, (ast.Assign, ast.AnnAssign))
                      for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                      if isinstance(t, ast.Name)})
    for entry in CACHES:
        assert entry in names, f"drop {entry} from CACHES"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    target = tmp_path / "runner"
    shutil.copytree(ROOT / "runner", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.parametrize("planted", ["_HEAT: dict[str, object] = {}", "_HEAT = DeviceHeat()",
                                     "_STATE = WorkerTiming()"])
def test_a_planted_heat_global_is_caught(tree: Path, planted: str) -> None:
    path = tree / "execution" / "timed.py"
    path.write_text(path.read_text() + f"\n{planted}\n")
    name = planted.split(":")[0].split(" ")[0]
    assert violations(tree) == [f"runner/execution/timed.py: module global {name} holds "
                                "mutable state: keep it in the worker's WorkerTiming and pass "
                                "it in"]
