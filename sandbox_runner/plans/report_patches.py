"""The proposed patches of a run's plans in report.md and report.html: the edits the plan
agents were refused, each with its file, tool, reason and diff."""

from __future__ import annotations

import re
from typing import Any

from sandbox_runner.safe_text import html_text, one_line

INTRO = "Edits the plan agents wanted to make while planning; none was applied."


def patches_markdown(report: dict[str, Any]) -> str:
    """The `## Proposed patches` section of report.md ("" when no plan has any)."""
    proposing = [plan for plan in report["plans"] if plan.get("proposed_patches")]
    if not proposing:
        return ""
    lines = ["## Proposed patches", "", INTRO, ""]
    for plan in proposing:
        name = one_line(str(plan.get("perspective") or plan.get("label") or "?"))
        lines.append(f"### {name}")
        for patch in plan["proposed_patches"]:
            file, tool = one_line(str(patch["file"])), one_line(str(patch["tool"]))
            lines += ["", f"- `{file.replace('`', '')}` ({tool})", "", fenced(patch["diff"])]
        lines.append("")
    return "\n".join(lines).rstrip()


def patches_html(report: dict[str, Any]) -> str:
    """The proposed-patches section of report.html ("" when no plan has any)."""
    proposing = [plan for plan in report["plans"] if plan.get("proposed_patches")]
    if not proposing:
        return ""
    parts = [f"<p>{html_text(INTRO)}</p>"]
    for plan in proposing:
        name = html_text(one_line(str(plan.get("perspective") or plan.get("label") or "?")))
        for patch in plan["proposed_patches"]:
            parts.append(
                f"<h3>{name}: <code>{html_text(one_line(str(patch['file'])))}</code> "
                f"({html_text(one_line(str(patch['tool'])))})</h3>"
                f'<div class="scroll"><pre><code>{html_text(str(patch["diff"]))}</code></pre></div>'
            )
    content = "\n".join(parts)
    return f'<section id="patches">\n<h2>Proposed patches</h2>\n{content}\n</section>'


def fenced(text: str, language: str = "diff") -> str:
    """A fenced code block that no run of backticks in TEXT can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"
