"""The package layout is a contract: each part imports only what its docstring allows.

The rules, checked by :func:`violations` on a source tree:

* **layers**: each part of ``runner`` imports only the parts listed in :data:`ALLOWED` (all
  below it), so nothing imports upward and the read side takes from the run side only the
  storage schema;
* **no circles**: no module of ``runner`` reaches itself through imports (late imports inside
  functions count too);
* **torch**: the read side (storage, analysis, claims) never imports torch; ``core``,
  ``config`` and ``timing`` only inside a function (``--help`` and the override checks stay
  fast, and the timer runs with fake clocks);
* **size**: a module has at most :data:`MAX_LINES` lines, unless :data:`LARGE` names it with
  its reason.
* **function size**: a function (or method) has at most :data:`MAX_FUNCTION_LINES` lines,
  its docstring included, unless :data:`LONG_FUNCTIONS` names it with its reason.
* **parameters**: no function (or method, nested ones included) takes more than
  :data:`MAX_PARAMETERS` parameters: a frozen plan object carries the rest.
* **one event-timing and graph-capture path**: only :data:`CUDA_TIMING_MADE_IN` names
  ``torch.cuda.Event``, ``torch.cuda.CUDAGraph`` or ``torch.cuda.graph``; every other timer
  (the loop time's event clock, the energy window) goes through it
  (:func:`cuda_timing_makers`).

The rules are tested themselves: each ``test_planted_*`` breaks a copy of the tree on purpose
and asserts that :func:`violations` says so. ``docs/architecture.md`` draws the same picture.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "runner"

#: The commands: thin modules beside the packages (each hands over to one package's main).
COMMANDS = ("__main__", "__init__", "check", "collect", "compare", "experiments", "export",
            "history", "report", "resume")
#: part -> the ``runner`` modules it may import (prefixes). A part is a package of ``runner``
#: or a module beside them; every part may import itself. Listed bottom-up.
ALLOWED: dict[str, tuple[str, ...]] = {
    "core": (),
    "cli": (),
    "timing": (),
    "console": ("runner.core",),
    "summary_table": (),
    "storage": ("runner.core",),
    "analysis": ("runner.storage", "runner.core", "runner.cli", "runner.timing.spread"),
    "claims": ("runner.analysis", "runner.storage", "runner.core", "runner.cli",
               "runner.console"),
    "config": ("runner.core", "runner.timing.measurement", "runner.claims.spec",
               "runner.storage"),
    "execution": ("runner.config", "runner.claims", "runner.analysis", "runner.storage",
                  "runner.timing", "runner.core", "runner.console", "runner.summary_table",
                  "runner.cli"),
    **{command: ("runner",) for command in COMMANDS},
}
#: No torch at all: the read side loads results anywhere, fast.
TORCH_NEVER = ("storage", "analysis", "claims", "console", "summary_table", "cli")
#: torch only inside a function (device resolution, the CUDA clocks).
TORCH_LATE = ("core", "config", "timing")

MAX_LINES = 300
#: Modules allowed over MAX_LINES, each with its reason.
LARGE: dict[str, str] = {}


MAX_FUNCTION_LINES = 60
#: Functions allowed over MAX_FUNCTION_LINES (``module path:qualified name``), each with its
#: reason.
LONG_FUNCTIONS: dict[str, str] = {}


#: The most parameters a function takes (``self`` and ``cls`` not counted).
MAX_PARAMETERS = 8


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    named = [a.arg for a in args.posonlyargs + args.args]
    count = len(named) + len(args.kwonlyargs) + bool(args.vararg) + bool(args.kwarg)
    return count - (named[:1] in (["self"], ["cls"]))


def definitions(path: Path) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(qualified name, node)`` of every function and method of ``path``, nested ones
    included (``Outer.method.inner``)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return found


def functions(path: Path) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every function of ``path`` (:func:`definitions`); lines
    from ``def`` to the last, docstring included."""
    return [(name, node.end_lineno - node.lineno + 1) for name, node in definitions(path)]


