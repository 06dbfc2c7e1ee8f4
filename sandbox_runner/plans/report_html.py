"""report.html: the report as one self-contained page (no script, nothing fetched), rendered
from the data of report.json and the plans' Markdown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_runner.plans.report_budget import budget_words
from sandbox_runner.plans.report_compare import comparison_section, validation_section
from sandbox_runner.plans.report_html_parts import (
    badge,
    commands_section,
    critical_files_section,
    disagreements_section,
    failures_section,
    file_link,
    plan_name,
    usage_section,
)
from sandbox_runner.plans.report_markdown import (
    REQUIREMENT_LINES,
    cost_text,
    duration,
    plan_counts,
    workspace_words,
)
from sandbox_runner.plans.report_patches import patches_html
from sandbox_runner.plans.report_revisions import DIFF_CSS, PlanRevisions, revisions_section
from sandbox_runner.plans.report_rounds import validation_words
from sandbox_runner.plans.report_style import REPORT_CSS
from sandbox_runner.safe_text import html_text, markdown_html, one_line

# The page needs nothing from anywhere: even if a sanitiser missed something, the browser
# runs no script, loads no image, font or style sheet and submits no form.
CONTENT_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)

STATUS_BADGES = {
    "ok": ("ok", "ok: every plan is valid"),
    "plan_invalid": ("warn", "plan_invalid"),
    "plan_failed": ("bad", "plan_failed"),
    "interrupted": ("warn", "interrupted"),
    "workspace_changed": ("bad", "workspace_changed"),
}


def render_html(
    report: dict[str, Any],
    bodies: Mapping[str, str],
    revisions: Mapping[str, PlanRevisions] | None = None,
) -> str:
    """The page (report.html) for a report built by build_report.

    Args:
        report: report.json's data. An optional `recommended` object (shaped like a plan
            entry: label, title, status, valid, plan_file, problems, tokens, cost_usd,
            wall_seconds) is shown first, before the perspectives' plans; nothing is shown
            for it when it is absent.
        bodies: each plan's Markdown (without front matter or `# Title`), by label.
        revisions: the plans with more than one kept revision, by label (see
            report_revisions.plan_revisions): shown collapsed, first against last.

    Returns:
        The page. Everything from a model, a repository or the user is escaped; the plans'
        Markdown is rendered by safe_text.markdown_html.
    """
    kept = revisions_section(report, revisions or {})
    sections = [
        _headline(report, revisions=bool(kept)),
        _requirements(report["requirements"]),
        _recommended(report.get("recommended"), bodies, report["plans"]),
        comparison_section(report, bodies),
        _plans(report["plans"], bodies),
        critical_files_section(report),
        validation_section(report),
        disagreements_section(report),
        failures_section(report),
        commands_section(report),
        patches_html(report),
        usage_section(report),
        kept,
    ]
    title = html_text(f"Plan report: {one_line(report['run'])}")
    links = '<a href="report.md">report.md</a> · <a href="report.json">report.json</a>'
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{title}</title>\n<style>{REPORT_CSS}{DIFF_CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(section for section in sections if section)
        + f"\n<footer>Written by planrun · {links}</footer>\n</main>\n</body>\n</html>\n"
    )


def _headline(report: dict[str, Any], *, revisions: bool) -> str:
    """The run's status, its facts, a chip per plan and a table of contents (Revisions in
    it when the page has that section)."""
    tone, badge = STATUS_BADGES.get(report["status"], ("bad", report["status"]))
    head = (
        f" at <code>{html_text(report['git_head'][:12])}</code>"
        if report["git_head"]
        else " (not a git repository, or no commit yet)"
    )
    totals = report["totals"]
    facts = [
        (
            "Plans",
            f"{html_text(plan_counts(report['plans']))} (exit code {int(report['exit_code'])})",
        ),
        *_agreement(report),
        ("Repository", f"<code>{html_text(report['repository'])}</code>{head}"),
        ("Workspace", html_text(workspace_words(report))),
        *([("Agent", html_text(report["agent_override"]))] if report["agent_override"] else []),
        *_synthesis_fact(report),
        (
            "Time",
            f"{html_text(report['started_at'])} to {html_text(report['finished_at'])} "
            f"({duration(report['wall_seconds'])})",
        ),
        (
            "Usage",
            f"{totals['tokens']['total']:,} tokens · cost "
            + html_text(cost_text(totals["cost_usd"]))
            + (f" · {html_text(words)}" if (words := budget_words(report)) else ""),
        ),
    ]
    chips = [_chip(report["recommended"], "recommended", "Recommended")] if _has_rec(report) else []
    chips += [
        _chip(plan, f"plan-{n}", plan_name(plan)) for n, plan in enumerate(report["plans"], 1)
    ]
    toc = [("recommended", "Recommended plan")] if _has_rec(report) else []
    toc += [("compare", "Section by section"), ("plans", "Plans")]
    toc += [("critical-files", "Critical files"), ("validation", "Validation")]
    toc += [("disagreements", "Disagreements"), ("failures", "Failures")]
    toc += [("usage", "Tokens, cost and time")] + (
        [("revisions", "Revisions")] if revisions else []
    )
    nav = " ".join(f'<a href="#{anchor}">{text}</a>' for anchor, text in toc)
    return (
        f'<section class="headline {tone}" id="top">\n'
        f"<h1>Plan report: {html_text(one_line(report['run']))} "
        f'<span class="badge {tone}">{html_text(badge)}</span></h1>\n'
        f'<div class="facts">{"".join(f"<div><b>{k}:</b> {v}</div>" for k, v in facts)}</div>\n'
        f'<div class="chips">{"".join(chips)}</div>\n<nav class="toc">{nav}</nav>\n</section>'
    )


def _agreement(report: dict[str, Any]) -> list[tuple[str, str]]:
    """How far the plans agree on critical files, in one line (nothing for fewer than two)."""
    files = report["critical_files"]
    if len(files["first_choices"]) < 2:
        return []
    shared = len(files["shared_by_all"])
    words = f"{shared} of {len(files['matrix'])} critical files named by every plan; "
    words += "the same first choice" if files["agree_on_first"] else "different first choices"
    return [("Agreement", html_text(words))]


def _synthesis_fact(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Why there is no recommended plan, when there is none and a reason is known."""
    note = (report.get("synthesis") or {}).get("note")
    if _has_rec(report) or not note or len(report["plans"]) < 2:
        return []
    return [("Recommended", html_text(f"none: {note}"))]


