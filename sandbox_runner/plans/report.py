"""The aggregate report of a run: a JSON summary, a Markdown page and an HTML page (P4)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sandbox_runner.plans.document import strip_front_matter
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.plans.report_html import render_html
from sandbox_runner.plans.report_markdown import REPORT_SCHEMA_DOC, render_markdown
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.text import CODE_FENCE, shorten
from sandbox_runner.plans.validate import extract_section

__all__ = [
    "REPORT_SCHEMA_DOC",
    "PlanLine",
    "Report",
    "RunRecord",
    "build_report",
    "plan_bodies",
    "render_html",
    "render_markdown",
    "write_report",
]

SCHEMA_VERSION = 1
EXIT_INTERRUPTED = 130
APPROACH_CHARS = 300
RISK_CHARS = 240
MAX_RISKS = 5

_LEADING_TITLE = re.compile(r"\s*# [^\n]*\n")
_LIST_ITEM = re.compile(r"([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)")
_TABLE_RULE = re.compile(r"\|?[\s:|-]*-[\s:|-]*\|?")


@dataclass
class RunRecord:
    """Everything a report says about one `planrun plan` run."""

    name: str
    """The run's random name, e.g. "gentle-breeze"."""
    out_dir: Path
    requirements: str
    repository: str
    git_head: str | None
    started_at: datetime
    finished_at: datetime
    results: list[PlanResult]
    perspectives: list[str | None]
    """The perspective of each result, in the same order as results."""
    workspace_unchanged: bool
    workspace_problem: str = ""
    """What changed in the workspace, if anything."""
    workspace_check: str = "full"
    """What was compared: "full" (files and `git status`), "files_only" or "none"."""
    workspace_check_note: str = ""
    """Why the check was not full ("" when it was)."""
    exit_code: int = field(kw_only=True)
    """What `planrun plan` exits with; required, by keyword."""
    agent_override: str = field(default="", kw_only=True)
    """Which file replaced the built-in agent the plans ran with ("" when none did)."""

    def __post_init__(self) -> None:
        if len(self.perspectives) != len(self.results):
            raise ValueError(
                f"{len(self.results)} results but {len(self.perspectives)} perspectives"
            )


def build_report(record: RunRecord) -> dict[str, Any]:
    """The JSON summary of a run (report.json), as described in REPORT_SCHEMA_DOC.

    Raises:
        ValueError: the record's results and perspectives differ in length.
    """
    labels = _unique_labels(record.results)
    plans = [
        _plan_entry(record.out_dir, result, perspective, label)
        for result, perspective, label in zip(
            record.results, record.perspectives, labels, strict=True
        )
    ]
    bodies = plan_bodies(record)
    return {
        "schema_version": SCHEMA_VERSION,
        "run": record.name,
        "out_dir": str(record.out_dir),
        "requirements": record.requirements,
        "repository": record.repository,
        "git_head": record.git_head,
        "started_at": record.started_at.isoformat(timespec="seconds"),
        "finished_at": record.finished_at.isoformat(timespec="seconds"),
        "wall_seconds": round((record.finished_at - record.started_at).total_seconds(), 3),
        "exit_code": record.exit_code,
        "status": _run_status(record),
        "workspace_unchanged": record.workspace_unchanged,
        "workspace_problem": record.workspace_problem,
        "agent_override": record.agent_override or None,
        "workspace_check": record.workspace_check,
        "workspace_check_note": record.workspace_check_note,
        "plans": plans,
        "critical_files": _critical_files(plans),
        "disagreements": _disagreements(plans, bodies),
        "failures": _failures(plans),
        "totals": _totals(plans),
    }


@dataclass(frozen=True)
class PlanLine:
    """One plan as a summary shows it."""

    label: str
    perspective: str | None
    status: str
    valid: bool
    reason: str
    plan_file: str | None


@dataclass(frozen=True)
class Report:
    """A written report: what a caller prints, and the document report.json holds."""

    document: dict[str, Any]
    """Exactly what report.json holds (see REPORT_SCHEMA_DOC)."""
    json_path: Path
    markdown_path: Path
    html_path: Path
    status: str
    exit_code: int
    plans: tuple[PlanLine, ...]
    agent_override: str | None
    workspace_unchanged: bool
    workspace_problem: str

    @classmethod
    def of(cls, document: dict[str, Any], paths: tuple[Path, Path, Path]) -> Report:
        """The typed view of a report document."""
        plans = tuple(
            PlanLine(
                label=entry["label"],
                perspective=entry["perspective"],
                status=entry["status"],
                valid=entry["valid"],
                reason=entry["reason"],
                plan_file=entry["plan_file"],
            )
            for entry in document["plans"]
        )
        return cls(
            document=document,
            json_path=paths[0],
            markdown_path=paths[1],
            html_path=paths[2],
            status=document["status"],
            exit_code=document["exit_code"],
            plans=plans,
            agent_override=document["agent_override"],
            workspace_unchanged=document["workspace_unchanged"],
            workspace_problem=document["workspace_problem"],
        )


def write_report(record: RunRecord) -> Report:
    """Write report.json, report.md and report.html into record.out_dir, each replaced
    atomically."""
    document = build_report(record)
    json_path = record.out_dir / "report.json"
    markdown_path = record.out_dir / "report.md"
    html_path = record.out_dir / "report.html"
    _write_atomically(json_path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    _write_atomically(markdown_path, render_markdown(document))
    _write_atomically(html_path, render_html(document, plan_bodies(record)))
    return Report.of(document, (json_path, markdown_path, html_path))


def plan_bodies(record: RunRecord) -> dict[str, str]:
    """Each plan's Markdown without front matter or `# Title`, by its label in the report."""
    labels = _unique_labels(record.results)
    return {
        label: _plan_body(result.plan_text)
        for label, result in zip(labels, record.results, strict=True)
    }


def _run_status(record: RunRecord) -> str:
    """The most serious of: workspace_changed, interrupted, plan_failed (a plan failed or is
    incomplete, or there are none), plan_invalid (complete but not valid); else ok."""
    if not record.workspace_unchanged:
        return "workspace_changed"
    if record.exit_code == EXIT_INTERRUPTED:
        return "interrupted"
    if not record.results or any(r.status is not PlanStatus.COMPLETE for r in record.results):
        return "plan_failed"
    if not all(result.valid for result in record.results):
        return "plan_invalid"
    return "ok"


def _unique_labels(results: list[PlanResult]) -> list[str]:
    """The results' labels, suffixed where two collide, so they can key the report's maps."""
    labels: list[str] = []
    for result in results:
        label, number = result.label, 2
        while label in labels:
            label, number = f"{result.label}-{number}", number + 1
        labels.append(label)
    return labels


def _plan_entry(
    out_dir: Path, result: PlanResult, perspective: str | None, label: str
) -> dict[str, Any]:
    summary = result.to_dict()
    cost = estimate_cost(result.model, result.usage)
    return {
        "perspective": perspective,
        "label": label,
        **{key: summary[key] for key in ("agent", "model", "status", "valid", "reason")},
        "plan_file": _relative(result.plan_path, out_dir),
        "transcript": _relative(result.transcript, out_dir),
        **{key: summary[key] for key in ("title", "summary", "problems", "critical_files")},
        "suggested_commands": list(result.suggested_commands),
        "turns": result.turns,
        "tool_calls": result.tool_calls,
        "tokens": {**summary["tokens"], "total": result.usage.total},
        "cost_usd": None if cost is None else round(cost, 6),
        "wall_seconds": round(result.wall_seconds, 3),
    }


def _relative(path: Path | None, out_dir: Path) -> str | None:
    """A path as the report links it: relative to out_dir, with forward slashes."""
    if path is None:
        return None
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(out_dir))
    return Path(relative).as_posix()


