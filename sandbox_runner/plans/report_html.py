"""report.html: the report as one self-contained page (no script, nothing fetched), rendered
from the data of report.json and the plans' Markdown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from sandbox_runner.plans.report_markdown import (
    REQUIREMENT_LINES,
    cost_text,
    duration,
    plan_counts,
    plural,
    workspace_words,
)
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


def render_html(report: dict[str, Any], bodies: Mapping[str, str]) -> str:
    """The page (report.html) for a report built by build_report.

    Args:
        report: report.json's data. An optional `recommended` object (shaped like a plan
            entry: label, title, status, valid, plan_file, problems, tokens, cost_usd,
            wall_seconds) is shown first, before the perspectives' plans; nothing is shown
            for it when it is absent.
        bodies: each plan's Markdown (without front matter or `# Title`), by label.

    Returns:
        The page. Everything from a model, a repository or the user is escaped; the plans'
        Markdown is rendered by safe_text.markdown_html.
    """
    sections = [
        _headline(report),
        _requirements(report["requirements"]),
        _recommended(report.get("recommended"), bodies),
        _plans(report["plans"], bodies),
        _critical_files(report),
        _disagreements(report),
        _failures(report),
        _usage(report),
    ]
    title = html_text(f"Plan report: {one_line(report['run'])}")
    links = '<a href="report.md">report.md</a> · <a href="report.json">report.json</a>'
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{title}</title>\n<style>{REPORT_CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(section for section in sections if section)
        + f"\n<footer>Written by planrun · {links}</footer>\n</main>\n</body>\n</html>\n"
    )


def _headline(report: dict[str, Any]) -> str:
    tone, words = STATUS_BADGES.get(report["status"], ("bad", report["status"]))
    head = f"<code>{html_text(report['git_head'][:12])}</code>" if report["git_head"] else "no HEAD"
    totals = report["totals"]
    facts = [
        (
            "Plans",
            f"{html_text(plan_counts(report['plans']))} (exit code {int(report['exit_code'])})",
        ),
        *_agreement(report),
        ("Repository", f"<code>{html_text(report['repository'])}</code> at {head}"),
        ("Workspace", html_text(workspace_words(report))),
        *([("Agent", html_text(report["agent_override"]))] if report["agent_override"] else []),
        (
            "Time",
            f"{html_text(report['started_at'])} to {html_text(report['finished_at'])} "
            f"({duration(report['wall_seconds'])})",
        ),
        (
            "Usage",
            f"{totals['tokens']['total']:,} tokens · cost "
            + html_text(cost_text(totals["cost_usd"])),
        ),
    ]
    chips = [_chip(report["recommended"], "recommended", "Recommended")] if _has_rec(report) else []
    chips += [_chip(plan, f"plan-{n}", _name(plan)) for n, plan in enumerate(report["plans"], 1)]
    toc = [("plans", "Plans"), ("critical-files", "Critical files")]
    toc += [("disagreements", "Disagreements"), ("failures", "Failures")]
    toc += [("usage", "Tokens, cost and time")]
    nav = " ".join(f'<a href="#{anchor}">{text}</a>' for anchor, text in toc)
    return (
        f'<section class="headline {tone}" id="top">\n'
        f"<h1>Plan report: {html_text(one_line(report['run']))} "
        f'<span class="badge {tone}">{html_text(words)}</span></h1>\n'
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


def _has_rec(report: dict[str, Any]) -> bool:
    return isinstance(report.get("recommended"), dict)


def _chip(plan: dict[str, Any], anchor: str, name: str) -> str:
    return f'<span class="chip"><a href="#{anchor}">{name}</a> {_badge(plan)}</span>'


def _requirements(requirements: str) -> str:
    lines = requirements.strip().splitlines() or ["(none)"]
    shown = "\n".join(lines[:REQUIREMENT_LINES])
    more = len(lines) - REQUIREMENT_LINES
    note = f'<p class="legend">… {more} more lines in report.json</p>' if more > 0 else ""
    return (
        '<section id="requirements"><h2>Requirements</h2>'
        f'<pre class="requirements">{html_text(shown)}</pre>{note}</section>'
    )


def _recommended(recommended: Any, bodies: Mapping[str, str]) -> str:
    if not isinstance(recommended, dict):
        return ""
    body = bodies.get(str(recommended.get("label")), "")
    return (
        '<section class="recommended" id="recommended">\n<h2>Recommended plan</h2>\n'
        f'<article class="plan">{_plan_header(recommended, "Recommended")}'
        f"{_problems(recommended)}{_plan_body(body, recommended)}</article>\n</section>"
    )


def _plans(plans: list[dict[str, Any]], bodies: Mapping[str, str]) -> str:
    if not plans:
        return '<section id="plans"><h2>Plans</h2><p class="empty">No plan was run.</p></section>'
    columns = [
        f'<article class="plan" id="plan-{number}">{_plan_header(plan, _name(plan))}'
        f"{_problems(plan)}{_plan_body(bodies.get(plan['label'], ''), plan)}</article>"
        for number, plan in enumerate(plans, 1)
    ]
    heading = "Plans side by side" if len(plans) > 1 else "Plan"
    return (
        f'<section id="plans"><h2>{heading}</h2>\n<div class="columns">\n'
        + "\n".join(columns)
        + "\n</div>\n</section>"
    )


def _plan_header(plan: dict[str, Any], name: str) -> str:
    title = html_text(plan.get("title") or "(no title)")
    meta = [
        f"<code>{html_text(plan.get('model') or '?')}</code>",
        f"{plan['tokens']['total']:,} tokens",
        html_text(cost_text(plan.get("cost_usd"))),
        duration(float(plan.get("wall_seconds") or 0)),
    ]
    if plan.get("plan_file"):
        meta.append(_link(plan["plan_file"]))
    return (
        f'<header><span class="name">{name}</span> {_badge(plan)}'
        f'<div class="title">{title}</div><div class="meta">{" · ".join(meta)}</div></header>'
    )


def _problems(plan: dict[str, Any]) -> str:
    problems = [html_text(p) for p in plan.get("problems") or []]
    if plan.get("reason"):
        problems.insert(0, html_text(plan["reason"]))
    if not problems:
        return ""
    return '<ul class="problems">' + "".join(f"<li>{p}</li>" for p in problems) + "</ul>"


def _plan_body(body: str, plan: dict[str, Any]) -> str:
    if not body.strip():
        return (
            f'<div class="body"><p class="empty">No plan was written ({plan["status"]}).</p></div>'
        )
    return f'<div class="body">{markdown_html(body, heading_offset=1)}</div>'


def _critical_files(report: dict[str, Any]) -> str:
    files = report["critical_files"]
    naming = [plan for plan in report["plans"] if plan["critical_files"]]
    if not naming:
        return _section(
            "critical-files", "Critical files", '<p class="empty">No plan names critical files.</p>'
        )
    shared = set(files["shared_by_all"]) if len(naming) > 1 else set()
    header = "".join(f"<th>{_name(plan)}</th>" for plan in naming)
    rows = []
    for row in files["matrix"]:
        marks = "".join(_file_mark(plan, row["path"]) for plan in naming)
        css = ' class="shared"' if row["path"] in shared else ""
        rows.append(
            f"<tr{css}><td><code>{html_text(row['path'])}</code></td>{marks}"
            f'<td class="num">{row["count"]} of {len(naming)}</td></tr>'
        )
    table = (
        f'<div class="scroll"><table class="matrix"><thead><tr><th>File</th>{header}'
        f'<th class="num">Named by</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )
    legend = ""
    if shared:
        legend = '<p class="legend"><span class="swatch"></span>named by every plan</p>'
    return _section(
        "critical-files", "Critical files", table + legend + _first_choices(files, naming)
    )


def _file_mark(plan: dict[str, Any], path: str) -> str:
    for entry in plan["critical_files"]:
        if entry["path"] == path:
            mark = "✓" if entry["exists"] else "✓ not found"
            return f'<td class="mark" title="{html_text(entry["reason"])}">{mark}</td>'
    return "<td></td>"


def _first_choices(files: dict[str, Any], naming: list[dict[str, Any]]) -> str:
    if len(naming) < 2:
        return ""
    if files["agree_on_first"]:
        first = next(iter(files["first_choices"].values()))
        return f'<p class="legend">Every plan names <code>{html_text(first)}</code> first.</p>'
    choices = ", ".join(
        f"{_name(plan)} → <code>{html_text(files['first_choices'][plan['label']])}</code>"
        for plan in naming
    )
    return f'<p class="legend">The plans name different files first: {choices}.</p>'


def _disagreements(report: dict[str, Any]) -> str:
    found = report["disagreements"]
    plans = [p for p in report["plans"] if p["label"] in found["approach"] | found["risks"]]
    if not plans:
        return ""
    approach = [
        _card(
            plan, f"<p>{markdown_html(found['approach'].get(plan['label'], '—'), inline=True)}</p>"
        )
        for plan in plans
    ]
    risks = [_card(plan, _list(found["risks"].get(plan["label"]) or ["—"])) for plan in plans]
    parts = [
        '<h3 class="sub">Approach</h3><div class="cards">' + "".join(approach) + "</div>",
        '<h3 class="sub">Risks</h3><div class="cards">' + "".join(risks) + "</div>",
    ]
    unique = [(p, found["unique_files"].get(p["label"])) for p in report["plans"]]
    unique = [(plan, paths) for plan, paths in unique if paths]
    if len(found["unique_files"]) > 1:
        cards = [_card(plan, _list(paths, code=True)) for plan, paths in unique]
        parts.append('<h3 class="sub">Files only one plan names</h3>')
        parts.append(
            f'<div class="cards">{"".join(cards)}</div>'
            if cards
            else '<p class="empty">None: every critical file is named by at least two plans.</p>'
        )
    title = "Where the plans disagree" if len(plans) > 1 else "Approach and risks"
    return _section("disagreements", title, "".join(parts))


def _card(plan: dict[str, Any], content: str) -> str:
    return f'<div class="card"><h4>{_name(plan)}</h4>{content}</div>'


def _list(items: list[str], *, code: bool = False, markdown: bool = False) -> str:
    def item_html(text: str) -> str:
        if markdown:
            return markdown_html(text, inline=True)
        return f"<code>{html_text(text)}</code>" if code else html_text(text)

    return "<ul>" + "".join(f"<li>{item_html(item)}</li>" for item in items) + "</ul>"


def _failures(report: dict[str, Any]) -> str:
    names = {plan["label"]: _name(plan) for plan in report["plans"]}
    rows = []
    if not report["workspace_unchanged"]:
        problem = html_text(report["workspace_problem"] or "unknown")
        rows.append(
            '<tr class="failure"><td>workspace</td><td>changed</td>'
            f"<td>{problem}</td><td></td></tr>"
        )
    for failure in report["failures"]:
        rows.append(
            f'<tr class="failure"><td>{names.get(failure["label"], "?")}</td>'
            f"<td>{html_text(failure['status'])}</td><td>{html_text(failure['reason'])}</td>"
            f"<td>{_list(failure['problems']) if failure['problems'] else ''}</td></tr>"
        )
    if not rows:
        none = "None: every plan is complete and valid, and the workspace is unchanged."
        return _section("failures", "Failures and problems", f'<p class="empty">{none}</p>')
    table = (
        '<div class="scroll"><table><thead><tr><th>Plan</th><th>Status</th><th>Reason</th>'
        f"<th>Problems</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    return _section("failures", "Failures and problems", table)


def _usage(report: dict[str, Any]) -> str:
    columns = ["Plan", "Status", "Model", "Turns", "Tool calls", "Input", "Output"]
    columns += ["Cache write", "Cache read", "Tokens", "Cost", "Time"]
    rows = [_usage_row(_name(plan), plan) for plan in report["plans"]]
    if _has_rec(report):
        rows.insert(0, _usage_row("Recommended", report["recommended"]))
    totals = report["totals"]
    total_cells = [
        totals["tokens"][key]
        for key in ("input", "output", "cache_creation", "cache_read", "total")
    ]
    rows.append(
        f'<tr class="total"><td>Total</td><td>{plural(totals["plans"], "plan")}</td>'
        + "<td></td>" * 3
        + "".join(f'<td class="num">{value:,}</td>' for value in total_cells)
        + f'<td class="num">{html_text(cost_text(totals["cost_usd"]))}</td>'
        f'<td class="num">{duration(report["wall_seconds"])}</td></tr>'
    )
    head = "".join(
        f"<th>{column}</th>" if number < 3 else f'<th class="num">{column}</th>'
        for number, column in enumerate(columns)
    )
    table = (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return _section("usage", "Tokens, cost and time", table)


def _usage_row(name: str, plan: dict[str, Any]) -> str:
    tokens = plan["tokens"]
    numbers = [plan.get("turns", 0), plan.get("tool_calls", 0)]
    numbers += [tokens[key] for key in ("input", "output", "cache_creation", "cache_read", "total")]
    return (
        f"<tr><td>{name}</td><td>{_badge(plan)}</td>"
        f"<td><code>{html_text(plan.get('model') or '?')}</code></td>"
        + "".join(f'<td class="num">{int(value or 0):,}</td>' for value in numbers)
        + f'<td class="num">{html_text(cost_text(plan.get("cost_usd")))}</td>'
        f'<td class="num">{duration(float(plan.get("wall_seconds") or 0))}</td></tr>'
    )


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}">\n<h2>{title}</h2>\n{content}\n</section>'


def _badge(plan: dict[str, Any]) -> str:
    if plan.get("valid"):
        return '<span class="badge ok">valid</span>'
    status = str(plan.get("status"))
    if status == "complete":
        return '<span class="badge warn">invalid</span>'
    tone = "bad" if status == "failed" else "warn"
    return f'<span class="badge {tone}">{html_text(status)}</span>'


def _name(plan: dict[str, Any]) -> str:
    return html_text(one_line(plan.get("perspective") or plan.get("label") or "?"))


def _link(path: str) -> str:
    """A link to a file beside the report; quote() keeps the href a relative path."""
    return f'<a href="{html_text(quote(path))}">{html_text(path.rsplit("/", 1)[-1])}</a>'
