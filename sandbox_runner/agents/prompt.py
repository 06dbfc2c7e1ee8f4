"""The Plan subagent's system prompt: perspective, required plan sections and plan file info."""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.plans.critical_files import (
    CRITICAL_FILES_TITLE,
    MAX_CRITICAL_FILES,
    MIN_CRITICAL_FILES,
)
from sandbox_runner.plans.sections import DEFAULT_SECTIONS, accepted_names

__all__ = [
    "CRITICAL_FILES_HEADING",
    "CRITICAL_FILES_SECTION",
    "DEFAULT_SECTIONS",
    "MAX_CRITICAL_FILES",
    "MIN_CRITICAL_FILES",
    "PERSPECTIVES",
    "SECTION_GUIDANCE",
    "output_format",
    "perspective_paragraph",
    "plan_file_info",
    "render_plan_prompt",
]

CRITICAL_FILES_SECTION = CRITICAL_FILES_TITLE
CRITICAL_FILES_HEADING = f"### {CRITICAL_FILES_SECTION}"

# DEFAULT_SECTIONS (from plans.sections): a plan's sections after its `# Title`, in order;
# each a `## ` heading except the last, always CRITICAL_FILES_HEADING. A project template
# replaces all but the last.

SECTION_GUIDANCE: dict[str, str] = {
    "Understanding": "The objectives in your own words: what must be true when the work is done.",
    "Constraints": "What the solution must respect: interfaces, compatibility, conventions.",
    "Assumptions": "What you assume but could not verify, and how to check it.",
    "Approach": "The implementation strategy, and why you chose it.",
    "Detailed Steps": (
        "Numbered steps in order; each names the files and functions it changes "
        "and how to verify it."
    ),
    "Test Plan": "The tests to add or change, and the commands that run them.",
    "Risks": "What could go wrong, how likely it is, and how you would notice.",
    "Alternatives Considered": "The approaches you did not choose, and why.",
    "Rollback and Mitigations": "How to undo the change, and what limits the damage of each risk.",
    "Success Criteria": "Observable checks that prove the work is done.",
    "Next Actions": (
        "The first things to do, including every command you were not allowed to run "
        "(installs, migrations, creating directories)."
    ),
}

PERSPECTIVES: dict[str, str] = {
    "simplicity": (
        "prefer the smallest, most direct design that meets the requirements; add no "
        "abstraction, dependency or option that does not pay for itself"
    ),
    "performance": (
        "optimise for speed, memory use and scalability; find the hot paths, say how to "
        "measure before and after, and estimate the gain"
    ),
    "security": (
        "treat every input as hostile; minimise privileges and attack surface, validate at "
        "the boundaries, and name each threat with its mitigation"
    ),
    "maintainability": (
        "optimise for code that is easy to read, change and own: clear boundaries, the "
        "existing patterns, and names that explain themselves"
    ),
    "testability": (
        "design so that every behaviour can be tested in isolation: seams for fakes, "
        "deterministic behaviour, and a concrete test for every step"
    ),
    "minimal-change": (
        "touch as few files and lines as possible; reuse what exists, keep public interfaces "
        "stable, and leave refactoring for later"
    ),
}
"""Short descriptions of the built-in perspectives; any other perspective is used verbatim."""


def perspective_paragraph(perspective: str) -> str:
    """The prompt paragraph that asks for a plan from one perspective."""
    perspective = perspective.strip()
    key = "-".join(perspective.casefold().replace("_", " ").split())
    description = PERSPECTIVES.get(key)
    if description is None:
        return f"## Perspective\n\nPlan from the perspective of {perspective}."
    return (
        f"## Perspective\n\nPlan from the perspective of {perspective}: {description}. "
        "Where this perspective conflicts with others, favour it and say what you traded away."
    )


def plan_file_info(plan_file: str, plan_exists: bool) -> str:
    """The "## Plan File Info:" reminder, worded as Claude Code words it."""
    if plan_exists:
        where = (
            f"A plan file already exists at {plan_file}. You can read it and make incremental "
            "edits using the Edit tool if you need to."
        )
    else:
        where = (
            f"No plan file exists yet. You should create your plan at {plan_file} using the "
            "Write tool if you need to."
        )
    return (
        f"## Plan File Info:\n{where}\n"
        "You should build your plan incrementally by writing to or editing this file. NOTE "
        "that this is the only file you are allowed to edit - other than this you are only "
        "allowed to take READ-ONLY actions."
    )


