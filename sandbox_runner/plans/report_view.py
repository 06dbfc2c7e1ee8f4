"""The typed view of a written report: what a caller prints, read from report.json's data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
    recommended: PlanLine | None = None
    """The recommended plan, when a synthesis ran."""
    synthesis_note: str = ""
    """Why there is no recommended plan ("" when a synthesis ran)."""

    @classmethod
    def of(cls, document: dict[str, Any], paths: tuple[Path, Path, Path]) -> Report:
        """The typed view of a report document."""
        plans = tuple(_plan_line(entry) for entry in document["plans"])
        recommended = document.get("recommended")
        synthesis = document.get("synthesis") or {}
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
            recommended=_plan_line(recommended) if isinstance(recommended, dict) else None,
            synthesis_note=str(synthesis.get("note") or ""),
        )


def _plan_line(entry: dict[str, Any]) -> PlanLine:
    return PlanLine(
        label=entry["label"],
        perspective=entry["perspective"],
        status=entry["status"],
        valid=entry["valid"],
        reason=entry["reason"],
        plan_file=entry["plan_file"],
    )
