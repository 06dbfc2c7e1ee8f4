"""A session's MCP servers: started at its first turn (the model is told their tools
then), each repository server not yet approved asked about first, all stopped when the
session closes; `/mcp` describes them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sandbox_runner.tools.mcp_offer import McpOffer
from sandbox_runner.tools.permissions import Ask
from sandbox_runner.tools.policy import ToolKind
from sandbox_runner.types import ToolRequest

if TYPE_CHECKING:
    from sandbox_runner.mcp.hub import Asker, McpHub
    from sandbox_runner.mcp.servers import ServerDefinition
    from sandbox_runner.session.ui import SessionUI

HubStarter = Callable[["Asker"], "McpHub | None"]
"""Starts the workspace's servers, asking about each one not approved yet."""


class SessionServers:
    """The servers of one session, started once, on first need."""

    def __init__(self, start: HubStarter, ui: SessionUI) -> None:
        self._start = start
        self._ui = ui
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
                for note in self._hub.notes if self._hub else ():
                    self._ui.show(note)
            return self._hub

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
        if hub is not None:
            hub.stop()
