"""Comments that name code name code that exists.

Read statically (nothing is imported): every ``runner.x.y`` / ``ops.x.y`` dotted name in the
comments and strings of ``runner/`` and ``ops/`` and in the docs, every ``runner/...py`` path,
and every backticked ``module.name`` or ``Class.member`` whose first part is a module or class
of the package, must resolve to a module, a definition in it, or a member of a class.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("runner/**/*.py"), *ROOT.glob("ops/*.py")])
#: docs that quote bad input on purpose (the error catalogue) are not read
DOCS = sorted(p for p in [ROOT / "README.md", *ROOT.glob("docs/*.md")]
              if p.name != "errors.md")
#: first parts that are config groups, not modules (``timer.clock`` is a config key)
CONFIG_GROUPS = {p.name for p in (ROOT / "conf").iterdir() if p.is_dir()} | {"hydra"}
FILE_SUFFIXES = {"py", "yaml", "md", "parquet", "csv", "json", "png", "html", "txt", "so"}

FULL = re.compile(r"(?<![\w./-])((?:runner|ops)(?:\.[A-Za-z_]\w*)+)")
SHORT = re.compile(r"`+[~!]?([A-Za-z_]\w*)\.([A-Za-z_]\w*)")
PATH = re.compile(r"(?<![\w./-])((?:runner|ops)/[\w/]+\.py)\b")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SOURCES}


@cache
def definitions(module: str) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """The top-level names of a module (definitions, assignments, imports, ``__all__``) and
    the members of each of its classes."""
    names: set[str] = set()
    classes: dict[str, frozenset[str]] = {}
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            members: set[str] = set()
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(sub.name)
                elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                    members.add(sub.target.id)
                elif isinstance(sub, ast.Assign):
                    members.update(t.id for t in sub.targets if isinstance(t, ast.Name))
            classes[node.name] = frozenset(members)
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            names.update(targets)
            if "__all__" in targets:
                names.update(ast.literal_eval(node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names), classes


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    cut = next((c for c in range(len(parts), 0, -1) if ".".join(parts[:c]) in MODULES), 0)
    if not cut:
        return False
    module, rest = ".".join(parts[:cut]), parts[cut:]
    if not rest:
        return True
    names, classes = definitions(module)
    if rest[0] not in names:
        return False
    return len(rest) == 1 or rest[0] not in classes or rest[1] in classes[rest[0]]


STEMS: dict[str, list[str]] = {}
CLASSES: dict[str, list[str]] = {}
for _module in MODULES:
    STEMS.setdefault(_module.rpartition(".")[2], []).append(_module)
    for _cls in definitions(_module)[1]:
        CLASSES.setdefault(_cls, []).append(_module)


def texts(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of each comment and string of a source file, or each line of a doc."""
    if path.suffix != ".py":
        return list(enumerate(path.read_text().splitlines(), 1))
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens
            if t.type in (tokenize.COMMENT, tokenize.STRING)]


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def unresolved(path: Path) -> list[str]:
    out = []
    for line, text in texts(path):
        for match in FULL.finditer(text):
            name = match.group(1)
            if name.rpartition(".")[2] not in FILE_SUFFIXES and not resolves(name):
                out.append(f"{_where(path)}:{line}: {name}")
        for match in PATH.finditer(text):
            if not (ROOT / match.group(1)).is_file():
                out.append(f"{_where(path)}:{line}: {match.group(1)}")
        if path.suffix != ".py":
            continue
        for match in SHORT.finditer(text):
            first, second = match.groups()
            if second in FILE_SUFFIXES or first in CONFIG_GROUPS | {"runner", "ops"}:
                continue
            if first in STEMS:
                ok = any(resolves(f"{module}.{second}") for module in STEMS[first])
            elif first in CLASSES:
                ok = any(second in definitions(m)[1][first] for m in CLASSES[first])
            else:
                continue
            if not ok:
                out.append(f"{_where(path)}:{line}: {first}.{second}")
    return out


@pytest.mark.parametrize("path", [*SOURCES, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_named_code_exists(path: Path) -> None:
    assert unresolved(path) == []


def test_stale_names_are_caught(tmp_path: Path) -> None:
    """A planted comment with one stale name of each form, beside live ones."""
    source = tmp_path / "planted.py"
    source.write_text(
        "# runner.storage.files.rows_to_table and runner.results.rows_to_table\n"
        "# runner/timing/timer.py and runner/timer.py\n"
        '"""``journal.write_row``, ``journal.no_such``, ``Axis.check`` and ``Axis.nope``."""\n')
    assert [f.rpartition(": ")[2] for f in unresolved(source)] == [
        "runner.results.rows_to_table", "runner/timer.py", "journal.no_such", "Axis.nope"]
