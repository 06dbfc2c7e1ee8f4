"""The state of one agent run: its limits, its files, and what it has done so far."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.plans.proposed_patches import ProposedPatch
from sandbox_runner.plans.results import CommandRun
from sandbox_runner.types import ToolResult, Usage


@dataclass
class PlanPaths:
    """Where a run keeps its files: the plan as the sandbox sees it and as the host does."""

    plan_dir: Path
    """Host path of the sandbox's writable plan directory."""
    plan_file_name: str
    """File name of the plan inside plan_dir (and inside /plan)."""
    transcript: Path
    """Host path of the JSONL transcript; outside anything the sandbox can write."""

    @property
    def host_plan_file(self) -> Path:
        """The plan file on the host."""
        return self.plan_dir / self.plan_file_name

    @property
    def container_plan_file(self) -> str:
        """The plan file as the model sees it."""
        return f"/plan/{self.plan_file_name}"


@dataclass
class RunState:
    """What a run has done so far: the conversation, usage, counters and plan-file facts."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    tool_calls: int = 0
    suggested_commands: list[str] = field(default_factory=list)
    proposed_patches: list[ProposedPatch] = field(default_factory=list)
    """Refused edits of repository files in plan mode, kept for the plan."""
    commands_run: list[CommandRun] = field(default_factory=list)
    """The Bash commands that ran, with how each ended."""
    final_text: str = ""
    """The text of the model's last answer without tool calls."""
    host_written_plan: str | None = None
    """What the host wrote to the plan file for the model (from its final text), if anything."""
    feedback_sent: bool = False
    feedback_problems: list[str] = field(default_factory=list)
    """What validation found in the plan that the feedback round asked the model to fix."""
    warned_low: bool = False
    """Whether the model was told that its turns or tokens run low."""
    last_call_tokens: int = 0
    started: float = field(default_factory=time.monotonic)


class LimitReached(Exception):
    """Control flow, not an error: a run limit stops the loop and keeps the partial plan."""


class BudgetReached(LimitReached):
    """A cost budget (the run's, or the one it shares) is spent: the run stops at the model
    call boundary and keeps its partial plan."""


class Interrupted(LimitReached):
    """The user (Ctrl-C, SIGTERM) or the driver stopped the run: nothing about the
    conversation ended it, so it can be continued."""


class TurnEnded(Exception):
    """Control flow, not an error: a host tool ended the turn (the user accepted the plan).

    The loop answers the turn's calls (RESULT for this one), stops the subagents the turn
    started, and lets it through to whoever drives the loop.
    """

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.content)
        self.result = result
