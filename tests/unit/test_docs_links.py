"""Every link between the user docs resolves: the page exists, and its anchor names a
heading of that page as GitHub spells heading anchors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([A-Za-z0-9_./-]*\.md)?(?:#([^)\s]+))?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of PAGE's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        name, n = slug, 1
        while name in found:
            name, n = f"{slug}-{n}", n + 1
        found.add(name)
    return found


def links(page: Path) -> list[tuple[str, str]]:
    """(target page, anchor) of each Markdown link to a page or an anchor, code left out."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [(target or "", anchor or "") for target, anchor in LINK.findall(text)]


def test_the_anchor_rule_matches_githubs() -> None:
    page = ROOT / "docs" / "plan.md"
    assert {"budgets-and---dry-run", "handing-a-plan-on"} <= anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_names_a_page_and_a_heading_that_exist(page: Path) -> None:
    broken = []
    for target, anchor in links(page):
        linked = (page.parent / target).resolve() if target else page
        if not linked.is_file():
            broken.append(f"{target}: no such page")
        elif anchor and anchor not in anchors(linked):
            broken.append(f"{target}#{anchor}: no such heading")
    assert broken == []
