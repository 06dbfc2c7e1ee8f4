"""A plan template's text: its required sections, and whether it is a template at all.

The sections are the template's top-level headings below the title (`##` in most
templates), outside code fences, found with the scanner that validation uses, so a
template's own text passes its own validation. Deeper headings are structure, not
requirements; a placeholder heading ("Task 1: [Task Title]") requires its fixed prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from sandbox_runner.plans.text import (
    HEADING,
    closes_fence,
    fence_left_open,
    fenced_lines,
    heading_text,
    opening_fence,
)

MAX_TEMPLATE_SECTIONS = 20
"""More required sections than this is a document, not a template: it is refused."""

_PLACEHOLDER = re.compile(
    r"\[[^\]\n]*\]"  # [Task Title]
    r"|<[^<>\n]*>"  # <feature-name>
    r"|\{[^{}\n]*\}"  # {{name}} or {name}
    r"|\b(?:TODO|XXX)\b"
    r"|\.\.\.|…"
)
# In a template's body, a placeholder looks like one: a bracket that is no checkbox or
# link, an angle bracket with words (not an HTML tag), braces with a name.
_BODY_PLACEHOLDER = re.compile(
    r"\[(?![ xX]\])[^\]\n]{2,}\](?![(\[:])"
    r"|<(?:[A-Z][^<>\n=]*|[a-z]+[ _-][^<>\n=]*)>"
    r"|\{\{?[A-Za-z_][^{}\n]*\}\}?"
    r"|\b(?:TODO|XXX)\b"
    r"|(?:^|\s)(?:\.\.\.|…)(?:\s|$)"
)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_CHECKED_BOX = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+\[[xX]\]")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# "Requirements *(mandatory)*": a note to the template's user, not part of the section's name.
_ANNOTATION = re.compile(r"\s*([*_])\([^()\n]*\)\1\s*$")
_MARKDOWN_INFO = frozenset({"markdown", "md"})


@dataclass(frozen=True)
class TemplateText:
    """What a template's text asks for, and what planrun made of it (one line each)."""

    sections: tuple[str, ...]
    notes: tuple[str, ...]
    unwrapped: bool
    text: str
    """The text the sections come from: the template's, without an outer ```markdown fence."""


def read_template_text(text: str) -> TemplateText:
    """The required sections of a template's text (none when it has no usable heading)."""
    lines = text.splitlines()
    inner = unwrap_markdown_fence(lines)
    if inner is not None:
        lines = inner
    headings = _headings(lines)
    fixed = [(level, _fixed_part(title)) for level, title in headings]
    kept = [(level, title) for level, title in fixed if title]
    top = min((level for level, _ in kept), default=0)
    sections = list(dict.fromkeys(title for level, title in kept if level == top))
    notes: list[str] = []
    if inner is not None:
        notes.append("is wrapped in one ```markdown fence: its content is used")
    deeper = sum(1 for level, _ in headings if level > top)
    dropped = sum(1 for level, title in fixed if level <= top and not title)
    if sections:
        notes.append(_required_line(sections, top, deeper, dropped))
    return TemplateText(tuple(sections), tuple(notes), inner is not None, "\n".join(lines))


def unwrap_markdown_fence(lines: list[str]) -> list[str] | None:
    """The lines inside an outer ```markdown (or ~~~md) fence that wraps the whole text.

    Only when the text between is balanced Markdown: with inner ```sql blocks, CommonMark
    would close the outer fence at the first inner one, which is not what the author meant.
    """
    filled = [index for index, line in enumerate(lines) if line.strip()]
    if len(filled) < 3:
        return None
    first, last = lines[filled[0]], lines[filled[-1]]
    fence = opening_fence(first)
    if fence is None or first.strip()[len(fence) :].strip().lower() not in _MARKDOWN_INFO:
        return None
    inner = lines[filled[0] + 1 : filled[-1]]
    if not closes_fence(last, fence) or fence_left_open(inner):
        return None
    return inner


def looks_like_filled_plan(text: str) -> bool:
    """Whether the text reads as a plan someone wrote (Codex's working plan) rather than a
    template: no placeholder and no empty section, or boxes already checked."""
    lines = _COMMENT.sub("", text).splitlines()
    lines = unwrap_markdown_fence(lines) or lines
    # A code block is a section's content, never a heading or a placeholder.
    prose = [
        "    code" if code else _CODE_SPAN.sub("", line)
        for line, code in zip(lines, fenced_lines(lines), strict=True)
    ]
    if any(_CHECKED_BOX.match(line) for line in prose):
        return True
    placeholders = any(_BODY_PLACEHOLDER.search(line) for line in prose)
    return not placeholders and not _has_empty_section(prose)


def _headings(lines: list[str]) -> list[tuple[int, str]]:
    """The level and text of every heading below the title level, outside code fences."""
    found = []
    for line, fenced in zip(lines, fenced_lines(lines), strict=True):
        if not fenced and (match := HEADING.match(line)) and len(match.group(1)) > 1:
            title = _ANNOTATION.sub("", heading_text(line[match.end() :]))
            title = title.strip().strip("*_:").strip()
            if title:
                found.append((len(match.group(1)), title))
    return found


def _fixed_part(title: str) -> str:
    """The heading without its placeholder: "Task 1: [Task Title]" → "Task 1"; "" when
    nothing fixed comes first ("[Feature name]")."""
    placeholder = _PLACEHOLDER.search(title)
    if placeholder is None:
        return title
    prefix = title[: placeholder.start()].rstrip(" \t:-–—(*_`#")
    return prefix if re.search(r"[^\W\d_]", prefix) else ""


def _has_empty_section(lines: list[str]) -> bool:
    """Whether a heading has nothing under it before the next heading of its level or above."""
    headings = [
        (index, len(match.group(1)))
        for index, line in enumerate(lines)
        if (match := HEADING.match(line))
    ]
    for (index, level), (next_index, next_level) in pairwise([*headings, (len(lines), 0)]):
        body = any(line.strip() for line in lines[index + 1 : next_index])
        if not body and next_level <= level:
            return True
    return False


def _required_line(sections: list[str], level: int, deeper: int, dropped: int) -> str:
    shown = ", ".join(f'"{section}"' for section in sections[:MAX_TEMPLATE_SECTIONS])
    line = f"requires {len(sections)} sections ({'#' * level} headings): {shown}"
    if deeper:
        line += f"; {deeper} deeper headings are structure, not required"
    if dropped:
        line += f"; {dropped} placeholder headings dropped"
    return line
