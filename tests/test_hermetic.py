"""Tests depend on nothing outside their own tmp dir: no test names a fixed path under the
system's temporary folder (a file left there by earlier work made a test pass on one machine
and fail on a fresh one). Use ``tmp_path``."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: a literal fixed temporary path: the folder with a slash after it, as a file:// URL, or
#: alone in quotes (spelled in pieces here so this file does not match itself)
FIXED_TMP = re.compile("(?:file://)?" + "/" + "tmp" + r"(?:/|(?=[\"'\s\]]))")


def fixed_tmp_paths(folder: Path) -> list[str]:
    """``file:line: text`` of every line under ``folder`` that names a fixed temporary path."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FIXED_TMP.search(line):
                found.append(f"{path.relative_to(folder)}:{number}: {line.strip()}")
    return found


def test_no_test_names_a_fixed_tmp_path() -> None:
    assert fixed_tmp_paths(TESTS) == [], "use tmp_path, not a fixed path"


def test_the_check_finds_a_planted_fixed_path(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(
        "def test_x():\n"
        "    open('" + "/" + "tmp/leftover.yaml')\n"
        "    searchpath = 'file://" + "/" + "tmp/exp'\n"
        "    ok = tmp_path / 'fine'\n")
    found = fixed_tmp_paths(tmp_path)
    assert [f.split(":")[1] for f in found] == ["2", "3"], found