def wide_functions(path: Path) -> list[tuple[str, int]]:
    """``(qualified name, parameters)`` of every function of ``path`` that takes more than
    :data:`MAX_PARAMETERS`."""
    return [(name, parameter_count(node)) for name, node in definitions(path)
            if parameter_count(node) > MAX_PARAMETERS]


def part_of(path: Path, runner: Path) -> str:
    rel = path.relative_to(runner)
    return rel.parts[0] if len(rel.parts) > 1 else path.stem


def module_name(path: Path, runner: Path) -> str:
    rel = path.relative_to(runner.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path, runner: Path) -> list[tuple[str, bool]]:
    """``(imported name, inside a function)`` for every import of ``path``; ``from a import b``
    gives ``a`` and ``a.b`` (``b`` may be a module); relative imports are resolved."""
    tree = ast.parse(path.read_text())
    package = module_name(path, runner)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, late: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = late or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, late) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join([*base, module] if module else base)
                found.append((module, late))
                found.extend((f"{module}.{alias.name}", late) for alias in child.names)
            visit(child, inner)

    visit(tree, False)
    return found


def _is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return out


def violations(runner: Path) -> list[str]:
    """Every break of the rules in the tree at ``runner`` (a ``runner`` package folder)."""
    out: list[str] = []
    files = sorted(runner.rglob("*.py"))
    modules = {module_name(p, runner) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        rel = path.relative_to(runner).as_posix()
        part = part_of(path, runner)
        allowed = (f"runner.{part}", *ALLOWED.get(part, ()))
        if part not in ALLOWED:
            out.append(f"runner/{rel}: part '{part}' is not in the import contract (ALLOWED)")
        me = module_name(path, runner)
        for name, late in imports(path, runner):
            if _is_torch(name) and (part in TORCH_NEVER or (part in TORCH_LATE and not late)):
                where = "at all" if part in TORCH_NEVER else "at the top of a module"
                out.append(f"runner/{rel} imports torch; runner.{part} may not {where}")
            if name in modules and name != me:
                graph.setdefault(me, set()).add(name)
            if (name.startswith("runner.") and "runner" not in allowed
                    and not any(name == a or name.startswith(a + ".") for a in allowed)):
                out.append(f"runner/{rel} imports {name}: an import upward or sideways; "
                           f"{part} may import only {', '.join(allowed)}")
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in LARGE:
            out.append(f"runner/{rel} has {lines} lines (> {MAX_LINES}): split it, or name it "
                       "in LARGE with the reason")
        for name, length in functions(path):
            if length > MAX_FUNCTION_LINES and f"{rel}:{name}" not in LONG_FUNCTIONS:
                out.append(f"runner/{rel}: {name} has {length} lines (> {MAX_FUNCTION_LINES}): "
                           "split it, or name it in LONG_FUNCTIONS with the reason")
        for name, count in wide_functions(path):
            out.append(f"runner/{rel}: {name} takes {count} parameters (> {MAX_PARAMETERS}): "
                       "pass a frozen plan object")
    for cycle in _cycles(graph):
        out.append(f"import circle: {' -> '.join(cycle)}")
    return out


#: The run side, where a trial axis travels from the command line to its column.
RUN_SIDE = ("__main__.py", "config", "core", "execution", "storage")
#: The only run-side modules that name the ``graph`` axis's value (``GraphMode``,
#: ``spec.graph``): its declaration, the spec's typed field, and the one place the modes act
#: on it. Every other station of its walk (docs/architecture.md) handles every axis alike,
#: through the registry.
GRAPH_AXIS_NAMED_IN = frozenset({"core/axes.py", "config/trials.py", "execution/modes.py"})
#: The one module that checks an axis value (``Axis.check``, through ``AXES_BY_NAME``).
AXIS_CHECKED_IN = frozenset({"config/planner.py"})
#: Modules that carry a trial's task without opening its spec's axes.
CARRIERS = frozenset({"execution/task.py", "execution/worker.py", "execution/worker_loop.py"})


def axis_readers(runner: Path) -> dict[str, set[str]]:
    """``{"graph": modules naming the graph axis, "check": modules checking an axis value,
    "spec": modules reading an axis of a spec}`` over the run side of ``runner``."""
    from runner.core.axes import AXIS_NAMES

    found: dict[str, set[str]] = {"graph": set(), "check": set(), "spec": set()}
    for path in sorted(runner.rglob("*.py")):
        rel = path.relative_to(runner).as_posix()
        if not rel.startswith(RUN_SIDE):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "GraphMode":
                found["graph"].add(rel)
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            of_spec = (isinstance(owner, ast.Name) and owner.id == "spec"
                       or isinstance(owner, ast.Attribute) and owner.attr == "spec")
            if of_spec and node.attr == "graph":
                found["graph"].add(rel)
            if of_spec and node.attr in AXIS_NAMES:
                found["spec"].add(rel)
            if (node.attr == "check" and isinstance(owner, ast.Subscript)
                    and isinstance(owner.value, ast.Name) and owner.value.id == "AXES_BY_NAME"):
                found["check"].add(rel)
    return found


#: The one module that makes CUDA events and graphs (``runner.timing.cuda_device``).
CUDA_TIMING_MADE_IN = frozenset({"timing/cuda_device.py"})
#: What only it may name, as attributes of ``torch.cuda`` (or imported from it).
CUDA_TIMING_NAMES = frozenset({"Event", "CUDAGraph", "graph"})


def cuda_timing_makers(runner: Path) -> dict[str, list[int]]:
    """``{module: lines}`` of every module under ``runner`` whose code names
    ``torch.cuda.Event``, ``torch.cuda.CUDAGraph`` or ``torch.cuda.graph`` (as ``cuda.X`` of
    any owner, ``X`` imported from ``torch.cuda``, or ``CUDAGraph`` anywhere). Comments and
    docstrings do not count: only the code that could make one."""
    found: dict[str, list[int]] = {}
    for path in sorted(runner.rglob("*.py")):
        rel = path.relative_to(runner).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            named = False
            if isinstance(node, ast.Attribute):
                owner = node.value
                of_cuda = (isinstance(owner, ast.Attribute) and owner.attr == "cuda"
                           or isinstance(owner, ast.Name) and owner.id == "cuda")
                named = node.attr == "CUDAGraph" or of_cuda and node.attr in CUDA_TIMING_NAMES
            elif isinstance(node, ast.Name):
                named = node.id == "CUDAGraph"
            elif isinstance(node, ast.ImportFrom) and node.module == "torch.cuda":
                named = any(alias.name in CUDA_TIMING_NAMES for alias in node.names)
            if named:
                found.setdefault(rel, []).append(node.lineno)
    return found


# ---------------------------------------------------------------------------------------
# The contract holds on the tree
# ---------------------------------------------------------------------------------------

def test_the_tree_keeps_the_import_contract() -> None:
    assert violations(RUNNER) == []


def test_cuda_events_and_graphs_are_made_in_one_module() -> None:
    """The device time, the loop time's event clock and the energy window share one path for
    CUDA events and graph capture (``runner.timing.cuda_device``)."""
    found = cuda_timing_makers(RUNNER)
    assert set(found) == CUDA_TIMING_MADE_IN, {
        rel: lines for rel, lines in found.items() if rel not in CUDA_TIMING_MADE_IN}


def test_the_allowed_layers_have_no_circle() -> None:
    """ALLOWED itself runs one way: no part may import a part that may import it back."""
    graph = {part: {a.split(".")[1] for a in allowed if a != "runner"}
             for part, allowed in ALLOWED.items()}
    assert _cycles(graph) == []


def test_every_large_module_exists_and_is_large() -> None:
    for rel in LARGE:
        path = RUNNER / rel
        assert path.is_file(), f"LARGE names runner/{rel}, which does not exist"
        assert len(path.read_text().splitlines()) > MAX_LINES, \
            f"runner/{rel} is back under {MAX_LINES} lines: drop it from LARGE"


def test_every_long_function_exists_and_is_long() -> None:
    for key in LONG_FUNCTIONS:
        rel, _, name = key.partition(":")
        path = RUNNER / rel
        lengths = dict(functions(path)) if path.is_file() else {}
        assert name in lengths, f"LONG_FUNCTIONS names {key}, which does not exist"
        assert lengths[name] > MAX_FUNCTION_LINES, \
            f"{key} is back under {MAX_FUNCTION_LINES} lines: drop it from LONG_FUNCTIONS"


@pytest.mark.slow
def test_read_side_loads_without_torch() -> None:
    modules = [f"runner.{p}.{m.stem}" for p in ("analysis", "claims", "storage")
               for m in sorted((RUNNER / p).glob("*.py")) if m.stem != "__init__"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_the_trial_code_loads_without_hydra_or_omegaconf() -> None:
    """A worker imports the trial code before its first trial: Hydra and OmegaConf there cost
    ~0.3 s of every sweep's start-up (runner.config.trial_settings)."""
    code = ("import sys\nimport runner.execution.worker_loop, runner.execution.trial\n"
            "from runner.config.ops import resolve_target\n"
            "print(sorted(m for m in ('hydra', 'omegaconf') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_package_docstring_says_what_it_may_import() -> None:
    for init in sorted(RUNNER.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "May import" in doc, init.relative_to(ROOT)


def test_commands_are_thin() -> None:
    """``python -m runner.X``: a few lines handing over to one package's ``main``."""
    for name in COMMANDS:
        path = RUNNER / f"{name}.py"
        if name in ("__main__", "__init__") or not path.exists():
            continue
        packages = {n.split(".")[1] for n, _ in imports(path, RUNNER) if n.startswith("runner.")}
        assert len(packages) == 1 and len(path.read_text().splitlines()) <= 10, path


def test_an_axis_walks_through_few_hands() -> None:
    """The walk of an axis (docs/architecture.md, "The walk of one axis"): its value is checked
    in one module, named in its declaration, the spec and the modes only, and never read by
    the modules that carry a trial to its worker."""
    found = axis_readers(RUNNER)
    assert found["check"] == AXIS_CHECKED_IN
    assert found["graph"] == GRAPH_AXIS_NAMED_IN
    assert not found["spec"] & CARRIERS


# ---------------------------------------------------------------------------------------
# The contract test fails when the contract is broken: plant a break in a copy
# ---------------------------------------------------------------------------------------

@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "runner"
    shutil.copytree(RUNNER, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def plant(copy: Path, rel: str, line: str, *, at_top: bool = False) -> None:
    path = copy / rel
    text = path.read_text()
    path.write_text(line + "\n" + text if at_top else text + "\n" + line + "\n")


@pytest.mark.slow
def test_planted_upward_import_is_caught(copy: Path) -> None:
    plant(copy, "timing/stats.py", "import runner.console")
    assert any("runner/timing/stats.py imports runner.console" in v for v in violations(copy))


@pytest.mark.slow
def test_planted_read_side_import_of_the_run_side_is_caught(copy: Path) -> None:
    plant(copy, "storage/columns.py", "from runner.execution import trial")
    assert any("runner/storage/columns.py imports runner.execution" in v
               for v in violations(copy))


@pytest.mark.slow
def test_planted_torch_on_the_read_side_is_caught(copy: Path) -> None:
    plant(copy, "analysis/values.py", "def later():\n    import torch")
    assert any("runner/analysis/values.py imports torch" in v for v in violations(copy))


@pytest.mark.slow
def test_planted_top_level_torch_in_core_and_config_is_caught(copy: Path) -> None:
    plant(copy, "core/errors.py", "import torch", at_top=True)
    plant(copy, "config/trials.py", "import torch.nn")
    found = violations(copy)
    assert any("runner/core/errors.py imports torch" in v for v in found)
    assert any("runner/config/trials.py imports torch" in v for v in found)


@pytest.mark.slow
def test_torch_inside_a_function_of_config_is_allowed(copy: Path) -> None:
    plant(copy, "config/trials.py", "def later():\n    import torch")
    assert violations(copy) == []


@pytest.mark.slow
def test_planted_circle_is_caught(copy: Path) -> None:
    plant(copy, "analysis/figure.py", "def later():\n    from runner.analysis import plots")
    assert any("import circle" in v and "runner.analysis.plots" in v
               for v in violations(copy))


@pytest.mark.slow
def test_planted_long_module_is_caught(copy: Path) -> None:
    plant(copy, "storage/lock.py", "\n".join(["pass"] * MAX_LINES))
    assert any("runner/storage/lock.py has" in v for v in violations(copy))


@pytest.mark.slow
def test_planted_long_function_is_caught(copy: Path) -> None:
    """A method of MAX_FUNCTION_LINES + 1 lines is caught; a function of exactly
    MAX_FUNCTION_LINES is not."""
    plant(copy, "storage/columns.py", "class Planted:\n    def grown(self):\n"
          + "        x = 1\n" * MAX_FUNCTION_LINES)
    plant(copy, "storage/layout.py", "def fits():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))
    found = violations(copy)
    assert any(f"runner/storage/columns.py: Planted.grown has {MAX_FUNCTION_LINES + 1} lines"
               in v for v in found)
    assert not any("fits" in v for v in found)


@pytest.mark.slow
def test_planted_nine_parameter_function_is_caught(copy: Path) -> None:
    """Nine parameters are caught anywhere, a method's nested helper too; eight pass."""
    plant(copy, "timing/settle.py", "class Planted:\n    def outer(self):\n"
          "        def wide(a, b, c, d, e, f, g, h, *, i=None):\n            return a\n"
          "        return wide\n")
    plant(copy, "storage/layout.py", "def fits(self_, b, c, d, e, f, g, *rest):\n    return b\n")
    found = violations(copy)
    assert ("runner/timing/settle.py: Planted.outer.wide takes 9 parameters (> 8): "
            "pass a frozen plan object") in found
    assert not any("fits" in v for v in found)


@pytest.mark.slow
def test_planted_unknown_part_is_caught(copy: Path) -> None:
    (copy / "helpers.py").write_text("import runner.execution.job\n")
    assert any("part 'helpers'" in v for v in violations(copy))


@pytest.mark.slow
def test_planted_axis_readers_are_caught(copy: Path) -> None:
    plant(copy, "config/overrides.py", "def again(value):\n"
          "    from runner.core.axes import AXES_BY_NAME\n"
          "    return AXES_BY_NAME['graph'].check(value)")
    plant(copy, "execution/worker.py", "def peek(task):\n    return task.spec.graph")
    found = axis_readers(copy)
    assert found["check"] == AXIS_CHECKED_IN | {"config/overrides.py"}
    assert "execution/worker.py" in found["graph"] & found["spec"]


@pytest.mark.parametrize("planted", [
    "start = torch.cuda.Event(enable_timing=True)",
    "end = self._torch.cuda.Event(enable_timing=True)",
    "graph = torch.cuda.CUDAGraph()",
    "with torch.cuda.graph(graph, stream=stream):\n    fn()",
    "from torch.cuda import Event",
    "from torch.cuda import CUDAGraph",
])
def test_planted_cuda_event_or_graph_outside_the_timing_device_is_caught(
        tmp_path: Path, planted: str) -> None:
    """A second event-timing or capture path, as the energy window once had, is caught: the
    same scan run on a tree with one module that makes its own."""
    runner = tmp_path / "runner"
    (runner / "execution").mkdir(parents=True)
    (runner / "execution" / "planted.py").write_text(
        '"""torch.cuda.Event in a docstring is no code."""\n'
        "import torch\n\n\ndef chunk(fn, graph, stream):\n"
        + "".join(f"    {line}\n" for line in planted.splitlines()))
    (runner / "execution" / "clean.py").write_text(
        "import torch\n\n\ndef wait(device):\n"
        "    torch.cuda.synchronize(device)  # torch.cuda.Event in a comment is no code\n")
    assert set(cuda_timing_makers(runner)) == {"execution/planted.py"}
