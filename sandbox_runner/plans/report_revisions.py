"""report.html's Revisions section: for each plan that was changed after it was first
written, what changed between its first and its last kept revision, collapsed."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runner.plans.history import run_name
from sandbox_runner.plans.revision_diff import line_changes, unified_lines
from sandbox_runner.plans.revisions import load_revisions
from sandbox_runner.redact import redact
from sandbox_runner.safe_io import UnsafeFileError
from sandbox_runner.safe_text import html_text, one_line

MAX_DIFF_LINES = 2000
"""A longer diff is cut in the page (`planrun plans diff` shows all of it)."""

DIFF_CSS = """
.revisions details { margin: 8px 0; }
.revisions summary { cursor: pointer; }
.revisions pre { background: var(--wash); padding: 10px 12px; border-radius: 6px;
  overflow-x: auto; }
.revisions .add { color: #1a7f37; }
.revisions .del { color: #cf222e; }
.revisions .hunk { color: #8250df; }
"""


@dataclass(frozen=True)
class PlanRevisions:
    """A plan's kept revisions as the report shows them."""

    count: int
    first: int
    last: int
    added: int
    removed: int
    diff: list[str]
    """The unified diff from the first kept revision to the last, credentials redacted."""


def plan_revisions(out_dir: Path, labels: list[str]) -> dict[str, PlanRevisions]:
    """The plans (by label) of the run in OUT_DIR with more than one kept revision; a
    store planrun cannot read safely is left out."""
    found = {}
    for label in labels:
        try:
            log = load_revisions(out_dir / f"{label}.md")
            if len(log.revisions) < 2:
                continue
            first, last = log.revisions[0], log.revisions[-1]
            old, new = redact(log.text(first)), redact(log.text(last))
        except UnsafeFileError:
            continue
        added, removed = line_changes(old, new)
        diff = unified_lines(old, new, f"revision {first.number}", f"revision {last.number}")
        found[label] = PlanRevisions(
            len(log.revisions), first.number, last.number, added, removed, diff
        )
    return found


def revision_commands(out_dir: Path, label: str, kept: PlanRevisions) -> tuple[str, str]:
    """The commands that list a plan's revisions and show what changed from its first kept
    revision to its last (both report pages give them)."""
    name, plan = run_name(out_dir), f"-p {shlex.quote(label)}"
    return (
        f"planrun plans history {name} {plan}",
        f"planrun plans diff {name} {kept.first} {kept.last} {plan}",
    )


def revisions_section(report: dict[str, Any], revisions: Mapping[str, PlanRevisions]) -> str:
    """The section, "" when no plan has more than one revision."""
    entries = []
    for plan in report["plans"]:
        kept = revisions.get(plan["label"])
        if kept is None:
            continue
        name = html_text(one_line(plan.get("perspective") or plan["label"]))
        summary = (
            f"{name}: {kept.count} revisions; revision {kept.first} to {kept.last}: "
            f"+{kept.added} −{kept.removed} lines"
        )
        commands = " · ".join(
            f"<code>{html_text(one_line(command))}</code>"
            for command in revision_commands(Path(report["out_dir"]), plan["label"], kept)
        )
        entries.append(
            f"<details><summary>{summary}</summary><p>{commands}</p>"
            f"<pre>{_diff_html(kept.diff)}</pre></details>"
        )
    if not entries:
        return ""
    return (
        '<section id="revisions" class="revisions">\n<h2>Revisions</h2>\n'
        "<p>Plans changed after they were first written (a resume, a retry): what changed "
        "between the first and the last revision. "
        "<code>planrun plans history</code> lists every one.</p>\n"
        + "\n".join(entries)
        + "\n</section>"
    )


def _diff_html(lines: list[str]) -> str:
    shown = []
    for position, line in enumerate(lines[:MAX_DIFF_LINES]):
        text = html_text(line)
        kind = "" if position < 2 else {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        shown.append(f'<span class="{kind}">{text}</span>' if kind else text)
    if len(lines) > MAX_DIFF_LINES:
        shown.append(f"… {len(lines) - MAX_DIFF_LINES} more lines: planrun plans diff shows them")
    return "\n".join(shown)
