"""report.md, rendered from the data of report.json, and the description of report.json."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_runner.plans.report_budget import budget_words
from sandbox_runner.plans.report_md_parts import (
    clip,
    md_code,
    md_link,
    md_mark,
    md_name,
    md_safe,
    md_table,
)
from sandbox_runner.plans.report_patches import patches_markdown
from sandbox_runner.plans.report_revisions import PlanRevisions
from sandbox_runner.plans.report_rounds import revisions_markdown, validation_markdown
from sandbox_runner.plans.report_schema import REPORT_SCHEMA_DOC
from sandbox_runner.plans.report_workspace import check_time_words, workspace_words
from sandbox_runner.safe_text import one_line

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


def render_markdown(
    report: dict[str, Any], revisions: Mapping[str, PlanRevisions] | None = None
) -> str:
    """The Markdown page (report.md) for a report built by build_report; REVISIONS are
    the plans with more than one kept revision, as report.html gets them.

    Text from the plans goes into tables with `|` and line breaks escaped; links are
    relative to the directory that holds the report.
    """
    parts = [
        _header(report),
        _requirements(report["requirements"]),
        _recommended(report),
        _plans_table(report["plans"]),
        validation_markdown(report),
        _critical_files(report),
        _disagreements(report),
        _failures(report),
        _commands(report),
        patches_markdown(report),
        revisions_markdown(report, revisions or {}),
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
    plans = " · ".join(
        f"{md_mark(plan)} {md_name(plan)}: {_state(plan)}" for plan in report["plans"]
    )
    return "\n".join(
        [
            f"# Plan report: {report['run']}",
            "",
            f"**Status:** {status} (exit code {report['exit_code']})  ",
            f"**Plans:** {plans or 'none'}  ",
            f"**Repository:** {md_code(report['repository'])}{head}; {workspace}  ",
            *_agent_line(report),
            f"**Time:** {report['started_at']} to {report['finished_at']} "
            f"({duration(report['wall_seconds'])})",
        ]
    )


def _agent_line(report: dict[str, Any]) -> list[str]:
    override = report.get("agent_override")
    return [f"**Agent:** ⚠️ {md_safe(one_line(override))}  "] if override else []


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
    quoted = [f"> {md_safe(line)}".rstrip() for line in lines[:REQUIREMENT_LINES]]
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
        return f"## Recommended plan\n\nNone: {md_safe(note)}." if note else ""
    names = {p["label"]: md_name(p) for p in report["plans"]}
    sources = ", ".join(names.get(label, md_safe(label)) for label in plan.get("sources", []))
    title = md_safe(plan["title"] or "(no title)")
    lines = ["## Recommended plan", ""]
    lines.append(f"{md_mark(plan)} **{title}** ({_state(plan)}) · {md_link(plan['plan_file'])}  ")
    lines.append(f"Merged from {sources or 'no plan'}; {_usage_words(plan)}.")
    if plan["status"] != "complete" or not plan["valid"]:
        reason = plan["reason"] or "; ".join(plan["problems"]) or plan["status"]
        lines += [
            "",
            f"The synthesis did not succeed: {md_safe(reason)}. The plans are unaffected.",
        ]
    if plan["summary"]:
        lines += ["", f"> {md_safe(clip(plan['summary'], 600))}"]
    for key, heading in (
        ("decisions", "Decisions"),
        ("conflicts", "Conflicts and how they were resolved"),
    ):
        if plan.get(key):
            lines += ["", f"**{heading}:**", "", *(f"- {md_safe(point)}" for point in plan[key])]
    if plan["critical_files"]:
        files = ", ".join(md_code(entry["path"]) for entry in plan["critical_files"])
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
        ("Status", [f"{md_mark(p)} {p['status']}" for p in plans]),
        ("Valid", ["yes" if p["valid"] else "no" for p in plans]),
        ("Title", [md_safe(p["title"] or "—") for p in plans]),
        ("Summary", [md_safe(clip(p["summary"], TABLE_SUMMARY_CHARS) or "—") for p in plans]),
        ("Model", [md_code(p["model"]) for p in plans]),
        ("Turns", [str(p["turns"]) for p in plans]),
        ("Tool calls", [str(p["tool_calls"]) for p in plans]),
        ("Tokens", [f"{p['tokens']['total']:,}" for p in plans]),
        ("Cost", [cost_text(p["cost_usd"]) for p in plans]),
        ("Time", [duration(p["wall_seconds"]) for p in plans]),
        ("Plan", [md_link(p["plan_file"]) for p in plans]),
        ("Transcript", [md_link(p["transcript"]) for p in plans]),
    ]
    header = ["", *(md_name(p) for p in plans)]
    return "## Plans side by side\n\n" + md_table(header, [[name, *cells] for name, cells in rows])


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
        names = ", ".join(f"{md_name(p)} ({p['status']})" for p in silent)
        lines += ["", f"No critical files from: {names}."]
    return "\n".join(lines)


def _file_list(plan: dict[str, Any]) -> str:
    """One plan's critical files with their reasons."""
    rows = [
        [
            md_code(entry["path"]) + ("" if entry["exists"] else " (not found)"),
            md_safe(entry["reason"]),
        ]
        for entry in plan["critical_files"]
    ]
    return md_table(["File", "Why"], rows)


