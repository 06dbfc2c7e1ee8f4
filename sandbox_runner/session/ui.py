"""What a session needs from outside: a user interface and sandboxes (the seams that line
mode, the terminal and the tests fill in)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sandbox_runner import Sandbox
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode


@dataclass(frozen=True)
class PlanReview:
    """The user's answer to a plan: accept (into a mode), or keep planning with feedback."""

    accept: bool
    mode: PermissionMode | None = None
    feedback: str = ""


class SessionUI(Protocol):
    """What a session needs from its user interface (line mode, or the terminal)."""

    def show(self, text: str) -> None:
        """A line of information for the user."""

    def event(self, event: AgentEvent) -> None:
        """Progress of the agent (a tool call, a turn)."""

    def approve(self, ask: Ask) -> Approval:
        """Ask the user about a call the mode does not allow by itself."""

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        """Show the plan and ask whether to accept it."""


class SubagentSandboxes(Protocol):
    """Where subagents run."""

    def read_only(self) -> Sandbox:
        """A sandbox whose workspace is read-only (Plan, Explore)."""

    def work(self) -> Sandbox:
        """A sandbox whose workspace is writable (general-purpose)."""


class SessionSandboxes(SubagentSandboxes, Protocol):
    """Where a session's tools run."""

    def plan(self, plan_dir: Path) -> Sandbox:
        """The plan session's sandbox: workspace read-only, /plan kept in plan_dir."""
