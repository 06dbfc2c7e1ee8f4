"""report.md, rendered from the data of report.json, and the description of report.json."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from sandbox_runner.plans.report_budget import budget_words
from sandbox_runner.plans.report_patches import patches_markdown
from sandbox_runner.plans.report_schema import REPORT_SCHEMA_DOC
from sandbox_runner.plans.report_workspace import check_time_words, workspace_words
from sandbox_runner.safe_text import markdown_text, one_line

__all__ = ["REPORT_SCHEMA_DOC", "render_markdown", "workspace_words"]

REQUIREMENT_LINES = 20
TABLE_SUMMARY_CHARS = 200

RUN_STATUS_WORDS = {
    "ok": "✅ ok",
    "plan_failed": "❌ plan_failed",
    "plan_invalid": "❌ plan_invalid",
    "interrupted": "⏹️ interrupted: stopped by a signal",
    "budget": "💸 budget: the cost budget stopped the run",
    "workspace_changed": "❌ workspace_changed: the workspace changed during the run",
}


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown page (report.md) for a report built by build_report.

    Text from the plans goes into tables with `|` and line breaks escaped; links are
    relative to the directory that holds the report.
    """
    parts = [
        _header(report),
        _requirements(report["requirements"]),
        _recommended(report),
        _plans_table(report["plans"]),
        _critical_files(report),
        _disagreements(report),
        _failures(report),
        _commands(report),
        patches_markdown(report),
        _totals(report),
    ]
    return "\n\n".join(part for part in parts if part) + "\n"


def _header(report: dict[str, Any]) -> str:
    status = RUN_STATUS_WORDS.get(report["status"], report["status"])
    status += (": " if ":" not in status else "; ") + plan_counts(report["plans"])
    head = (
        f" at `{report['git_head'][:12]}`"
        if report["git_head"]
        else " (not a git repository, or no commit yet)"
    )
    workspace = workspace_words(report)
    plans = " · ".join(f"{_mark(plan)} {_name(plan)}: {_state(plan)}" for plan in report["plans"])
    return "\n".join(
        [
            f"# Plan report: {report['run']}",
            "",
            f"**Status:** {status} (exit code {report['exit_code']})  ",
            f"**Plans:** {plans or 'none'}  ",
            f"**Repository:** {_code(report['repository'])}{head}; {workspace}  ",
            *_agent_line(report),
            f"**Time:** {report['started_at']} to {report['finished_at']} "
            f"({duration(report['wall_seconds'])})",
        ]
    )


def _agent_line(report: dict[str, Any]) -> list[str]:
    override = report.get("agent_override")
    return [f"**Agent:** ⚠️ {_safe(one_line(override))}  "] if override else []


def plan_counts(plans: list[dict[str, Any]]) -> str:
    """What happened to the plans, e.g. "1 of 3 plans failed, 1 incomplete, 1 valid"."""
    if not plans:
        return "no plan ran"
    counts = {
        "failed": sum(p["status"] == "failed" for p in plans),
        "incomplete": sum(p["status"] == "incomplete" for p in plans),
        "stopped by the budget": sum(p["status"] == "budget" for p in plans),
        "did not pass validation": sum(p["status"] == "complete" and not p["valid"] for p in plans),
        "valid": sum(bool(p["valid"]) for p in plans),
    }
    parts = [f"{count} {what}" for what, count in counts.items() if count]
    noun = "plan" if len(plans) == 1 else "plans"
    first_count, first_what = parts[0].split(" ", 1)
    parts[0] = f"{first_count} of {len(plans)} {noun} {first_what}"
    return ", ".join(parts)


def _requirements(requirements: str) -> str:
    lines = requirements.strip().splitlines() or ["(none)"]
    quoted = [f"> {_safe(line)}".rstrip() for line in lines[:REQUIREMENT_LINES]]
    if len(lines) > REQUIREMENT_LINES:
        quoted.append(f"> … ({len(lines) - REQUIREMENT_LINES} more lines in report.json)")
    return "## Requirements\n\n" + "\n".join(quoted)


