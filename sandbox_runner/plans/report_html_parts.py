"""The parts of report.html that compare the plans: the critical-files matrix, where they
disagree, failures, and tokens, cost and time; and the small pieces every part uses."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from sandbox_runner.plans.report_markdown import cost_text, duration, plural
from sandbox_runner.plans.report_workspace import check_time_words
from sandbox_runner.safe_text import html_text, markdown_html, one_line


def critical_files_section(report: dict[str, Any]) -> str:
    files = report["critical_files"]
    naming = [plan for plan in report["plans"] if plan["critical_files"]]
    if not naming:
        return section(
            "critical-files", "Critical files", '<p class="empty">No plan names critical files.</p>'
        )
    shared = set(files["shared_by_all"]) if len(naming) > 1 else set()
    header = "".join(f"<th>{plan_name(plan)}</th>" for plan in naming)
    rows = []
    for row in files["matrix"]:
        marks = "".join(_file_mark(plan, row["path"]) for plan in naming)
        css = ' class="shared"' if row["path"] in shared else ""
        rows.append(
            f"<tr{css}><td>{critical_file_link(report, _matrix_entry(naming, row['path']))}</td>"
            f"{marks}"
            f'<td class="num">{row["count"]} of {len(naming)}</td></tr>'
        )
    table = (
        f'<div class="scroll"><table class="matrix"><thead><tr><th>File</th>{header}'
        f'<th class="num">Named by</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )
    legend = ""
    if shared:
        legend = '<p class="legend"><span class="swatch"></span>named by every plan</p>'
    return section(
        "critical-files", "Critical files", table + legend + _first_choices(files, naming)
    )


def _matrix_entry(naming: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """A matrix row's file as a plan entry: it exists when a plan found it."""
    exists = any(
        e["exists"] for plan in naming for e in plan["critical_files"] if e["path"] == path
    )
    return {"path": path, "exists": exists}


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
        f"{plan_name(plan)} → <code>{html_text(files['first_choices'][plan['label']])}</code>"
        for plan in naming
    )
    return f'<p class="legend">The plans name different files first: {choices}.</p>'


def disagreements_section(report: dict[str, Any]) -> str:
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
    return section("disagreements", title, "".join(parts))


def _card(plan: dict[str, Any], content: str) -> str:
    return f'<div class="card"><h4>{plan_name(plan)}</h4>{content}</div>'


def _list(items: list[str], *, code: bool = False, markdown: bool = False) -> str:
    def item_html(text: str) -> str:
        if markdown:
            return markdown_html(text, inline=True)
        return f"<code>{html_text(text)}</code>" if code else html_text(text)

    return "<ul>" + "".join(f"<li>{item_html(item)}</li>" for item in items) + "</ul>"


