"""The required plan sections and the heading names that satisfy each one.

A heading satisfies a section when it carries all the key words of one of the section's
accepted names, in any case, order, numbering or punctuation, with other words around
them: "5. Alternatives & trade-offs" carries "Alternatives". The table below is the one
place these names are defined: validation, the prompt and docs/plan.md all read it.
"""

from __future__ import annotations

import re

from sandbox_runner.plans.critical_files import CRITICAL_FILES_TITLE

__all__ = [
    "CONFLICTS_SECTION",
    "CRITICAL_FILES_TITLE",
    "DECISIONS_SECTION",
    "DEFAULT_SECTIONS",
    "SECTION_NAMES",
    "accepted_names",
    "accepted_names_markdown",
    "key_words",
]

SECTION_NAMES: dict[str, tuple[str, ...]] = {
    "Understanding": (
        "Understanding",
        "Objectives",
        "Goals",
        "Overview",
        "Summary",
        "Context",
        "Problem",
        "Requirements",
    ),
    "Constraints": ("Constraints", "Limitations", "Non-goals"),
    "Assumptions": ("Assumptions", "Open Questions"),
    "Approach": (
        "Approach",
        "Implementation Strategy",
        "Strategy",
        "Solution",
        "Proposed Solution",
        "Design",
    ),
    "Detailed Steps": ("Detailed Steps", "Steps", "Implementation Steps", "Implementation Plan"),
    "Test Plan": (
        "Test Plan",
        "Testing",
        "Tests",
        "Test Strategy",
        "Testing Strategy",
        "Test Design",
        "Verification",
    ),
    "Risks": ("Risks", "Pitfalls"),
    "Alternatives Considered": (
        "Alternatives Considered",
        "Alternatives",
        "Alternative Approaches",
        "Alternative Solutions",
        "Alternative Designs",
        "Alternative Strategies",
        "Options Considered",
    ),
    "Rollback and Mitigations": (
        "Rollback and Mitigations",
        "Rollback",
        "Roll Back",
        "Rollback Plan",
        "Rollback Strategy",
        "Mitigations",
        "Mitigation Strategy",
        "Recovery",
    ),
    "Success Criteria": (
        "Success Criteria",
        "Success",
        "Acceptance Criteria",
        "Definition of Done",
        "Exit Criteria",
    ),
    "Next Actions": ("Next Actions", "Next Steps", "Next", "Actions", "Action Items", "Follow-ups"),
    CRITICAL_FILES_TITLE: (
        CRITICAL_FILES_TITLE,
        "Critical Files",
        "Key Files",
        "Relevant Files",
        "Files to Change",
        "Files to Modify",
    ),
}
"""Each default section (in the plan's order) and the heading names that satisfy it, its
own title first. A name that another section's longer name contains does not count for a
heading that carries the longer one: "Next steps" is Next Actions, not Detailed Steps."""

DEFAULT_SECTIONS: tuple[str, ...] = tuple(SECTION_NAMES)
"""A plan's sections after its `# Title`, in order; the critical files come last."""

DECISIONS_SECTION = "Decisions"
"""A recommended plan's extra section: each major decision and the perspective it came from."""
CONFLICTS_SECTION = "Conflicts"
"""A recommended plan's extra section: each conflict between the plans and how it was resolved."""

_STOP_WORDS = frozenset({"a", "an", "and", "or", "the", "of", "for", "to", "in", "on", "with"})
_NON_WORD = re.compile(r"[\W_]+")
# "5." / "4)" / "IV." / "b)" before a heading's words.
_NUMBERING = re.compile(r"^(?:\d+(?:\.\d+)*[.)]?|[ivxlcdm]+[.)]|[a-z][.)])\s+", re.IGNORECASE)
_LEADING_JUNK = re.compile(r"^[\W_]+")


def key_words(text: str) -> tuple[str, ...]:
    """A heading's key words, in order: lower case, without markup, numbering, punctuation,
    small words or plural endings ("5. **Risks & trade-offs**" → risk, trade, off)."""
    text = _LEADING_JUNK.sub("", text[:500].replace("**", "").replace("__", ""))
    text = _NUMBERING.sub("", text, count=1)
    words = _NON_WORD.sub(" ", text).lower().split()
    return tuple(_singular(word) for word in words if word not in _STOP_WORDS)


def _singular(word: str) -> str:
    """A crude plural folding, applied alike to headings and names: enough to match "Risk"
    to "Risks"; "approaches" stays apart from "approach", as it names something else."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def accepted_names(title: str) -> tuple[str, ...]:
    """The heading names that satisfy a required section, its own title first.

    A default section has the names of SECTION_NAMES. Another title (a project template's
    heading) is satisfied by its own key words, and by either half of "A/B" or by the part
    before "(": when the title, or such a part, is one of the table's names, that section's
    names count too, so a template's "Testing" is satisfied by "Test Plan".
    """
    if title in SECTION_NAMES:
        return SECTION_NAMES[title]
    parts = [title, title.split("(")[0], *title.split("/")]
    names = list(dict.fromkeys(part.strip() for part in parts if key_words(part)))
    for part in list(names):
        names += _table_names(part)
    return tuple(dict.fromkeys(names))


def _table_names(name: str) -> tuple[str, ...]:
    words = set(key_words(name))
    for names in SECTION_NAMES.values():
        if any(set(key_words(known)) == words for known in names):
            return names
    return ()


def accepted_names_markdown() -> str:
    """The table of accepted heading names, as docs/plan.md shows it."""
    rows = [
        f"| {section} | {', '.join(names[1:]) or '—'} |" for section, names in SECTION_NAMES.items()
    ]
    return "\n".join(["| section | also accepted |", "| --- | --- |", *rows])
