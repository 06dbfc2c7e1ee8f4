"""report.md, rendered from the data of report.json, and the description of report.json."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from sandbox_runner.safe_text import markdown_text, one_line

REQUIREMENT_LINES = 20
TABLE_SUMMARY_CHARS = 200

RUN_STATUS_WORDS = {
    "ok": "✅ ok",
    "plan_failed": "❌ plan_failed",
    "plan_invalid": "❌ plan_invalid",
    "interrupted": "⏹️ interrupted: stopped by a signal",
    "workspace_changed": "❌ workspace_changed: the workspace changed during the run",
}


REPORT_SCHEMA_DOC = """\
`report.json` (schema_version 1) is written next to the plans of a run, with `report.md`.
Paths are relative to the directory that holds the report unless said otherwise; times
are ISO 8601; costs are estimates at list price in USD, `null` when the model's price is
unknown.

Top level:

- `schema_version`: 1; a change that breaks readers increments it.
- `run`: the run's random name.
- `out_dir`: the directory holding the plans and the report (absolute, as given).
- `requirements`: the requirements the plans answer, in full.
- `repository`: the workspace that was planned against.
- `git_head`: the workspace's git HEAD commit, or `null` outside git.
- `started_at`, `finished_at`: when the run started and finished.
- `wall_seconds`: the run's elapsed time (plans run concurrently).
- `exit_code`: the exit code of `planrun plan`.
- `status`: the most serious of: `workspace_changed` when the workspace changed during
  the run, whatever the plans did; `interrupted` when a signal (Ctrl-C, SIGTERM) stopped
  the run; `plan_failed` when a plan failed or is incomplete (or no plan ran);
  `plan_invalid` when every plan completed but one or more did not pass validation;
  otherwise `ok` (every plan complete and valid, exit code 0).
- `workspace_unchanged`: whether the workspace was left as it was, as far as it was
  checked (see `workspace_check`).
- `workspace_problem`: what changed in the workspace, `""` when nothing did.
- `agent_override`: which user or project file replaced the built-in agent the plans
  ran with (its prompt, tools or model), or `null`.
- `workspace_check`: what was compared before and after the run: `full` (the tree
  fingerprint and `git status`; outside git, the fingerprint is all there is), `files_only`
  (the fingerprint only: `git status` could not run, or the run was interrupted) or
  `none` (nothing could be compared).
- `workspace_check_note`: why the check was not `full`, `""` when it was.
- `plans`: one object per perspective, described below.
- `critical_files`: the critical files across plans:
  - `matrix`: one `{"path", "named_by": [labels], "count"}` per file any plan names,
    most-named first, then by path;
  - `shared_by_all`: the paths every plan that names critical files names;
  - `first_choices`: `{label: path}`, each plan's first critical file;
  - `agree_on_first`: whether all those first choices are the same file.
- `disagreements`: where the plans differ:
  - `approach`: `{label: text}`, the first ~300 characters of each plan's Approach section;
  - `risks`: `{label: [text]}`, the first 5 points of each plan's Risks section;
  - `unique_files`: `{label: [paths]}`, the critical files no other plan names.
- `failures`: one `{"label", "perspective", "status", "reason", "problems"}` per plan
  that failed, is incomplete, or did not pass validation.
- `totals`: `tokens` (summed, same keys as a plan's), `cost_usd` (the sum of the known
  costs, `null` if none is known), `cost_complete` (every plan's cost is known), and the
  number of `plans`, of `complete` ones and of `valid` ones.

Each plan:

- `perspective`: the point of view it was planned from, or `null`.
- `label`: its file-name-safe name, unique in the run; the key of the maps above.
- `agent`, `model`: the subagent and the model id that wrote it.
- `status`: `complete`, `incomplete` or `failed`.
- `valid`: complete and passed validation (sections, 3-5 critical files that exist).
- `reason`: why the run ended as it did (`""` when there is nothing to say).
- `plan_file`: the plan, or `null` when none was written.
- `transcript`: the agent's transcript (JSON lines), or `null`.
- `title`, `summary`: the plan's title (or `null`) and its first paragraph.
- `problems`: what validation found wrong.
- `critical_files`: `{"path", "reason", "exists"}`, path relative to the repository.
- `suggested_commands`: commands the plan asks a human to run.
- `turns`, `tool_calls`: model turns and tool calls used.
- `tokens`: `input`, `output`, `cache_creation`, `cache_read` and their `total`.
- `cost_usd`: the estimated cost of those tokens.
- `wall_seconds`: the plan's elapsed time.
"""
"""How report.json is laid out, field by field (Markdown, for the README)."""


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown page (report.md) for a report built by build_report.

    Text from the plans goes into tables with `|` and line breaks escaped; links are
    relative to the directory that holds the report.
    """
    parts = [
        _header(report),
        _requirements(report["requirements"]),
        _plans_table(report["plans"]),
        _critical_files(report),
        _disagreements(report),
        _failures(report),
        _totals(report),
    ]
    return "\n\n".join(part for part in parts if part) + "\n"


def _header(report: dict[str, Any]) -> str:
    status = RUN_STATUS_WORDS.get(report["status"], report["status"])
    status += (": " if ":" not in status else "; ") + plan_counts(report["plans"])
    head = f"`{report['git_head'][:12]}`" if report["git_head"] else "no git HEAD"
    workspace = workspace_words(report)
    plans = " · ".join(f"{_mark(plan)} {_name(plan)}: {_state(plan)}" for plan in report["plans"])
    return "\n".join(
        [
            f"# Plan report: {report['run']}",
            "",
            f"**Status:** {status} (exit code {report['exit_code']})  ",
            f"**Plans:** {plans or 'none'}  ",
            f"**Repository:** {_code(report['repository'])} at {head}; {workspace}  ",
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
        "did not pass validation": sum(p["status"] == "complete" and not p["valid"] for p in plans),
        "valid": sum(bool(p["valid"]) for p in plans),
    }
    parts = [f"{count} {what}" for what, count in counts.items() if count]
    noun = "plan" if len(plans) == 1 else "plans"
    first_count, first_what = parts[0].split(" ", 1)
    parts[0] = f"{first_count} of {len(plans)} {noun} {first_what}"
    return ", ".join(parts)


def workspace_words(report: dict[str, Any]) -> str:
    """The workspace check in words; "unchanged" only when everything was compared."""
    if not report["workspace_unchanged"]:
        return f"workspace CHANGED: {report['workspace_problem']}"
    check = report.get("workspace_check", "full")
    note = report.get("workspace_check_note", "")
    if check == "full":
        return "workspace unchanged"
    if check == "files_only":
        return f"workspace files unchanged, but not fully checked: {note}"
    return f"workspace NOT CHECKED: {note}"


def _requirements(requirements: str) -> str:
    lines = requirements.strip().splitlines() or ["(none)"]
    quoted = [f"> {_safe(line)}".rstrip() for line in lines[:REQUIREMENT_LINES]]
    if len(lines) > REQUIREMENT_LINES:
        quoted.append(f"> … ({len(lines) - REQUIREMENT_LINES} more lines in report.json)")
    return "## Requirements\n\n" + "\n".join(quoted)


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
    if len(lines) == 2:
        lines.append("None: every plan is complete and valid, and the workspace is unchanged.")
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
        f"{totals['valid']} valid · {tokens['total']:,} tokens (input {tokens['input']:,}, "
        f"output {tokens['output']:,}, cache write {tokens['cache_creation']:,}, "
        f"cache read {tokens['cache_read']:,}) · cost {cost} · "
        f"run time {duration(report['wall_seconds'])}"
    )


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