def failures_section(report: dict[str, Any]) -> str:
    names = {plan["label"]: plan_name(plan) for plan in report["plans"]}
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
    recommended = report.get("recommended")
    if isinstance(recommended, dict) and not recommended.get("valid"):
        reason = recommended.get("reason") or "the plan did not pass validation"
        problems = recommended.get("problems") or []
        rows.append(
            '<tr class="failure"><td>Recommended</td>'
            f"<td>{html_text(str(recommended.get('status')))}</td>"
            f"<td>{html_text(reason)} (the synthesis; it does not change the exit code)</td>"
            f"<td>{_list(problems) if problems else ''}</td></tr>"
        )
    if not rows:
        none = "None: every plan is complete and valid, and the workspace is unchanged."
        return section("failures", "Failures and problems", f'<p class="empty">{none}</p>')
    table = (
        '<div class="scroll"><table><thead><tr><th>Plan</th><th>Status</th><th>Reason</th>'
        f"<th>Problems</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    return section("failures", "Failures and problems", table)


def usage_section(report: dict[str, Any]) -> str:
    columns = ["Plan", "Status", "Model", "Turns", "Tool calls", "Input", "Output"]
    columns += ["Cache write", "Cache read", "Tokens", "Cost", "Time"]
    rows = [_usage_row(plan_name(plan), plan) for plan in report["plans"]]
    extra = ""
    if isinstance(report.get("recommended"), dict):
        rows.insert(0, _usage_row("Recommended", report["recommended"]))
        extra = " + recommended"
    totals = report["totals"]
    total_cells = [
        totals["tokens"][key]
        for key in ("input", "output", "cache_creation", "cache_read", "total")
    ]
    rows.append(
        f'<tr class="total"><td>Total</td><td>{plural(totals["plans"], "plan")}{extra}</td>'
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
    check = check_time_words(report).replace("`", "")
    check_line = f"<p>Workspace check: {html_text(check)}</p>" if check else ""
    return section("usage", "Tokens, cost and time", table + check_line)


def _usage_row(name: str, plan: dict[str, Any]) -> str:
    tokens = plan["tokens"]
    numbers = [plan.get("turns", 0), plan.get("tool_calls", 0)]
    numbers += [tokens[key] for key in ("input", "output", "cache_creation", "cache_read", "total")]
    return (
        f"<tr><td>{name}</td><td>{badge(plan)}</td>"
        f"<td><code>{html_text(plan.get('model') or '?')}</code></td>"
        + "".join(f'<td class="num">{int(value or 0):,}</td>' for value in numbers)
        + f'<td class="num">{html_text(cost_text(plan.get("cost_usd")))}</td>'
        f'<td class="num">{duration(float(plan.get("wall_seconds") or 0))}</td></tr>'
    )


def commands_section(report: dict[str, Any]) -> str:
    """The commands a scratch run's plans ran, with their exit status ("" otherwise)."""
    ran = [plan for plan in report["plans"] if plan.get("commands_run")]
    if report.get("plan_commands") != "scratch" or not ran:
        return ""
    rows = []
    for plan in ran:
        for entry in plan["commands_run"]:
            code = entry.get("exit_code")
            status = "did not start" if code is None else f"exit {code}"
            status += ", timed out" if entry.get("timed_out") else ""
            rows.append(
                f"<tr><td>{plan_name(plan)}</td><td><code>{html_text(entry['command'])}</code>"
                f"</td><td>{html_text(status)}</td></tr>"
            )
    table = (
        '<p>In a scratch layer; nothing they wrote was kept.</p><div class="scroll"><table>'
        "<thead><tr><th>Plan</th><th>Command</th><th>Status</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return section("commands", "Commands run", table)


def section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}">\n<h2>{title}</h2>\n{content}\n</section>'


def badge(plan: dict[str, Any]) -> str:
    if plan.get("valid"):
        return '<span class="badge ok">valid</span>'
    status = str(plan.get("status"))
    if status == "complete":
        return '<span class="badge warn">invalid</span>'
    tone = "bad" if status == "failed" else "warn"
    return f'<span class="badge {tone}">{html_text(status)}</span>'


def plan_name(plan: dict[str, Any]) -> str:
    return html_text(one_line(plan.get("perspective") or plan.get("label") or "?"))


def file_link(path: str, text: str = "") -> str:
    """A link to a file beside the report, shown as text or its name; quote() keeps the
    href a relative path."""
    shown = text or path.rsplit("/", 1)[-1]
    return f'<a href="{html_text(quote(path))}">{html_text(shown)}</a>'


def critical_file_link(report: dict[str, Any], entry: Mapping[str, Any]) -> str:
    """`path:line` as a link that works from the report's directory when the file exists in
    a local repository; plainly styled code otherwise."""
    path = str(entry.get("path") or "")
    line = entry.get("line")
    shown = f"{path}:{line}" if line else path
    code = f"<code>{html_text(shown)}</code>"
    href = _file_href(report, path) if entry.get("exists") else None
    if href is None:
        return f'<span class="file">{code}</span>'
    return f'<a class="file" href="{html_text(href)}">{code}</a>'


def _file_href(report: dict[str, Any], path: str) -> str | None:
    """The repository's file relative to the report's directory, or None when either is not
    a local absolute path or the path could leave the repository."""
    repository, out_dir = str(report.get("repository") or ""), str(report.get("out_dir") or "")
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not path:
        return None
    if not (os.path.isabs(repository) and os.path.isabs(out_dir)):
        return None
    target = os.path.relpath(os.path.join(repository, *relative.parts), out_dir)
    return quote(PurePosixPath(*target.split(os.sep)).as_posix())