def _recommended(report: dict[str, Any]) -> str:
    """The recommended plan: where it came from, its decisions and conflicts; or why none."""
    synthesis = report.get("synthesis") or {}
    plan = report.get("recommended")
    if not isinstance(plan, dict):
        # A single plan has nothing to merge: no need to say there is no recommended plan.
        note = synthesis.get("note") if len(report["plans"]) > 1 else ""
        return f"## Recommended plan\n\nNone: {_safe(note)}." if note else ""
    names = {p["label"]: _name(p) for p in report["plans"]}
    sources = ", ".join(names.get(label, _safe(label)) for label in plan.get("sources", []))
    title = _safe(plan["title"] or "(no title)")
    lines = ["## Recommended plan", ""]
    lines.append(f"{_mark(plan)} **{title}** ({_state(plan)}) · {_link(plan['plan_file'])}  ")
    lines.append(f"Merged from {sources or 'no plan'}; {_usage_words(plan)}.")
    if plan["status"] != "complete" or not plan["valid"]:
        reason = plan["reason"] or "; ".join(plan["problems"]) or plan["status"]
        lines += ["", f"The synthesis did not succeed: {_safe(reason)}. The plans are unaffected."]
    if plan["summary"]:
        lines += ["", f"> {_safe(_clip(plan['summary'], 600))}"]
    for key, heading in (
        ("decisions", "Decisions"),
        ("conflicts", "Conflicts and how they were resolved"),
    ):
        if plan.get(key):
            lines += ["", f"**{heading}:**", "", *(f"- {_safe(point)}" for point in plan[key])]
    if plan["critical_files"]:
        files = ", ".join(_code(entry["path"]) for entry in plan["critical_files"])
        lines += ["", f"**Critical files:** {files}"]
    return "\n".join(lines)


def _usage_words(plan: dict[str, Any]) -> str:
    return (
        f"{plan['tokens']['total']:,} tokens, cost {cost_text(plan['cost_usd'])}, "
        f"{duration(plan['wall_seconds'])}"
    )


def _plans_table(plans: list[dict[str, Any]]) -> str:
    if not plans:
        return "## Plans\n\nNo plan was run."
    rows: list[tuple[str, list[str]]] = [
        ("Status", [f"{_mark(p)} {p['status']}" for p in plans]),
        ("Valid", ["yes" if p["valid"] else "no" for p in plans]),
        ("Title", [_safe(p["title"] or "—") for p in plans]),
        ("Summary", [_safe(_clip(p["summary"], TABLE_SUMMARY_CHARS) or "—") for p in plans]),
        ("Model", [_code(p["model"]) for p in plans]),
        ("Turns", [str(p["turns"]) for p in plans]),
        ("Tool calls", [str(p["tool_calls"]) for p in plans]),
        ("Tokens", [f"{p['tokens']['total']:,}" for p in plans]),
        ("Cost", [cost_text(p["cost_usd"]) for p in plans]),
        ("Time", [duration(p["wall_seconds"]) for p in plans]),
        ("Plan", [_link(p["plan_file"]) for p in plans]),
        ("Transcript", [_link(p["transcript"]) for p in plans]),
    ]
    header = ["", *(_name(p) for p in plans)]
    return "## Plans side by side\n\n" + _table(header, [[name, *cells] for name, cells in rows])


def _critical_files(report: dict[str, Any]) -> str:
    files = report["critical_files"]
    naming = [plan for plan in report["plans"] if plan["critical_files"]]
    if not naming:
        return "## Critical files\n\nNo plan names critical files."
    if len(naming) == 1:
        lines = ["## Critical files", "", _file_list(naming[0])]
    else:
        lines = ["## Critical files", "", _file_matrix(files, naming)]
        lines += ["", _first_choices(files, naming)]
    silent = [plan for plan in report["plans"] if not plan["critical_files"]]
    if silent:
        names = ", ".join(f"{_name(p)} ({p['status']})" for p in silent)
        lines += ["", f"No critical files from: {names}."]
    return "\n".join(lines)


