"""The report of a run, built once: report.json's document and each plan's Markdown, rendered
as report.json, report.md and report.html, and read by whoever prints a summary."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from sandbox_runner.plans.report_html import render_html
from sandbox_runner.plans.report_markdown import render_markdown
from sandbox_runner.plans.report_revisions import PlanRevisions, plan_revisions

JSON_NAME, MARKDOWN_NAME, HTML_NAME = "report.json", "report.md", "report.html"


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
    """A run's report; what looks like a credential is redacted in all of it."""

    document: dict[str, Any]
    """Exactly what report.json holds (see REPORT_SCHEMA_DOC)."""
    bodies: dict[str, str]
    """Each plan's Markdown without front matter or `# Title`, by its label in the document
    (the recommended plan's too, when there is one)."""
    out_dir: Path
    """The directory the report's files are written to, beside the plans."""

    def to_json(self) -> str:
        return json.dumps(self.document, indent=2, ensure_ascii=False) + "\n"

    def to_markdown(self) -> str:
        return render_markdown(self.document, self.revisions)

    def to_html(self) -> str:
        return render_html(self.document, self.bodies, self.revisions)

    @cached_property
    def revisions(self) -> dict[str, PlanRevisions]:
        """The plans with more than one kept revision, by label: read once, for both pages."""
        labels = [plan["label"] for plan in self.document["plans"]]
        return plan_revisions(self.out_dir, labels)

    @property
    def json_path(self) -> Path:
        return self.out_dir / JSON_NAME

    @property
    def markdown_path(self) -> Path:
        return self.out_dir / MARKDOWN_NAME

    @property
    def html_path(self) -> Path:
        return self.out_dir / HTML_NAME

    @property
    def status(self) -> str:
        return str(self.document["status"])

    @property
    def exit_code(self) -> int:
        return int(self.document["exit_code"])

    @property
    def plans(self) -> tuple[PlanLine, ...]:
        return tuple(_plan_line(entry) for entry in self.document["plans"])

    @property
    def recommended(self) -> PlanLine | None:
        """The recommended plan, when a synthesis ran."""
        entry = self.document.get("recommended")
        return _plan_line(entry) if isinstance(entry, dict) else None

    @property
    def synthesis_note(self) -> str:
        """Why there is no recommended plan ("" when a synthesis ran)."""
        synthesis = self.document.get("synthesis") or {}
        return str(synthesis.get("note") or "")

    @property
    def agent_override(self) -> str | None:
        override = self.document["agent_override"]
        return None if override is None else str(override)

    @property
    def workspace_unchanged(self) -> bool:
        return bool(self.document["workspace_unchanged"])

    @property
    def workspace_problem(self) -> str:
        return str(self.document["workspace_problem"])


def _plan_line(entry: dict[str, Any]) -> PlanLine:
    return PlanLine(
        label=entry["label"],
        perspective=entry["perspective"],
        status=entry["status"],
        valid=entry["valid"],
        reason=entry["reason"],
        plan_file=entry["plan_file"],
    )
