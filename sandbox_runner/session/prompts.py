"""What a session tells the model: its system prompts, the one-time notes on every mode
change, the kickoff of an accepted plan, and the Task tool's list of agents."""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.plans.proposed_patches import ProposedPatch

PLAN_MODE_RULES = (
    "Plan mode is active. The user indicated that they do not want you to execute yet -- "
    "you MUST NOT make any edits (with the exception of the plan file mentioned below), run "
    "any non-readonly tools (including changing configs or making commits), or otherwise "
    "make any changes to the system. The repository is mounted read-only: writes fail."
)
EXIT_PLAN_MODE_GUIDANCE = (
    "When the plan in the plan file is complete, call ExitPlanMode: the user reviews it and "
    "either accepts it (implementation starts in another session) or tells you what to "
    "change. Do not call it before the plan file holds the plan."
)
READ_ONLY_DISPATCH = ("Plan", "Explore")
"""The agents a plan session may launch through Task (ADR 002: read-only dispatch only)."""


def plan_session_prompt(
    definition: AgentDefinition,
    plan_file: str,
    plan_exists: bool,
    agents: str,
    memory: str = "",
    scratch: bool = False,
) -> str:
    """The plan session's system prompt: the plan agent's, the plan-mode rules, the plan-file
    "## Plan File Info:" reminder (it is part of render_plan_prompt), and how to finish."""
    # Imported when the plan session first talks to the model, not when the session opens.
    from sandbox_runner.agents.prompt import render_plan_prompt

    base = render_plan_prompt(
        definition,
        perspective=None,
        plan_file=plan_file,
        plan_exists=plan_exists,
        memory=memory,
        scratch=scratch,
    )
    return "\n\n".join([PLAN_MODE_RULES, base, EXIT_PLAN_MODE_GUIDANCE, agents])


CHECKLIST_GUIDANCE = (
    "Keep a checklist of your work with the TodoWrite tool whenever a task takes three "
    "steps or more (an accepted plan's steps are one already): the user sees it above "
    "the prompt. Send the whole list each time. Mark a step in_progress just before you "
    "start it (one at a time) and completed as soon as it is done, not in batches later; "
    "add steps you discover and drop ones that no longer apply."
)


def work_session_prompt(
    definition: AgentDefinition, agents: str, memory: str = "", checklist: bool = True
) -> str:
    """The work session's system prompt: the general-purpose agent's, the memory files,
    the checklist's guidance (when it has TodoWrite), and the Task agents."""
    parts = [
        definition.system_prompt,
        "The repository is mounted read-write at /workspace; you run in a container "
        "without network. Edits and commands may need the user's approval.",
        CHECKLIST_GUIDANCE if checklist else "",
        memory,
        agents,
    ]
    return "\n\n".join(part for part in parts if part)


def task_agents(definitions: Sequence[AgentDefinition]) -> str:
    """The Task tool's agents and when to use each."""
    lines = ["Agents you can launch with the Task tool (subagent_type), and when to use each:"]
    lines += [f"- {d.name}: {d.description}" for d in definitions]
    return "\n".join(lines)


def entered_plan_mode(plan_file: str, plan_exists: bool, again: bool) -> str:
    """The one-time note when plan mode starts (or starts again)."""
    title = "## Re-entering Plan Mode" if again else "## Entered Plan Mode"
    where = (
        f"A plan file already exists at {plan_file}; read it and build on it."
        if plan_exists
        else f"No plan file exists yet; create your plan at {plan_file}."
    )
    return f"{title}\n\n{PLAN_MODE_RULES}\n\n{where}"


def mode_changed(mode: str) -> str:
    """The one-time note when the user switches between default and acceptEdits."""
    return f"## Permission mode: {mode}\n\nThe user switched the permission mode to {mode}."


def kickoff(plan_file: str, plan_text: str, note: str, checklist: str = "") -> str:
    """What the work session receives when a plan is accepted: one clear imperative, and
    the checklist its steps became."""
    extra = f"\n\nNote from the user: {note}" if note.strip() else ""
    if checklist:
        extra += (
            "\n\nThe plan's steps are your checklist now, shown to the user:\n"
            f"{checklist}\nKeep it current with TodoWrite as you work (the whole list each "
            "time): the step you start in_progress, each finished step completed."
        )
    return f"Start implementing the plan at {plan_file}\n\n{plan_text.rstrip()}{extra}"


def proposed_patches(patches: Sequence[ProposedPatch]) -> str:
    """What the kickoff adds about the patches the plan session proposed ("" for none)."""
    if not patches:
        return ""
    shown = "\n\n".join(f"{patch.file} ({patch.tool}):\n{patch.diff.rstrip()}" for patch in patches)
    return (
        f"\n\nWhile planning, {len(patches)} edit(s) were proposed but not applied; they "
        "are part of the plan:\n\n"
        f"{shown}\n\nThe user can apply them with /apply-patches (each edit approved as "
        "usual). Check whether they were applied before making these changes yourself."
    )


def checklist_reminder(checklist: str) -> str:
    """The note after a compaction: the checklist as it stands (the summary may lose it)."""
    return f"## Your checklist (TodoWrite)\n\n{checklist}\n\nKeep it current as you work."


def keep_planning(feedback: str) -> str:
    """ExitPlanMode's answer when the user wants changes."""
    return (
        "The user did not accept the plan yet. Please update the plan based on the following "
        f"feedback, then call ExitPlanMode again: {feedback or '(no details given)'}"
    )