def _file_list(plan: dict[str, Any]) -> str:
    """One plan's critical files with their reasons."""
    rows = [
        [_code(entry["path"]) + ("" if entry["exists"] else " (not found)"), _safe(entry["reason"])]
        for entry in plan["critical_files"]
    ]
    return _table(["File", "Why"], rows)


def _file_matrix(files: dict[str, Any], naming: list[dict[str, Any]]) -> str:
    """Files × plans; the files every plan names come first, in bold."""
    shared = set(files["shared_by_all"])
    rows = []
    for row in files["matrix"]:
        path = f"**{_code(row['path'])}**" if row["path"] in shared else _code(row["path"])
        marks = [_file_mark(plan, row["path"]) for plan in naming]
        rows.append([path, *marks, f"{row['count']} of {len(naming)}"])
    return _table(["File", *map(_name, naming), "Named by"], rows)


def _first_choices(files: dict[str, Any], naming: list[dict[str, Any]]) -> str:
    if files["agree_on_first"]:
        first = next(iter(files["first_choices"].values()))
        return f"Every plan names {_code(first)} first."
    choices = ", ".join(
        f"{_name(plan)} → {_code(files['first_choices'][plan['label']])}" for plan in naming
    )
    return f"The plans name different files first: {choices}."


def _disagreements(report: dict[str, Any]) -> str:
    found = report["disagreements"]
    plans = [p for p in report["plans"] if p["label"] in found["approach"] | found["risks"]]
    if not plans:
        return ""
    several = len(plans) > 1
    lines = ["## Where the plans disagree" if several else "## Approach and risks"]
    lines += ["", "### Approach"]
    for plan in plans:
        approach = _safe(found["approach"].get(plan["label"], "—"))
        lines += ["", f"**{_name(plan)}**", "", f"> {approach}"]
    lines += ["", "### Risks"]
    for plan in plans:
        risks = found["risks"].get(plan["label"]) or ["—"]
        lines += ["", f"**{_name(plan)}**", "", *(f"- {_safe(risk)}" for risk in risks)]
    naming = [p for p in report["plans"] if p["label"] in found["unique_files"]]
    if len(naming) > 1:
        lines += ["", "### Files only one plan names", ""]
        unique = [(p, found["unique_files"][p["label"]]) for p in naming]
        lines += [
            f"- **{_name(p)}:** {', '.join(map(_code, paths))}" for p, paths in unique if paths
        ] or ["None: every critical file is named by at least two plans."]
    return "\n".join(lines)


def _failures(report: dict[str, Any]) -> str:
    names = {plan["label"]: _name(plan) for plan in report["plans"]}
    lines = ["## Failures and problems", ""]
    if not report["workspace_unchanged"]:
        lines.append(f"- ❌ **workspace changed:** {report['workspace_problem'] or 'unknown'}")
    for failure in report["failures"]:
        mark = "❌" if failure["status"] == "failed" else "⚠️"
        lines.append(
            f"- {mark} **{names[failure['label']]}** ({failure['status']}): "
            f"{_safe(failure['reason'])}"
        )
        lines += [f"  - {_safe(problem)}" for problem in failure["problems"]]
    recommended = report.get("recommended")
    if isinstance(recommended, dict) and not recommended["valid"]:
        mark = "❌" if recommended["status"] == "failed" else "⚠️"
        reason = recommended["reason"] or "the plan did not pass validation"
        lines.append(
            f"- {mark} **recommended plan** ({recommended['status']}): {_safe(reason)} "
            "(the synthesis; it does not change the exit code)"
        )
        lines += [f"  - {_safe(problem)}" for problem in recommended["problems"]]
    if len(lines) == 2:
        lines.append("None: every plan is complete and valid, and the workspace is unchanged.")
    return "\n".join(lines)


