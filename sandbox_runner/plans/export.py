"""Handing a plan to the agent that will implement it: a kickoff prompt with the plan for
`claude -p`, `codex exec` or `gemini -p` (fed on stdin, so no argument-length limit
applies), the plan as a clean Markdown document, or a GitHub issue or comment body."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runner.plans.proposed_patches import ProposedPatch
from sandbox_runner.plans.report_patches import fenced

AGENT_TOOLS = ("claude", "codex", "gemini")
FORMATS = (*AGENT_TOOLS, "markdown", "github")
GITHUB_LIMIT = 65_536
"""The most characters GitHub takes in an issue, pull request or comment body."""
GITHUB_MARGIN = 536
"""Room kept below the limit for the note that says where the rest is."""

SHORT_PROMPT = "Implement the approved plan given on standard input, following its steps."
"""The prompt argument for claude and gemini; the kickoff and the plan come on stdin."""
COMMANDS = {
    "claude": "claude -p {prompt} --permission-mode acceptEdits < {file}",
    "codex": "codex exec --sandbox workspace-write - < {file}",
    "gemini": "gemini --approval-mode auto_edit -p {prompt} < {file}",
}
"""How each tool takes a long prompt without an interactive session: Claude Code's print
mode and Gemini CLI's `-p` append stdin to the prompt; `codex exec -` reads it whole."""


@dataclass(frozen=True)
class PlanToExport:
    """A plan as the export reads it: its Markdown, metadata and proposed patches."""

    path: Path
    """The plan file (for the note of a cut GitHub body, and the side record)."""
    body: str
    """The plan's Markdown, without front matter."""
    metadata: Mapping[str, Any]
    patches: list[ProposedPatch]
    repository: str
    """The repository the plan is for ("" when unknown)."""


def export_text(plan: PlanToExport, tool: str) -> str:
    """What `planrun plans export --for TOOL` writes for PLAN.

    Raises:
        ValueError: TOOL is not one of FORMATS.
    """
    if tool in AGENT_TOOLS:
        return kickoff(plan)
    if tool == "markdown":
        return markdown_document(plan)
    if tool == "github":
        return github_body(plan)
    raise ValueError(f"unknown format {tool!r}: one of {', '.join(FORMATS)}")


def command_line(tool: str, out_file: Path, repository: str) -> str | None:
    """The command that hands OUT_FILE to TOOL, run in the repository; None for a format
    that is no agent's input."""
    if tool not in COMMANDS:
        return None
    run = COMMANDS[tool].format(prompt=shlex.quote(SHORT_PROMPT), file=shlex.quote(str(out_file)))
    return f"cd {shlex.quote(repository)} && {run}" if repository else run


def kickoff(plan: PlanToExport) -> str:
    """The prompt an implementing agent starts from: what to do, then the plan."""
    head = plan.metadata.get("git_head")
    where = f" at {plan.repository}" if plan.repository else ""
    since = f" The plan was written at commit {str(head)[:12]}." if head else ""
    lines = [
        f"You are implementing an approved plan in the repository{where}.{since}",
        "",
        "- Follow the plan's Detailed Steps in order, and change the files it names; if a "
        "step needs another file, say which and why.",
        "- Run the tests of its Test Plan, and add the tests it asks for.",
        "- If the repository contradicts the plan, stop and say so instead of guessing.",
        "- When done, list what you changed, step by step, and what you could not do.",
    ]
    if plan.patches:
        lines += ["", _patches(plan.patches, "Edits proposed while planning (not applied yet):")]
    return "\n".join([*lines, "", "<plan>", plan.body.strip(), "</plan>", ""])


def markdown_document(plan: PlanToExport) -> str:
    """The plan with its metadata as a clean document: a facts list, the plan, its patches."""
    title = str(plan.metadata.get("title") or _title(plan.body) or plan.path.stem)
    body = _without_title(plan.body).strip()
    facts = [f"# {title}", "", *_facts(plan), "", body]
    if plan.patches:
        facts += ["", "## Proposed patches", "", _patches(plan.patches, "")]
    return "\n".join(facts).rstrip() + "\n"


def github_body(plan: PlanToExport, limit: int = GITHUB_LIMIT) -> str:
    """An issue or comment body within GitHub's limit: the document, cut at a line with a
    note naming the full plan's path when it is longer (an open code block is closed)."""
    text = markdown_document(plan)
    if len(text) <= limit:
        return text
    note = (
        f"\n\n> This plan is cut here: it is longer than GitHub allows in one body. "
        f"The full plan is `{plan.path}`.\n"
    )
    room = min(limit, GITHUB_LIMIT) - len(note) - GITHUB_MARGIN
    cut = text[:room].rsplit("\n", 1)[0]
    if sum(1 for line in cut.splitlines() if line.lstrip().startswith("```")) % 2:
        cut += "\n```"
    return cut + note


def _facts(plan: PlanToExport) -> list[str]:
    metadata = plan.metadata
    facts = [
        ("Repository", plan.repository),
        ("Commit", str(metadata.get("git_head") or "")[:12]),
        ("Perspective", metadata.get("perspective")),
        ("Model", metadata.get("model")),
        ("Valid", _yes_no(metadata.get("valid"))),
        ("Written", metadata.get("finished_at")),
        ("Plan file", str(plan.path)),
    ]
    return [f"- **{name}**: `{value}`" for name, value in facts if value]


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else ""


def _patches(patches: list[ProposedPatch], heading: str) -> str:
    parts = [heading] if heading else []
    for patch in patches:
        parts += [f"{patch.file} ({patch.tool}):", fenced(patch.diff)]
    return "\n\n".join(parts)


def _title(body: str) -> str:
    first = next((line for line in body.splitlines() if line.strip()), "")
    return first[2:].strip() if first.startswith("# ") else ""


def _without_title(body: str) -> str:
    lines = body.strip().splitlines()
    return "\n".join(lines[1:]) if lines and lines[0].startswith("# ") else body
