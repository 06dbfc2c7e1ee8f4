"""What a plan run produced: its status, the plan, its validation and what it cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from sandbox_runner.plans.proposed_patches import ProposedPatch, patches_from
from sandbox_runner.plans.validate import PlanCheck
from sandbox_runner.types import Usage

TOKEN_KEYS = ("input", "output", "cache_creation", "cache_read")
"""The keys of to_dict()'s `tokens`, in the order of Usage's fields."""
MAX_COUNT = 1e15
"""A larger number in data someone may have edited is not a count."""


@dataclass(frozen=True)
class CommandRun:
    """A Bash command a plan agent ran, and how it ended."""

    command: str
    exit_code: int | None
    """Its exit status; None when it could not start."""
    timed_out: bool = False
    """It ran past its time limit and was killed."""

    def to_dict(self) -> dict[str, Any]:
        """As a plan's front matter and report.json list it."""
        entry: dict[str, Any] = {"command": self.command, "exit_code": self.exit_code}
        return entry | ({"timed_out": True} if self.timed_out else {})

    @classmethod
    def from_dict(cls, data: object) -> CommandRun | None:
        """The command an entry describes; None for one that was edited beyond reading."""
        if not isinstance(data, Mapping) or not isinstance(data.get("command"), str):
            return None
        code = data.get("exit_code")
        exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
        return cls(data["command"], exit_code, timed_out=data.get("timed_out") is True)


class PlanStatus(StrEnum):
    """How a run ended."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    BUDGET = "budget"
    """A cost budget stopped it; its plan so far is kept, and a resume can go on with it."""


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
    commands_run: list[CommandRun] = field(default_factory=list)
    """The Bash commands it ran, in order, with their exit status."""
    proposed_patches: list[ProposedPatch] = field(default_factory=list)
    """The edits of repository files it was refused, kept as proposed patches."""
    validation_feedback: list[str] = field(default_factory=list)
    """The problems validation sent back to the model for one more round (empty when the
    first check passed, or no plan was checked before the run ended)."""

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
            "commands_run": [run.to_dict() for run in self.commands_run],
            "proposed_patches": [patch.to_dict() for patch in self.proposed_patches],
            "validation_feedback": list(self.validation_feedback),
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, plan_text: str = "", check: PlanCheck | None = None
    ) -> PlanResult:
        """The result a to_dict() summary describes (a plan's front matter has the same
        keys). The summary leaves out the plan and its check: they are given back here.

        The data may have been edited: a value that is missing or not of its type reads
        as empty, zero or false, and an unknown status as failed.
        """
        tokens = data.get("tokens")
        counts: Mapping[str, Any] = tokens if isinstance(tokens, Mapping) else {}
        return cls(
            label=_text(data.get("label")),
            agent=_text(data.get("agent")),
            model=_text(data.get("model")),
            status=_status(data.get("status")),
            reason=_text(data.get("reason")),
            plan_path=_path(data.get("plan_path")),
            plan_text=plan_text,
            check=check,
            suggested_commands=_strings(data.get("suggested_commands")),
            turns=int(_number(data.get("turns"))),
            tool_calls=int(_number(data.get("tool_calls"))),
            usage=Usage(*(int(_number(counts.get(key))) for key in TOKEN_KEYS)),
            wall_seconds=float(_number(data.get("wall_seconds"), real=True)),
            transcript=_path(data.get("transcript")),
            resumable=data.get("resumable") is True,
            continued=data.get("continued") is True,
            commands_run=_commands(data.get("commands_run")),
            proposed_patches=patches_from(data.get("proposed_patches")),
            validation_feedback=_strings(data.get("validation_feedback")),
        )


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


def _status(value: object) -> PlanStatus:
    known = {status.value: status for status in PlanStatus}
    return known.get(value, PlanStatus.FAILED) if isinstance(value, str) else PlanStatus.FAILED


def _commands(value: object) -> list[CommandRun]:
    entries = [CommandRun.from_dict(item) for item in value] if isinstance(value, list) else []
    return [entry for entry in entries if entry is not None]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _path(value: object) -> Path | None:
    return Path(value) if isinstance(value, str) and value else None


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _number(value: object, *, real: bool = False) -> int | float:
    """A count (or with real, a number); else 0."""
    kinds = (int, float) if real else (int,)
    if isinstance(value, kinds) and not isinstance(value, bool) and abs(value) < MAX_COUNT:
        return value
    return 0
