"""The README is a short front page that leads to every page of docs/, and no link is broken.

A newcomer reads the README first: it must fit a sitting (:data:`README_MAX_LINES`), open with
a table of contents whose entries are its own sections, say how long ``make test`` takes and
that ``make test-fast`` exists, and link every page of ``docs/``. Every relative link in the
README and the docs must name a file that exists and, with ``#anchor``, a heading in it (as
GitHub spells anchors), so a section moved between pages cannot leave a dead link behind.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 250
PAGES = sorted([README, *ROOT.glob("docs/*.md")])
#: ``[text](target)`` outside code; images too (``![alt](target)``)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return LINK.findall(text)


def test_the_readme_is_a_short_front_page_with_a_table_of_contents() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    start = lines.index("## Contents")
    entries = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        entries += re.findall(r"\]\(#([^)]+)\)", line)
    sections = [anchor(line[3:]) for line in lines if line.startswith("## ")]
    assert entries and set(entries) <= set(sections)
    assert [s for s in sections if s != "contents"] == entries, "the contents and the sections"


def test_the_readme_gives_the_two_commands_and_what_make_test_costs() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make run" in text and "make test " in text
    assert re.search(r"make test.*\d+.\d* minutes", text), "how long make test takes"
    assert "make test-fast" in text


def test_the_readme_links_every_page_of_the_docs_and_shows_pictures() -> None:
    targets = {target.split("#")[0] for target in links(README)}
    for page in ROOT.glob("docs/*.md"):
        assert f"docs/{page.name}" in targets, f"README.md does not link docs/{page.name}"
    pictures = [t for t in targets if t.endswith(".png")]
    assert len(pictures) >= 3 and all(not t.startswith(("/", "http")) for t in pictures)


def test_every_relative_link_names_a_file_and_a_heading_that_exist() -> None:
    broken = []
    for page in PAGES:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, fragment = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and path.suffix == ".md" and fragment not in anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken
