"""The aggregate report of a run: a JSON summary, a Markdown page and an HTML page (P4)."""

from __future__ import annotations

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
from sandbox_runner.plans.report_view import PlanLine, Report
from sandbox_runner.plans.results import PlanResult, PlanStatus, Synthesis, SynthesisState
from sandbox_runner.plans.sections import CONFLICTS_SECTION, DECISIONS_SECTION
from sandbox_runner.plans.text import section_points, shorten
from sandbox_runner.plans.validate import extract_section
from sandbox_runner.redact import redact, redact_data

__all__ = [
    "REPORT_SCHEMA_DOC",
    "PlanLine",
    "Report",
    "RunRecord",
    "build_report",
    "render_html",
    "render_markdown",
    "write_report",
]

SCHEMA_VERSION = 2
WORKSPACE_CHECK_PARTS = ("before_files", "before_git_status", "after_files", "after_git_status")
EXIT_INTERRUPTED = 130
APPROACH_CHARS = 300
RISK_CHARS = 240
MAX_RISKS = 5
MAX_SYNTHESIS_POINTS = 12
SYNTHESIS_POINT_CHARS = 300

_LEADING_TITLE = re.compile(r"\s*# [^\n]*\n")


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
    """What was compared: "full" (files and `git status`), "files_only",
    "git_status_only" or "none"."""
    workspace_check_note: str = ""
    """What could not be compared, and why ("" when everything was)."""
    workspace_changed_paths: list[str] = field(default_factory=list, kw_only=True)
    """The paths that changed, each with how ("src/a.py (added)"), the first few only."""
    workspace_changed_more: int = field(default=0, kw_only=True)
    """How many more paths changed than workspace_changed_paths lists."""
    workspace_check_ms: dict[str, int | None] = field(default_factory=dict, kw_only=True)
    """How long each part of the check took (before_files, before_git_status,
    after_files, after_git_status; None: it did not run)."""
    exit_code: int = field(kw_only=True)
    """What `planrun plan` exits with; required, by keyword."""
    agent_override: str = field(default="", kw_only=True)
    """Which file replaced the built-in agent the plans ran with ("" when none did)."""
    synthesis: Synthesis | None = field(default=None, kw_only=True)
    """The synthesis of a recommended plan; None when the run had none (as if off)."""
    scratch: bool = field(default=False, kw_only=True)
    """Whether the plans' commands ran in a scratch layer (plan_commands: scratch)."""
    budget: dict[str, float | None] = field(default_factory=dict, kw_only=True)
    """The cost caps (`max_cost_usd`, `max_cost_usd_per_plan`; None: no cap)."""

    def __post_init__(self) -> None:
        if len(self.perspectives) != len(self.results):
            raise ValueError(
                f"{len(self.results)} results but {len(self.perspectives)} perspectives"
            )


