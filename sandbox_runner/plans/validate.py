"""Plan validation: a title, the required sections, and 3-5 critical files that exist (P1/P2).

Plans come from a model and are treated as untrusted text: parsing is bounded, never
raises, and the workspace is checked without following symlinks out of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner.limits import MAX_PLAN_BYTES
from sandbox_runner.plans.critical_files import (
    CRITICAL_FILES_TITLE,
    MAX_CRITICAL_FILES,
    MAX_ENTRIES,
    MIN_CRITICAL_FILES,
    CriticalFile,
    check_critical_files,
)
from sandbox_runner.plans.sections import accepted_names, key_words
from sandbox_runner.plans.text import HEADING, fenced_lines, heading_text, shorten

__all__ = [
    "CRITICAL_FILES_TITLE",
    "ENTRY_FORMAT",
    "MAX_ENTRIES",
    "MAX_HEADINGS",
    "SUMMARY_CHARS",
    "CriticalFile",
    "PlanCheck",
    "extract_section",
    "validate_plan",
]

# A plan read from a file has at most MAX_PLAN_BYTES bytes, so at most as many characters;
# a plan given as text is cut at the same size.
MAX_PLAN_CHARS = MAX_PLAN_BYTES
# Real plans have dozens of headings; the cap bounds the work on garbage.
MAX_HEADINGS = 2000
SUMMARY_CHARS = 400
ENTRY_FORMAT = "- path/relative/to/repo - reason"

_LIST_ITEM = re.compile(r"([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+")
_NON_WORD = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class PlanCheck:
    """The outcome of validating a plan; `problems` is empty exactly when `ok`."""

    ok: bool
    problems: list[str]
    title: str | None
    sections_found: list[str]
    missing_sections: list[str]
    critical_files: list[CriticalFile]
    summary: str
    notes: list[str] = field(default_factory=list)
    """Observations that do not make the plan invalid (e.g. a directory as critical file)."""

    def feedback(self) -> str:
        """The message sent back to the model when the plan is invalid ("" when it is valid)."""
        if self.ok:
            return ""
        bullets = "\n".join(f"- {problem}" for problem in self.problems)
        return (
            f"The plan file has problems:\n{bullets}\n\n"
            "Fix the plan file in place: keep what is already right and change only what is "
            f'listed above. Under the heading "## {CRITICAL_FILES_TITLE}", list each file on '
            f"its own line as `{ENTRY_FORMAT}`, using paths that exist in the repository."
        )


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str
    index: int
    words: frozenset[str]
    """Its key words (empty for a heading deeper than level 4, which is never a section)."""


@dataclass(frozen=True)
class _Document:
    lines: list[str]
    fenced: list[bool]
    headings: list[_Heading]


def validate_plan(
    text: str,
    *,
    sections: Sequence[str],
    workspace: Path,
    min_files: int = MIN_CRITICAL_FILES,
    max_files: int = MAX_CRITICAL_FILES,
) -> PlanCheck:
    """Check a plan's title, required sections and critical files against the workspace.

    Args:
        text: the plan, Markdown.
        sections: the required section titles; a heading satisfies one when it carries
            the key words of one of its accepted names (see plans.sections).
        workspace: the repository on the host; critical files must exist inside it.
        min_files, max_files: how many critical files are required.

    Returns:
        A PlanCheck; this function never raises on malformed plans.
    """
    problems: list[str] = []
    if len(text) > MAX_PLAN_CHARS:
        text = text[:MAX_PLAN_CHARS]
        size = f"{MAX_PLAN_CHARS // (1024 * 1024)} MB"
        problems.append(f"the plan is larger than {size}; only its first {size} were checked")
    document = _parse(text)
    leading_h1 = 0 if document.headings and document.headings[0].level == 1 else None
    found = _locate(document, [*sections, CRITICAL_FILES_TITLE], leading_h1)
    title = _find_title(document, set(found.values()))
    if title is None:
        problems.append("missing title: start the plan with a first-level heading (# Title)")
    missing = [section for section in sections if section not in found]
    problems += [f"missing section: {section}" for section in missing]
    files: list[CriticalFile] = []
    notes: list[str] = []
    if CRITICAL_FILES_TITLE in found:
        entries = _list_entries(document, found[CRITICAL_FILES_TITLE])
        files, file_problems, notes = check_critical_files(
            entries, workspace, (min_files, max_files)
        )
        problems += file_problems
    return PlanCheck(
        ok=not problems,
        problems=problems,
        title=title,
        sections_found=[section for section in sections if section in found],
        missing_sections=missing,
        critical_files=files,
        summary=_summary(document, [found[s] for s in sections if s in found]),
        notes=notes,
    )


def extract_section(text: str, title: str) -> str | None:
    """The body of the first section whose heading matches `title`, or None if absent.

    The body runs to the next heading of the same or a higher level, so it includes any
    subsections; it is returned without surrounding blank space.
    """
    document = _parse(text[:MAX_PLAN_CHARS])
    # A leading "# Approach to caching" is the plan's title, not its Approach section.
    leading_title = 0 if document.headings and document.headings[0].level == 1 else None
    position = _locate(document, [title], leading_title).get(title)
    if position is None:
        return None
    start = document.headings[position].index + 1
    return "\n".join(document.lines[start : _section_end(document, position)]).strip()


def _parse(text: str) -> _Document:
    """Split into lines and find the ATX headings that are not inside fenced code blocks."""
    lines = text.splitlines()
    fenced = fenced_lines(lines)
    headings: list[_Heading] = []
    for index, line in enumerate(lines):
        if fenced[index] or len(headings) >= MAX_HEADINGS:
            continue
        if heading := HEADING.match(line):
            level = len(heading.group(1))
            content = heading_text(line[heading.end() :])
            words = frozenset(key_words(content)) if level <= 4 else frozenset()
            headings.append(_Heading(level, content, index, words))
    return _Document(lines, fenced, headings)


def _locate(
    document: _Document, titles: Sequence[str], title_position: int | None = None
) -> dict[str, int]:
    """Map each title to the position (in document.headings) of the heading that satisfies it.

    That is the first heading whose key words are exactly one of the title's accepted
    names, else the first that carries all the words of one. A name counts only when no
    other title's name that the heading carries contains it: "Next steps" is Next Actions,
    not Detailed Steps. The heading at `title_position` matches only exactly, so that a
    plan titled "# Approach to caching" keeps its title rather than losing it to "Approach".
    """
    by_word: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for title in dict.fromkeys(titles):
        for name in accepted_names(title):
            if words := frozenset(key_words(name)):
                # Indexed by one of its words, so each heading looks only at names it may carry.
                by_word.setdefault(min(words), []).append((title, words))
    exact: dict[str, int] = {}
    loose: dict[str, int] = {}
    for position, heading in enumerate(document.headings):
        if not heading.words:
            continue
        carried = [
            (title, words)
            for word in heading.words
            for title, words in by_word.get(word, ())
            if words <= heading.words and (position != title_position or words == heading.words)
        ]
        for title, words in carried:
            if any(other != title and words < longer for other, longer in carried):
                continue
            (exact if words == heading.words else loose).setdefault(title, position)
    return {
        title: exact[title] if title in exact else loose[title]
        for title in titles
        if title in exact or title in loose
    }


def _find_title(document: _Document, section_positions: set[int]) -> str | None:
    """The first level-1 heading, or any heading before the first section, that is no section."""
    first_section = min(section_positions, default=len(document.headings))
    for position, heading in enumerate(document.headings):
        if position in section_positions or not heading.text:
            continue
        if heading.level == 1 or position < first_section:
            return shorten(heading.text.replace("**", "").replace("__", ""), 200)
    return None


def _section_end(document: _Document, position: int) -> int:
    level = document.headings[position].level
    for heading in document.headings[position + 1 :]:
        if heading.level <= level:
            return heading.index
    return len(document.lines)


def _list_entries(document: _Document, position: int) -> list[tuple[str, str]]:
    """The top-level list items of a section, each with its indented continuation text."""
    items: list[tuple[int, str, list[str]]] = []
    for index in range(document.headings[position].index + 1, _section_end(document, position)):
        line = document.lines[index]
        if document.fenced[index] or not line.strip():
            continue
        if item := _LIST_ITEM.match(line):
            items.append((len(item.group(1).expandtabs(4)), line[item.end() :].strip(), []))
        elif items and line[0] in " \t":
            items[-1][2].append(line.strip())
    top = min((indent for indent, _, _ in items), default=0)
    # Deeper items are details of an entry, not entries; "* * *" rules carry no words.
    return [
        (text, " ".join(more))
        for indent, text, more in items
        if indent == top and _NON_WORD.sub("", text)
    ]


def _summary(document: _Document, positions: list[int]) -> str:
    """The first paragraph of the first required section that has one."""
    for position in positions:
        paragraph: list[str] = []
        for index in range(document.headings[position].index + 1, _section_end(document, position)):
            line = document.lines[index]
            # A paragraph ends at a blank line, a code block or a subheading.
            if document.fenced[index] or not line.strip() or HEADING.match(line):
                if paragraph:
                    break
                continue
            paragraph.append(line[: SUMMARY_CHARS * 2])
            if sum(map(len, paragraph)) > SUMMARY_CHARS:
                break
        if paragraph:
            return shorten(" ".join(paragraph), SUMMARY_CHARS)
    return ""