def _commands(report: dict[str, Any]) -> str:
    """The commands a scratch run's plans ran, with their exit status."""
    ran = [plan for plan in report["plans"] if plan.get("commands_run")]
    if report.get("plan_commands") != "scratch" or not ran:
        return ""
    lines = ["## Commands run", "", "In a scratch layer; nothing they wrote was kept.", ""]
    for plan in ran:
        lines.append(f"- **{_name(plan)}**")
        for entry in plan["commands_run"]:
            code = entry["exit_code"]
            status = "did not start" if code is None else f"exit {code}"
            status += ", timed out" if entry.get("timed_out") else ""
            lines.append(f"  - {_code(_clip(entry['command'], 200))} ({status})")
    return "\n".join(lines)


def _totals(report: dict[str, Any]) -> str:
    totals = report["totals"]
    tokens = totals["tokens"]
    cost = cost_text(totals["cost_usd"])
    unpriced = sum(plan["cost_usd"] is None for plan in report["plans"])
    if totals["cost_usd"] is not None and unpriced:
        cost += f" (unknown for {plural(unpriced, 'plan')})"
    return (
        f"**Totals:** {plural(totals['plans'], 'plan')}, {totals['complete']} complete, "
        f"{totals['valid']} valid{_with_recommended(report)} · "
        f"{tokens['total']:,} tokens (input {tokens['input']:,}, "
        f"output {tokens['output']:,}, cache write {tokens['cache_creation']:,}, "
        f"cache read {tokens['cache_read']:,}) · cost {cost} · "
        f"run time {duration(report['wall_seconds'])}"
        + (f" · {words}" if (words := budget_words(report)) else "")
        + (f" · workspace check: {check}" if (check := check_time_words(report)) else "")
    )


def _with_recommended(report: dict[str, Any]) -> str:
    return ", and the recommended plan" if isinstance(report.get("recommended"), dict) else ""


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [_row(header), _row(["---"] * len(header))]
    return "\n".join(lines + [_row(row) for row in rows])


def _row(cells: list[str]) -> str:
    return "|" + "|".join(f" {text} " if text else " " for text in map(_cell, cells)) + "|"


def _cell(text: str) -> str:
    """A table cell: pipes escaped and line breaks as <br>, so the row stays one row.

    The text is Markdown already: whatever came from a plan went through _safe.
    """
    lines = text.replace("|", "\\|").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "<br>".join(line.strip() for line in lines if line.strip())


def _safe(text: str) -> str:
    """Model-written text as inert Markdown: no control characters, raw HTML, images, or
    links other than http(s)."""
    return markdown_text(text)


def _name(plan: dict[str, Any]) -> str:
    return markdown_text(one_line(plan["perspective"] or plan["label"]))


def _mark(plan: dict[str, Any]) -> str:
    if plan["valid"]:
        return "✅"
    return "❌" if plan["status"] == "failed" else "⚠️"


def _state(plan: dict[str, Any]) -> str:
    if plan["status"] != "complete":
        return str(plan["status"])
    return "complete, valid" if plan["valid"] else "complete, invalid"


def _file_mark(plan: dict[str, Any], path: str) -> str:
    for entry in plan["critical_files"]:
        if entry["path"] == path:
            return "✓" if entry["exists"] else "✓ (not found)"
    return ""


def _code(text: str) -> str:
    """Inline code that survives backticks in the text (on one line, no control characters)."""
    text = one_line(text)
    runs = {len(run) for run in re.findall(r"`+", text)}
    length = 1
    while length in runs:
        length += 1
    fence = "`" * length
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def _link(path: str | None) -> str:
    """A link to a file beside the report, named by its file name."""
    return f"[{path.rsplit('/', 1)[-1]}]({quote(path)})" if path else "—"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def cost_text(cost: float | None) -> str:
    if cost is None:
        return "unknown"
    return f"≈ ${cost:.2f}" if cost >= 1 else f"≈ ${cost:.4f}"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + "…"
