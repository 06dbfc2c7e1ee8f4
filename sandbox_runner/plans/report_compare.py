"""The parts of report.html that read the plans section by section: each section of every
plan side by side, the critical files as links into the repository, and the validation
rounds of each plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_runner.plans.report_html_parts import badge, critical_file_link, plan_name, section
from sandbox_runner.plans.report_rounds import validation_words
from sandbox_runner.plans.sections import CRITICAL_FILES_TITLE, DEFAULT_SECTIONS, key_words
from sandbox_runner.plans.text import HEADING, fenced_lines, heading_text
from sandbox_runner.plans.validate import extract_section
from sandbox_runner.safe_text import html_text, markdown_html

COMPARED_SECTIONS = tuple(title for title in DEFAULT_SECTIONS if title != CRITICAL_FILES_TITLE)
"""The sections compared side by side; the critical files get a row of links instead."""
CRITICAL_FILES_WORDS = frozenset(key_words("Critical Files"))


def comparison_section(report: dict[str, Any], bodies: Mapping[str, str]) -> str:
    """Every section of the plans side by side, one row per section ("" for no plan)."""
    plans = [plan for plan in report["plans"] if bodies.get(plan["label"], "").strip()]
    if not plans:
        return ""
    rows = []
    for title in COMPARED_SECTIONS:
        texts = [_own_text(extract_section(bodies[plan["label"]], title)) for plan in plans]
        if not any(texts):
            continue
        cells = [
            _cell(plan, markdown_html(text, heading_offset=3) if text else _missing(title))
            for plan, text in zip(plans, texts, strict=True)
        ]
        rows.append(_row(title, cells))
    files = [_cell(plan, critical_files_list(report, plan)) for plan in plans]
    rows.append(_row("Critical files", files))
    heading = "Section by section" if len(plans) > 1 else "The plan by section"
    legend = (
        '<p class="legend">Each row is one section; each column is one plan. '
        "On a narrow screen each section's plans stack.</p>"
    )
    return section("compare", heading, legend + "\n".join(rows))


def _own_text(text: str | None) -> str | None:
    """A section's text without a Critical Files subsection nested in it (a plan's
    `### Critical Files for Implementation` under its last section): the row of links
    shows those files, so the section's cell does not show them twice."""
    if not text:
        return text
    lines = text.splitlines()
    fenced = fenced_lines(lines)
    for index, line in enumerate(lines):
        heading = None if fenced[index] else HEADING.match(line)
        if heading and set(key_words(heading_text(line[heading.end() :]))) >= CRITICAL_FILES_WORDS:
            level = len(heading.group(1))
            end = next(
                (
                    after
                    for after in range(index + 1, len(lines))
                    if not fenced[after]
                    and (deeper := HEADING.match(lines[after]))
                    and len(deeper.group(1)) <= level
                ),
                len(lines),
            )
            return "\n".join(lines[:index] + lines[end:]).strip()
    return text


def _row(title: str, cells: list[str]) -> str:
    anchor = "compare-" + "-".join(title.lower().split())
    return (
        f'<div class="compare" id="{html_text(anchor)}"><h3 class="sub">{html_text(title)}</h3>'
        f'<div class="compare-row">{"".join(cells)}</div></div>'
    )


def _cell(plan: dict[str, Any], content: str) -> str:
    return (
        f'<div class="cell"><div class="cell-head">{plan_name(plan)} {badge(plan)}</div>'
        f'<div class="body">{content}</div></div>'
    )


def _missing(title: str) -> str:
    return f'<p class="empty">No {html_text(title)} section.</p>'


def critical_files_list(report: dict[str, Any], plan: dict[str, Any]) -> str:
    """A plan's critical files as a list of links with their reasons."""
    entries = plan.get("critical_files") or []
    if not entries:
        return '<p class="empty">No critical files named.</p>'
    items = [
        f"<li>{critical_file_link(report, entry)}"
        + (f" — {markdown_html(entry['reason'], inline=True)}" if entry.get("reason") else "")
        + "</li>"
        for entry in entries
    ]
    return '<ul class="files">' + "".join(items) + "</ul>"


def validation_section(report: dict[str, Any]) -> str:
    """A table of each plan's validation rounds and what the feedback asked to fix."""
    rows = []
    for plan in report["plans"]:
        validation = plan.get("validation") or {}
        feedback = validation.get("feedback") or []
        asked = (
            "<ul>"
            + "".join(f"<li>{markdown_html(p, inline=True)}</li>" for p in feedback)
            + "</ul>"
            if feedback
            else ""
        )
        tone = " fixed" if validation.get("fixed_after_feedback") else ""
        rows.append(
            f'<tr class="validation{tone}"><td>{plan_name(plan)}</td>'
            f'<td class="num">{int(validation.get("rounds") or 0)}</td>'
            f"<td>{html_text(validation_words(plan))}</td><td>{badge(plan)}</td>"
            f"<td>{asked}</td></tr>"
        )
    if not rows:
        return ""
    table = (
        '<div class="scroll"><table><thead><tr><th>Plan</th><th class="num">Rounds</th>'
        "<th>Validation</th><th>Result</th><th>Feedback sent</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return section("validation", "Validation rounds", table)
