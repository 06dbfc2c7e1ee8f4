"""What one agent loop is given for its whole life: its model, prompt, tools, permissions,
limits and transcript (the live collaborators, such as the sandbox, come separately)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.limits import RunLimits
from sandbox_runner.tools.permissions import PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext
from sandbox_runner.types import ToolCall, ToolResult, ToolSpec

HostTool = Callable[[ToolCall, Cancel], ToolResult]
"""Answers a call of a tool the host itself implements (Task, ExitPlanMode); what it
starts stops when the `Cancel` it is given is set (the turn is over, or interrupted).
It may raise TurnEnded to end the turn."""


@dataclass(frozen=True)
class LoopConfig:
    """The fixed settings of one agent loop; what changes during a run (the mode, the
    approvals, the tools offered) is read through the functions given here."""

    model: Model
    """Answers the loop's requests."""
    model_id: str
    """The model's name, sent with every request and kept in the transcript."""
    system_prompt: str | Callable[[], str]
    """The system prompt, or a function giving it as it stands at each call (a plan
    session's says whether its plan file exists yet)."""
    tools: Callable[[], list[ToolSpec]]
    """The tools offered, read at every call."""
    context: ToolContext
    """The workspace and the agent, for the permission check (the offered tools come
    from `tools`, read at every call)."""
    mode: Callable[[], PermissionMode]
    """The permission mode, read at every tool call (Shift+Tab can change it mid-turn)."""
    rules: Callable[[], Rules]
    """The approvals and the plan file the mode's decisions use, read at every tool call."""
    transcript: Path
    """The JSONL file every step is appended to, at once."""
    limits: RunLimits = field(default_factory=RunLimits)
    """Turns, tokens and time the whole run may take."""
    label: str = "agent"
    """The loop's name in its events (`plan`, `task-1-Explore`, a session's id)."""
    host_tools: Mapping[str, HostTool] = field(default_factory=dict)
    """Tools the host answers itself, not the sandbox (Task, ExitPlanMode)."""
    stream_text: bool = False
    """Stream the model's answers and tell every text block to the UI as it arrives
    (`text`, `text_end` events): a session's conversations do; headless runs need not."""