def _has_rec(report: dict[str, Any]) -> bool:
    return isinstance(report.get("recommended"), dict)


def _chip(plan: dict[str, Any], anchor: str, name: str) -> str:
    return f'<span class="chip"><a href="#{anchor}">{name}</a> {badge(plan)}</span>'


def _requirements(requirements: str) -> str:
    lines = requirements.strip().splitlines() or ["(none)"]
    shown = "\n".join(lines[:REQUIREMENT_LINES])
    more = len(lines) - REQUIREMENT_LINES
    note = f'<p class="legend">… {more} more lines in report.json</p>' if more > 0 else ""
    return (
        '<section id="requirements"><h2>Requirements</h2>'
        f'<pre class="requirements">{html_text(shown)}</pre>{note}</section>'
    )


def _recommended(recommended: Any, bodies: Mapping[str, str], plans: list[dict[str, Any]]) -> str:
    if not isinstance(recommended, dict):
        return ""
    body = bodies.get(str(recommended.get("label")), "")
    names = {plan["label"]: plan_name(plan) for plan in plans}
    sources = [
        names.get(str(label), html_text(str(label))) for label in recommended.get("sources") or []
    ]
    merged = f"Merged from {', '.join(sources)}" if sources else ""
    return (
        '<section class="recommended" id="recommended">\n<h2>Recommended plan</h2>\n'
        f'<article class="plan">{_plan_header(recommended, "Recommended", merged)}'
        f"{_problems(recommended)}{_plan_body(body, recommended, folded=False)}"
        "</article>\n</section>"
    )


def _plans(plans: list[dict[str, Any]], bodies: Mapping[str, str]) -> str:
    if not plans:
        return '<section id="plans"><h2>Plans</h2><p class="empty">No plan was run.</p></section>'
    columns = [
        f'<article class="plan" id="plan-{number}">{_plan_header(plan, plan_name(plan))}'
        f"{_problems(plan)}{_plan_body(bodies.get(plan['label'], ''), plan)}</article>"
        for number, plan in enumerate(plans, 1)
    ]
    heading = "Plans side by side" if len(plans) > 1 else "Plan"
    # The section comparison above shows the text; here each plan's figures, then its whole
    # text folded.
    return (
        f'<section id="plans"><h2>{heading}</h2>\n<div class="columns">\n'
        + "\n".join(columns)
        + "\n</div>\n</section>"
    )


def _plan_header(plan: dict[str, Any], name: str, note: str = "") -> str:
    """The plan's name, badge, title and figures; note (HTML) is one more line below them."""
    title = html_text(plan.get("title") or "(no title)")
    meta = [
        f"<code>{html_text(plan.get('model') or '?')}</code>",
        f"{plan['tokens']['total']:,} tokens",
        html_text(cost_text(plan.get("cost_usd"))),
        duration(float(plan.get("wall_seconds") or 0)),
    ]
    if plan.get("plan_file"):
        meta.append(file_link(plan["plan_file"]))
    if plan.get("transcript"):
        meta.append(file_link(plan["transcript"], "transcript"))
    if "validation" in plan:
        note = " · ".join(filter(None, [note, "Validation: " + html_text(validation_words(plan))]))
    return (
        f'<header><span class="name">{name}</span> {badge(plan)}'
        f'<div class="title">{title}</div><div class="meta">{" · ".join(meta)}</div>'
        + (f'<div class="meta">{note}</div>' if note else "")
        + "</header>"
    )


def _problems(plan: dict[str, Any]) -> str:
    problems = [html_text(p) for p in plan.get("problems") or []]
    if plan.get("reason"):
        problems.insert(0, html_text(plan["reason"]))
    if not problems:
        return ""
    return '<ul class="problems">' + "".join(f"<li>{p}</li>" for p in problems) + "</ul>"


def _plan_body(body: str, plan: dict[str, Any], *, folded: bool = True) -> str:
    """The plan rendered; folded behind a summary line when its sections are compared."""
    if not body.strip():
        return (
            f'<div class="body"><p class="empty">No plan was written ({plan["status"]}).</p></div>'
        )
    rendered = f'<div class="body">{markdown_html(body, heading_offset=1)}</div>'
    if not folded:
        return rendered
    return f'<details class="full"><summary>The whole plan</summary>{rendered}</details>'