def output_format(sections: Sequence[str] | None = None) -> str:
    """The required plan format: the title, the sections in order, and the critical files last."""
    names = [name.strip().lstrip("#").strip() for name in sections or DEFAULT_SECTIONS]
    # The critical files close every plan, template or not: the validator checks them.
    critical = CRITICAL_FILES_TITLE.casefold()
    names = [name for name in names if name and name.casefold() != critical]
    lines = [
        "## Required Output Format",
        "",
        "Write the plan as Markdown with these sections, in this order. Fill every section; "
        'write "None" under a section that does not apply.',
        "",
        "# <Title: the change in a few words>",
    ]
    for name in names:
        lines.append(f"## {name}")
        if name in SECTION_GUIDANCE:
            lines.append(SECTION_GUIDANCE[name])
    lines += [
        CRITICAL_FILES_HEADING,
        f"List the {MIN_CRITICAL_FILES}-{MAX_CRITICAL_FILES} files most critical for "
        "implementing this plan, one per line as `- path - reason`, with paths relative to "
        "the repository root (not starting with /workspace) that exist now:",
        "- path/to/file1.py - Core logic to modify",
        "- path/to/file2.py - Interface the change must follow",
        "- path/to/test_file.py - Tests to extend",
    ]
    return "\n".join(lines + _accepted_names([*names, CRITICAL_FILES_SECTION]))


def _accepted_names(sections: list[str]) -> list[str]:
    """The other heading names validation accepts for each section (plans.sections)."""
    lines = [f"- {name}: {', '.join(others)}" for name in sections if (others := _others(name))]
    if not lines:
        return []
    lead = (
        "Headings are matched by their key words, in any case, order, numbering or "
        "punctuation; these other names are accepted too:"
    )
    return ["", lead, *lines]


def _others(name: str) -> list[str]:
    return [other for other in accepted_names(name) if other.casefold() != name.casefold()]


SCRATCH_SECTION = """## Scratch Sandbox

In this run your Bash commands run in a scratch sandbox: /workspace is a throw-away \
copy-on-write layer over the repository. Here, and only for Bash commands, the rules \
above against commands that change state are lifted: you may run the project's tests, \
builds, linters and tools that write (build outputs, caches, test artefacts) to check \
your plan against the code as it is. Nothing you do persists: every write is thrown away \
when you finish, and the repository itself never changes. The layer is small (a command \
that fills it fails with "No space left on device"), and there is no network, so nothing \
can be installed or downloaded. Write and Edit still change only your plan file. Every \
command you run is recorded with its exit status beside the plan: say in the plan what \
you ran and what it showed."""
"""Added to a plan agent's prompt in a scratch run (plan_commands: scratch)."""


def render_plan_prompt(
    definition: AgentDefinition,
    *,
    perspective: str | None,
    plan_file: str,
    plan_exists: bool,
    sections: list[str] | None = None,
    requirements_context: str = "",
    memory: str = "",
    scratch: bool = False,
) -> str:
    """The full system prompt of a plan agent.

    Args:
        definition: the agent (Plan, or a file overriding it); its prompt comes first.
        perspective: the point of view to plan from, or None.
        plan_file: the plan file's path as the agent sees it.
        plan_exists: whether the plan file exists already (an edit, not a new plan).
        sections: a project template's sections; DEFAULT_SECTIONS when None.
        requirements_context: extra context about the task (issue text, notes), if any.
        memory: the memory files' section (agents.memory.Memory.prompt), if any.
        scratch: a scratch run: the agent may run commands that write, and is told so.

    Returns:
        The prompt, ending with the "## Plan File Info:" block.
    """
    parts = [definition.system_prompt.strip(), memory.strip()]
    if perspective and perspective.strip():
        parts.append(perspective_paragraph(perspective))
    if requirements_context.strip():
        parts.append(f"## Requirements Context\n\n{requirements_context.strip()}")
    if scratch:
        parts.append(SCRATCH_SECTION)
    parts.append(output_format(sections))
    parts.append(plan_file_info(plan_file, plan_exists))
    return "\n\n".join(part for part in parts if part)
