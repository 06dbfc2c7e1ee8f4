"""What a plan run produced: its status, the plan, its validation and what it cost."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sandbox_runner.plans.validate import PlanCheck
from sandbox_runner.types import Usage


class PlanStatus(StrEnum):
    """How a run ended."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"


@dataclass
class PlanResult:
    """The outcome of one Plan subagent run."""

    label: str
    agent: str
    model: str
    status: PlanStatus
    reason: str
    plan_path: Path | None
    plan_text: str
    check: PlanCheck | None
    suggested_commands: list[str]
    turns: int
    tool_calls: int
    usage: Usage
    wall_seconds: float
    transcript: Path | None = None
    resumable: bool = False
    """It stopped for a reason outside its conversation (interrupted, the API or the
    sandbox failed): a later run can go on with the conversation instead of starting over."""
    continued: bool = False
    """It went on with the conversation of an earlier run that stopped."""

    @property
    def valid(self) -> bool:
        """Complete, and the plan passed validation."""
        return self.status is PlanStatus.COMPLETE and self.check is not None and self.check.ok

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the plan text itself is left out)."""
        check = self.check
        return {
            "label": self.label,
            "agent": self.agent,
            "model": self.model,
            "status": self.status.value,
            "valid": self.valid,
            "reason": self.reason,
            "plan_path": str(self.plan_path) if self.plan_path else None,
            "title": check.title if check else None,
            "summary": check.summary if check else "",
            "problems": list(check.problems) if check else [],
            "critical_files": [
                {"path": f.path, "reason": f.reason, "exists": f.exists}
                for f in (check.critical_files if check else [])
            ],
            "suggested_commands": self.suggested_commands,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "tokens": {
                "input": self.usage.input_tokens,
                "output": self.usage.output_tokens,
                "cache_creation": self.usage.cache_creation_input_tokens,
                "cache_read": self.usage.cache_read_input_tokens,
            },
            "wall_seconds": self.wall_seconds,
            "transcript": str(self.transcript) if self.transcript else None,
            "resumable": self.resumable,
            "continued": self.continued,
        }


class SynthesisState(StrEnum):
    """Whether the synthesis of a recommended plan ran, and if not, why."""

    RAN = "ran"
    """It ran; its result says how it ended (a failure is reported, never fatal)."""
    OFF = "off"
    """Turned off (`--no-synthesis`, `synthesis: false`, or nothing recorded to replay)."""
    SKIPPED = "skipped"
    """Fewer than two valid plans, or the run was interrupted before it started."""


@dataclass(frozen=True)
class Synthesis:
    """The synthesis step of a run: the recommended plan, or why there is none."""

    state: SynthesisState
    note: str = ""
    """Why it did not run ("" when it ran)."""
    result: PlanResult | None = None
    """The recommended plan's run, when it ran."""
    sources: tuple[str, ...] = ()
    """The labels of the plans it merged."""
    agent_override: str = ""
    """Which file replaced the built-in Synthesis agent ("" when none did)."""
