"""What each plan went through before its last text, in words both report pages use: its
validation rounds (a plan fixed after feedback says so) and its kept revisions, with the
commands that show them; and report.md's sections of them (report.html's are in
report_compare and report_revisions)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox_runner.plans.report_md_parts import clip, md_code, md_name, md_safe, md_table
from sandbox_runner.plans.report_revisions import PlanRevisions, revision_commands
from sandbox_runner.safe_text import one_line

FEEDBACK_CHARS = 200
"""The most of the feedback's first line report.md shows (report.json holds all of it)."""


def validation_words(plan: dict[str, Any]) -> str:
    """One line on how validation went for a plan (plain text)."""
    validation = plan.get("validation") or {}
    rounds = int(validation.get("rounds") or 0)
    feedback = validation.get("feedback") or []
    if rounds == 0:
        return "not validated (no plan was checked)"
    if not feedback:
        return "passed the first check" if plan.get("valid") else "failed the first check"
    found = f"{len(feedback)} problem{'s' if len(feedback) != 1 else ''}"
    if validation.get("fixed_after_feedback"):
        return f"fixed after validation feedback ({found} in round 1, valid in round {rounds})"
    return f"still invalid after validation feedback ({found} in round 1)"


def feedback_first_line(plan: dict[str, Any]) -> str:
    """The first line of the feedback a plan was sent ("" when it was sent none)."""
    feedback = (plan.get("validation") or {}).get("feedback") or []
    lines = str(feedback[0]).strip().splitlines() if feedback else []
    return lines[0] if lines else ""


def validation_markdown(report: dict[str, Any]) -> str:
    """report.md's table of each plan's validation rounds ("" without plans)."""
    rows = []
    for plan in report["plans"]:
        validation = plan.get("validation") or {}
        feedback = validation.get("feedback") or []
        sent = md_safe(clip(feedback_first_line(plan), FEEDBACK_CHARS))
        if len(feedback) > 1:
            sent += f" (and {len(feedback) - 1} more in report.json)"
        rounds = str(int(validation.get("rounds") or 0))
        rows.append([md_name(plan), rounds, validation_words(plan), sent or "—"])
    if not rows:
        return ""
    table = md_table(["Plan", "Rounds", "Validation", "Feedback sent (first line)"], rows)
    return "## Validation rounds\n\n" + table


def revisions_markdown(report: dict[str, Any], revisions: Mapping[str, PlanRevisions]) -> str:
    """report.md's list of the plans changed after they were first written ("" when none
    was): how many revisions each keeps, and the commands that show them."""
    lines = []
    for plan in report["plans"]:
        kept = revisions.get(plan["label"])
        if kept is None:
            continue
        history, diff = revision_commands(Path(report["out_dir"]), plan["label"], kept)
        lines.append(
            f"- **{md_name(plan)}:** {kept.count} revisions; revision {kept.first} to "
            f"{kept.last}: +{kept.added} −{kept.removed} lines · {md_code(one_line(history))} "
            f"· {md_code(one_line(diff))}"
        )
    if not lines:
        return ""
    intro = "Plans changed after they were first written (a resume, a retry):"
    return "## Revisions\n\n" + intro + "\n\n" + "\n".join(lines)
