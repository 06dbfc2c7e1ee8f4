"""A session's MCP servers: started at its first turn (the model is told their tools
then), each repository server not yet approved asked about first, all stopped when the
session closes; `/mcp` describes them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sandbox_runner.tools.mcp_offer import McpOffer
from sandbox_runner.tools.permissions import Approval, Ask
from sandbox_runner.tools.policy import ToolKind
from sandbox_runner.types import ToolRequest

if TYPE_CHECKING:
    from sandbox_runner.mcp.hub import Asker, McpHub
    from sandbox_runner.mcp.servers import ServerDefinition

HubStarter = Callable[["Asker"], "McpHub | None"]
"""Starts the workspace's servers, asking about each one not approved yet."""


class ServerUI(Protocol):
    """What the servers need of the session's UI (a part of SessionUI)."""

    def show(self, text: str) -> None:
        """A line of information for the user."""

    def approve(self, ask: Ask) -> Approval:
        """Ask the user."""


class SessionServers:
    """The servers of one session, started once, on first need."""

    def __init__(
        self, start: HubStarter, ui: ServerUI, slots: threading.Semaphore | None = None
    ) -> None:
        """
        Args:
            start: starts the servers (asking about those not approved yet).
            ui: shows what did not start, and asks.
            slots: the session's container budget (shared with its Task subagents):
                each running server holds one until the session ends.
        """
        self._start = start
        self._ui = ui
        self.slots = slots
        self._held = 0
        self._hub: McpHub | None = None
        self._started = False
        self._lock = threading.Lock()

    def offer(self, gives: Callable[[str, str], bool], *, read_only: bool) -> McpOffer | None:
        """The tools of an agent (starting the servers the first time); None without any."""
        hub = self._running()
        return hub.offer(gives, read_only=read_only) if hub is not None else None

    def _running(self) -> McpHub | None:
        with self._lock:
            if not self._started:
                self._started = True
                self._hub = self._start(self._ask)
                if self._hub is not None:
                    self._hold_slots(self._hub)
                for note in self._hub.notes if self._hub else ():
                    self._ui.show(note)
            return self._hub

    def _hold_slots(self, hub: McpHub) -> None:
        """One slot of the container budget per running server; one that gets none stops."""
        if self.slots is None:
            return
        for name in hub.running():
            if self.slots.acquire(blocking=False):
                self._held += 1
            else:
                hub.stop_server(name, "the session's container budget (`parallel`) is used up")

    def _ask(self, server: ServerDefinition) -> bool:
        network = "with network" if server.grants.network else "no network"
        question = (
            f"start MCP server {server.name!r} of {server.origin} (in a container: the "
            f"repository read-only, {network}; remembered until `planrun mcp revoke "
            f"{server.name}`)"
        )
        runs = {"server": server.name, "runs": server.describe(), "env": dict(server.env)}
        ask = Ask(ToolRequest("mcp-start", runs), question, ToolKind.MCP, once_only=True)
        return self._ui.approve(ask).allowed

    def describe(self) -> list[str]:
        """What `/mcp` shows: each server, whether it runs, and its tools."""
        hub = self._running()
        if hub is None:
            return ["no MCP servers (see docs/mcp.md to add one)"]
        running = {tool.server for tool in hub.tools}
        lines = []
        for server in hub.servers.servers:
            state = "running" if server.name in running else "not running"
            lines.append(f"{server.name} ({server.source}, {state}): {server.describe()}")
            for tool in (tool for tool in hub.tools if tool.server == server.name):
                mark = "read-only" if tool.read_only else "asks; not in plan mode"
                lines.append(f"  {tool.spec.name}  {mark}")
        return [*lines, *hub.notes]

    def stop(self) -> None:
        """Stop every server; safe more than once."""
        with self._lock:
            hub, self._hub = self._hub, None
            held, self._held = self._held, 0
        if hub is not None:
            hub.stop()
        for _ in range(held):
            if self.slots is not None:
                self.slots.release()