def _critical_files(plans: list[dict[str, Any]]) -> dict[str, Any]:
    named: dict[str, list[str]] = {}
    first_choices: dict[str, str] = {}
    for plan in plans:
        paths = [entry["path"] for entry in plan["critical_files"]]
        if paths:
            first_choices[plan["label"]] = paths[0]
        for path in dict.fromkeys(paths):
            named.setdefault(path, []).append(plan["label"])
    matrix = [
        {"path": path, "named_by": labels, "count": len(labels)}
        for path, labels in sorted(named.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    naming = len(first_choices)
    return {
        "matrix": matrix,
        "shared_by_all": [row["path"] for row in matrix if naming and row["count"] == naming],
        "first_choices": first_choices,
        "agree_on_first": len(set(first_choices.values())) == 1,
    }


def _disagreements(plans: list[dict[str, Any]], bodies: dict[str, str]) -> dict[str, Any]:
    approach: dict[str, str] = {}
    risks: dict[str, list[str]] = {}
    for label, body in bodies.items():
        # extract_section accepts every name of a section ("Implementation strategy").
        if text := extract_section(body, "Approach"):
            approach[label] = shorten(text, APPROACH_CHARS)
        if text := extract_section(body, "Risks"):
            risks[label] = [shorten(item, RISK_CHARS) for item in _items(text)[:MAX_RISKS]]
    counts: dict[str, int] = {}
    for plan in plans:
        for path in {entry["path"] for entry in plan["critical_files"]}:
            counts[path] = counts.get(path, 0) + 1
    unique_files = {
        plan["label"]: [e["path"] for e in plan["critical_files"] if counts[e["path"]] == 1]
        for plan in plans
        if plan["critical_files"]
    }
    return {"approach": approach, "risks": risks, "unique_files": unique_files}


def _failures(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    failures: list[dict[str, Any]] = []
    for plan in plans:
        if plan["valid"]:
            continue
        reason = plan["reason"] or (
            "the plan did not pass validation" if plan["problems"] else "no plan was checked"
        )
        failures.append(
            {
                "label": plan["label"],
                "perspective": plan["perspective"],
                "status": plan["status"],
                "reason": reason,
                "problems": plan["problems"],
            }
        )
    return failures


def _totals(plans: list[dict[str, Any]]) -> dict[str, Any]:
    tokens = {key: 0 for key in ("input", "output", "cache_creation", "cache_read", "total")}
    for plan in plans:
        for key in tokens:
            tokens[key] += plan["tokens"][key]
    costs = [plan["cost_usd"] for plan in plans if plan["cost_usd"] is not None]
    known = bool(costs) or not plans
    return {
        "tokens": tokens,
        "cost_usd": round(sum(costs), 6) if known else None,
        "cost_complete": len(costs) == len(plans),
        "plans": len(plans),
        "complete": sum(plan["status"] == PlanStatus.COMPLETE.value for plan in plans),
        "valid": sum(bool(plan["valid"]) for plan in plans),
    }


def _plan_body(plan_text: str) -> str:
    """The plan without front matter or its leading `# Title`.

    The title goes because extract_section would take "# Approach to caching" for the
    Approach section, and its body would then be the whole plan.
    """
    body = strip_front_matter(plan_text)
    return body[title.end() :] if (title := _LEADING_TITLE.match(body)) else body


def _items(section: str) -> list[str]:
    """A section's points: its top-level list items, else its table rows, else paragraphs."""
    lines = _unfenced_lines(section)
    return _list_items(lines) or _table_rows(lines) or _paragraphs(lines)


def _unfenced_lines(text: str) -> list[str]:
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            fence = None if line.strip().startswith(fence) else fence
        elif opening := CODE_FENCE.match(line):
            fence = opening.group(1)
        else:
            lines.append(line)
    return lines


def _list_items(lines: list[str]) -> list[str]:
    items: list[tuple[int, list[str]]] = []
    for line in lines:
        if item := _LIST_ITEM.match(line):
            items.append((len(item.group(1).expandtabs(4)), [item.group(2)]))
        elif items and line[:1] in (" ", "\t") and line.strip():
            items[-1][1].append(line.strip())
    top = min((indent for indent, _ in items), default=0)
    return [" ".join(parts) for indent, parts in items if indent == top and "".join(parts)]


def _table_rows(lines: list[str]) -> list[str]:
    rows = [line.strip() for line in lines if line.strip().startswith("|")]
    if len(rows) > 1 and _TABLE_RULE.fullmatch(rows[1]):
        rows = rows[2:]  # the header row and the rule below it
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return [" — ".join(filter(None, row)) for row in cells if any(row)]


def _paragraphs(lines: list[str]) -> list[str]:
    paragraphs = "\n".join(line.lstrip("#").strip() for line in lines).split("\n\n")
    return [paragraph.strip() for paragraph in paragraphs if paragraph.strip()]


def _write_atomically(path: Path, text: str) -> None:
    """Replace path with text in one step, so a reader never sees half a report."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