def build_report(record: RunRecord) -> Report:
    """The report of a run: the document report.json holds (see REPORT_SCHEMA_DOC) and the
    plans' Markdown, from which all three pages are rendered; what looks like a credential
    is redacted.

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
    bodies = {
        label: _plan_body(result.plan_text)
        for label, result in zip(labels, record.results, strict=True)
    }
    disagreements = _disagreements(plans, bodies)
    recommended = None
    synthesis = record.synthesis
    if synthesis is not None and synthesis.result is not None:
        result = synthesis.result
        label = _recommended_label(labels, result.label)
        bodies[label] = _plan_body(result.plan_text)
        recommended = _recommended_entry(
            record.out_dir, result, synthesis.sources, label, bodies[label]
        )
    document = _document(record, plans, recommended, disagreements)
    redacted = {label: redact(body) for label, body in bodies.items()}
    return Report(redact_data(document), redacted, record.out_dir)


def _document(
    record: RunRecord,
    plans: list[dict[str, Any]],
    recommended: dict[str, Any] | None,
    disagreements: dict[str, Any],
) -> dict[str, Any]:
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
        "plan_commands": "scratch" if record.scratch else "read-only",
        "budget": {
            "max_cost_usd": record.budget.get("max_cost_usd"),
            "max_cost_usd_per_plan": record.budget.get("max_cost_usd_per_plan"),
            "reached": any(result.status is PlanStatus.BUDGET for result in record.results),
        },
        "workspace_check": record.workspace_check,
        "workspace_check_note": record.workspace_check_note,
        "workspace_changed_paths": list(record.workspace_changed_paths),
        "workspace_changed_more": record.workspace_changed_more,
        "workspace_check_ms": {
            name: record.workspace_check_ms.get(name) for name in WORKSPACE_CHECK_PARTS
        },
        "synthesis": _synthesis_entry(record.synthesis),
        "recommended": recommended,
        "plans": plans,
        "critical_files": _critical_files(plans),
        "disagreements": disagreements,
        "failures": _failures(plans),
        "totals": _totals(plans, recommended),
    }


def write_report(record: RunRecord) -> Report:
    """Write report.json, report.md and report.html into record.out_dir, each replaced
    atomically, from one report."""
    report = build_report(record)
    _write_atomically(report.json_path, report.to_json())
    _write_atomically(report.markdown_path, report.to_markdown())
    _write_atomically(report.html_path, report.to_html())
    return report


def _recommended_label(labels: list[str], label: str) -> str:
    """The recommended plan's label, which no perspective's label may shadow."""
    unique, number = label, 2
    while unique in labels:
        unique, number = f"{label}-{number}", number + 1
    return unique


def _synthesis_entry(synthesis: Synthesis | None) -> dict[str, Any]:
    if synthesis is None:
        return {"state": SynthesisState.OFF.value, "note": "", "agent_override": None}
    return {
        "state": synthesis.state.value,
        "note": synthesis.note,
        "agent_override": synthesis.agent_override or None,
    }


def _recommended_entry(
    out_dir: Path, result: PlanResult, sources: tuple[str, ...], label: str, body: str
) -> dict[str, Any]:
    """The recommended plan as a plan entry, with its sources, decisions and conflicts."""
    entry = _plan_entry(out_dir, result, None, label)
    entry["sources"] = list(sources)
    for key, title in (("decisions", DECISIONS_SECTION), ("conflicts", CONFLICTS_SECTION)):
        text = extract_section(body, title) if body.strip() else None
        points = section_points(text or "")[:MAX_SYNTHESIS_POINTS]
        entry[key] = [shorten(point, SYNTHESIS_POINT_CHARS) for point in points]
    return entry


def _run_status(record: RunRecord) -> str:
    """The most serious of: workspace_changed, interrupted, plan_failed (a plan failed or is
    incomplete, or there are none), plan_invalid (complete but not valid); else ok."""
    if not record.workspace_unchanged:
        return "workspace_changed"
    if record.exit_code == EXIT_INTERRUPTED:
        return "interrupted"
    if any(result.status is PlanStatus.BUDGET for result in record.results):
        return "budget"
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
        **{key: summary[key] for key in ("title", "summary", "problems")},
        "critical_files": [
            {"path": f.path, "reason": f.reason, "exists": f.exists, "line": f.line}
            for f in (result.check.critical_files if result.check else [])
        ],
        "suggested_commands": list(result.suggested_commands),
        "turns": result.turns,
        "tool_calls": result.tool_calls,
        "tokens": {**summary["tokens"], "total": result.usage.total},
        "cost_usd": None if cost is None else round(cost, 6),
        "wall_seconds": round(result.wall_seconds, 3),
        "resumable": result.resumable,
        "continued": result.continued,
        "commands_run": summary["commands_run"],
        "proposed_patches": summary["proposed_patches"],
        "validation": _validation(result),
    }


def _validation(result: PlanResult) -> dict[str, Any]:
    """The validation rounds of a plan: how many checks ran, what the feedback round asked
    the model to fix, and whether the plan that came back passed."""
    feedback = list(result.validation_feedback)
    checked = result.check is not None
    return {
        "rounds": (1 if checked else 0) + (1 if feedback else 0),
        "feedback": feedback,
        "fixed_after_feedback": bool(feedback) and result.valid,
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
            risks[label] = [shorten(item, RISK_CHARS) for item in section_points(text)[:MAX_RISKS]]
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


def _totals(plans: list[dict[str, Any]], recommended: dict[str, Any] | None) -> dict[str, Any]:
    """Tokens and cost of every agent (the synthesis included); counts of the plans only."""
    agents = [*plans, *([recommended] if recommended else [])]
    tokens = {key: 0 for key in ("input", "output", "cache_creation", "cache_read", "total")}
    for agent in agents:
        for key in tokens:
            tokens[key] += agent["tokens"][key]
    costs = [agent["cost_usd"] for agent in agents if agent["cost_usd"] is not None]
    known = bool(costs) or not agents
    return {
        "tokens": tokens,
        "cost_usd": round(sum(costs), 6) if known else None,
        "cost_complete": len(costs) == len(agents),
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
