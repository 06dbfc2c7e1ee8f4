"""The MCP tools one agent is given: what is offered to the model, what it may call at all,
which only read, and who answers the calls (the host, talking to the servers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sandbox_runner.types import ToolCall, ToolResult, ToolSpec

McpCall = Callable[[ToolCall, Any], ToolResult]
"""Answers an allowed call of an MCP tool (the agent loop's host tool signature)."""


@dataclass(frozen=True)
class McpOffer:
    """The MCP tools of one agent."""

    specs: tuple[ToolSpec, ...]
    """Offered to the model: in plan mode the read-only ones only."""
    names: frozenset[str]
    """Every tool the agent may be given (a call of one plan mode hides is refused with
    guidance, not as unknown)."""
    read_only: frozenset[str]
    """Those that only read: the server annotates readOnlyHint, or the user says so."""
    call: McpCall

    def host_tools(self) -> dict[str, McpCall]:
        """The loop's handlers: every tool the agent may be given."""
        return dict.fromkeys(self.names, self.call)


class McpTools(Protocol):
    """The running MCP servers of a run or a session (mcp/hub.py)."""

    def offer(self, gives: Callable[[str, str], bool], *, read_only: bool) -> McpOffer | None:
        """The tools GIVES (server, tool) grants an agent; READ_ONLY offers only the
        read-only ones (plan mode). None: no server runs."""