def _file_matrix(files: dict[str, Any], naming: list[dict[str, Any]]) -> str:
    """Files × plans; the files every plan names come first, in bold."""
    shared = set(files["shared_by_all"])
    rows = []
    for row in files["matrix"]:
        path = f"**{md_code(row['path'])}**" if row["path"] in shared else md_code(row["path"])
        marks = [_file_mark(plan, row["path"]) for plan in naming]
        rows.append([path, *marks, f"{row['count']} of {len(naming)}"])
    return md_table(["File", *map(md_name, naming), "Named by"], rows)


def _first_choices(files: dict[str, Any], naming: list[dict[str, Any]]) -> str:
    if files["agree_on_first"]:
        first = next(iter(files["first_choices"].values()))
        return f"Every plan names {md_code(first)} first."
    choices = ", ".join(
        f"{md_name(plan)} → {md_code(files['first_choices'][plan['label']])}" for plan in naming
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
        approach = md_safe(found["approach"].get(plan["label"], "—"))
        lines += ["", f"**{md_name(plan)}**", "", f"> {approach}"]
    lines += ["", "### Risks"]
    for plan in plans:
        risks = found["risks"].get(plan["label"]) or ["—"]
        lines += ["", f"**{md_name(plan)}**", "", *(f"- {md_safe(risk)}" for risk in risks)]
    naming = [p for p in report["plans"] if p["label"] in found["unique_files"]]
    if len(naming) > 1:
        lines += ["", "### Files only one plan names", ""]
        unique = [(p, found["unique_files"][p["label"]]) for p in naming]
        lines += [
            f"- **{md_name(p)}:** {', '.join(map(md_code, paths))}" for p, paths in unique if paths
        ] or ["None: every critical file is named by at least two plans."]
    return "\n".join(lines)


def _failures(report: dict[str, Any]) -> str:
    names = {plan["label"]: md_name(plan) for plan in report["plans"]}
    lines = ["## Failures and problems", ""]
    if not report["workspace_unchanged"]:
        lines.append(f"- ❌ **workspace changed:** {report['workspace_problem'] or 'unknown'}")
    for failure in report["failures"]:
        mark = "❌" if failure["status"] == "failed" else "⚠️"
        lines.append(
            f"- {mark} **{names[failure['label']]}** ({failure['status']}): "
            f"{md_safe(failure['reason'])}"
        )
        lines += [f"  - {md_safe(problem)}" for problem in failure["problems"]]
    recommended = report.get("recommended")
    if isinstance(recommended, dict) and not recommended["valid"]:
        mark = "❌" if recommended["status"] == "failed" else "⚠️"
        reason = recommended["reason"] or "the plan did not pass validation"
        lines.append(
            f"- {mark} **recommended plan** ({recommended['status']}): {md_safe(reason)} "
            "(the synthesis; it does not change the exit code)"
        )
        lines += [f"  - {md_safe(problem)}" for problem in recommended["problems"]]
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
        lines.append(f"- **{md_name(plan)}**")
        for entry in plan["commands_run"]:
            code = entry["exit_code"]
            status = "did not start" if code is None else f"exit {code}"
            status += ", timed out" if entry.get("timed_out") else ""
            lines.append(f"  - {md_code(clip(entry['command'], 200))} ({status})")
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


def _state(plan: dict[str, Any]) -> str:
    if plan["status"] != "complete":
        return str(plan["status"])
    return "complete, valid" if plan["valid"] else "complete, invalid"


def _file_mark(plan: dict[str, Any], path: str) -> str:
    for entry in plan["critical_files"]:
        if entry["path"] == path:
            return "✓" if entry["exists"] else "✓ (not found)"
    return ""


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
