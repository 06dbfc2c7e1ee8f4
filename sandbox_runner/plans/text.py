"""Small text helpers shared by plan validation and reports."""

from __future__ import annotations

import re

CODE_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
"""A line that opens (or closes) a fenced code block, CommonMark's way; group 1 is the fence."""
_LIST_ITEM = re.compile(r"([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)")
_TABLE_RULE = re.compile(r"\|?[\s:|-]*-[\s:|-]*\|?")


def shorten(text: str, limit: int) -> str:
    """Text on one line, cut at a word boundary to at most `limit` characters and an ellipsis."""
    text = " ".join(text[: limit * 4].split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:") + "…"


def section_points(section: str) -> list[str]:
    """A section's points: its top-level list items, else its table rows, else paragraphs."""
    lines = _unfenced_lines(section)
    return _list_items(lines) or _table_rows(lines) or _paragraphs(lines)


def _unfenced_lines(text: str) -> list[str]:
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            fence = None if line.strip().startswith(fence) else fence
        elif opening := CODE_FENCE.match(line):
            fence = opening.group(1)
        else:
            lines.append(line)
    return lines


def _list_items(lines: list[str]) -> list[str]:
    items: list[tuple[int, list[str]]] = []
    for line in lines:
        if item := _LIST_ITEM.match(line):
            items.append((len(item.group(1).expandtabs(4)), [item.group(2)]))
        elif items and line[:1] in (" ", "\t") and line.strip():
            items[-1][1].append(line.strip())
    top = min((indent for indent, _ in items), default=0)
    return [" ".join(parts) for indent, parts in items if indent == top and "".join(parts)]


def _table_rows(lines: list[str]) -> list[str]:
    rows = [line.strip() for line in lines if line.strip().startswith("|")]
    if len(rows) > 1 and _TABLE_RULE.fullmatch(rows[1]):
        rows = rows[2:]  # the header row and the rule below it
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return [" — ".join(filter(None, row)) for row in cells if any(row)]


def _paragraphs(lines: list[str]) -> list[str]:
    paragraphs = "\n".join(line.lstrip("#").strip() for line in lines).split("\n\n")
    return [paragraph.strip() for paragraph in paragraphs if paragraph.strip()]
