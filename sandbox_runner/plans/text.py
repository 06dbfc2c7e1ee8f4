"""Small text helpers shared by plan validation and reports."""

from __future__ import annotations

import re
from collections.abc import Sequence

CODE_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
"""A line that may open a fenced code block; group 1 is the fence, group 2 its info string."""
HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
"""An ATX heading line (outside code fences); group 1 is its run of '#'."""
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


def opening_fence(line: str) -> str | None:
    """The fence (e.g. "```" or "~~~~") that `line` opens, or None when it opens none."""
    match = CODE_FENCE.match(line)
    # A backtick fence's info string holds no backtick: "```a`b" is inline code.
    if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
        return None
    return match.group(1)


def closes_fence(line: str, fence: str) -> bool:
    """Whether `line` closes the block that `fence` opened: the same character, at least as
    many, indented at most 3 spaces, and nothing after but spaces."""
    stripped = line.rstrip(" \t")
    body = stripped.lstrip(" ")
    run = len(body) - len(body.lstrip(fence[0]))
    return len(stripped) - len(body) <= 3 and run >= len(fence) and run == len(body)


def fenced_lines(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (its fence lines included).

    CommonMark's rules, the one fence scanner that template loading, plan validation and
    reports share: a block opens with 3 or more backticks or tildes and closes only with
    the same character, at least as many; one left open runs to the end of the text.
    """
    return _scan_fences(lines)[0]


def fence_left_open(lines: Sequence[str]) -> bool:
    """Whether a fenced code block is still open after the last line."""
    return _scan_fences(lines)[1]


def _scan_fences(lines: Sequence[str]) -> tuple[list[bool], bool]:
    fenced: list[bool] = []
    fence: str | None = None
    for line in lines:
        if fence is not None:
            fenced.append(True)
            if closes_fence(line, fence):
                fence = None
        else:
            fence = opening_fence(line)
            fenced.append(fence is not None)
    return fenced, fence is not None


def heading_text(rest: str) -> str:
    """A heading's text from what follows its '#' run, without a closing run of '#'."""
    text = rest.strip()
    unclosed = text.rstrip("#")
    # "## Title ##": a closing run of '#' counts only after a space (or as the whole text).
    if not unclosed or unclosed[-1] in " \t":
        text = unclosed.strip()
    return text


def _unfenced_lines(text: str) -> list[str]:
    lines = text.splitlines()
    return [line for line, fenced in zip(lines, fenced_lines(lines), strict=True) if not fenced]


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
