"""The MCP servers of one run or session: which start (approved, granted), one container
each, their tools as `mcp__<server>__<tool>`, the calls, and the end of them all."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sandbox_runner.errors import PlanrunError
from sandbox_runner.mcp.approvals import Approvals
from sandbox_runner.mcp.connection import McpConnection, McpError, RemoteTool
from sandbox_runner.mcp.servers import ServerDefinition, ServerList
from sandbox_runner.mcp.transport import AttachedStdio
from sandbox_runner.sandbox.client import ByteStream
from sandbox_runner.tools.mcp_offer import McpOffer
from sandbox_runner.tools.output import cap_result
from sandbox_runner.types import ToolCall, ToolResult, ToolSpec

API_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""What the Messages API accepts as a tool name."""
REMOTE_TIMEOUT, REMOTE_READ_TIMEOUT = 30.0, 300.0
"""Seconds to connect to a remote server; to wait on its open event stream."""
MAX_TOOLS_PER_SERVER = 100
MAX_SCHEMA_CHARS = 20_000
MAX_DESCRIPTION_CHARS = 4_000
"""What one server may put into every request: its tools' schemas and descriptions are
the server's words, and a request the API refuses would stop the whole run."""


class ServerContainer(Protocol):
    """A stdio server's container (sandbox/mcp_container.py)."""

    def start(self) -> ByteStream:
        """Start it; its attached stdin/stdout."""

    def why_it_died(self) -> str:
        """Why its stream ended."""

    def stop(self) -> None:
        """Remove it; safe more than once."""


Containers = Callable[[ServerDefinition], ServerContainer]
Asker = Callable[[ServerDefinition], bool]
"""Asks the user whether a repository's server may start (an interactive session)."""


@dataclass(frozen=True)
class McpTool:
    """One server tool as planrun offers it."""

    server: str
    name: str
    spec: ToolSpec
    read_only: bool
    annotated: bool
    """The server itself annotates it readOnlyHint (else the user's read_only_tools do)."""


@dataclass
class _Running:
    server: ServerDefinition
    connection: McpConnection
    container: ServerContainer | None


class McpHub:
    """Starts the servers it may, offers their tools, answers their calls, stops them."""

    def __init__(
        self,
        servers: ServerList,
        workspace: Path,
        *,
        containers: Containers,
        approvals: Approvals | None = None,
    ) -> None:
        self.servers = servers
        self.workspace = workspace
        self._containers = containers
        self._approvals = approvals or Approvals()
        self._running: dict[str, _Running] = {}
        self._stopped: dict[str, str] = {}
        """Why a server that ran was stopped, by name."""
        self._lock = threading.Lock()
        self.tools: list[McpTool] = []
        self.notes: list[str] = list(servers.notes)
        """One line per server that did not start (unapproved, ungranted, failed)."""

    def startable(self, ask: Asker | None = None) -> list[ServerDefinition]:
        """The servers that may start; a note for each of the others. ASK, when someone
        can answer, is asked about each repository server not approved yet (a yes is
        remembered)."""
        ready = []
        for server in self.servers.servers:
            approved = self._approvals.approved(self.workspace, server)
            if not approved and ask is not None and ask(server):
                self._approvals.approve(self.workspace, server)
                approved = True
            if not approved:
                self.notes.append(
                    f"MCP server {server.name!r} of {server.origin} is not approved, so it was "
                    f"not started; to use it: planrun mcp approve {server.name}"
                )
            elif (
                server.transport != "stdio" and server.needs_approval and not server.grants.network
            ):
                self.notes.append(
                    f"MCP server {server.name!r} of {server.origin} is remote ({server.url}); "
                    f"planrun reaches it only with network: true under mcp_servers: "
                    f"{server.name} in your config"
                )
            else:
                ready.append(server)
        return ready

    def start(
        self, on_progress: Callable[[str], None] | None = None, ask: Asker | None = None
    ) -> None:
        """Start every server that may start, side by side; one that fails is a note."""
        progress = on_progress or (lambda text: None)
        threads = []
        for server in self.startable(ask):
            progress(f"starting MCP server {server.name} ({server.describe()})")
            thread = threading.Thread(target=self._start_one, args=(server,), daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        self.tools.sort(key=lambda tool: tool.spec.name)

    def _start_one(self, server: ServerDefinition) -> None:
        container: ServerContainer | None = None
        connection: McpConnection | None = None
        try:
            if server.transport == "stdio":
                container = self._containers(server)
                connection = _stdio_connection(server, container)
            else:
                connection = McpConnection(server.name, _remote_opener(server), lambda: "")
            listed = connection.start(server.grants.startup_timeout)
        except (McpError, PlanrunError) as error:
            self._fail(server, connection, container, str(error))
            return
        tools, skipped = _offered(server, listed)
        with self._lock:
            self._running[server.name] = _Running(server, connection, container)
            self.tools.extend(tools)
            if skipped:
                self.notes.append(
                    f"MCP server {server.name!r}: tools left out (a name or schema the API "
                    f"refuses, or over {MAX_TOOLS_PER_SERVER} tools): {', '.join(skipped)}"
                )

    def _fail(
        self,
        server: ServerDefinition,
        connection: McpConnection | None,
        container: ServerContainer | None,
        reason: str,
    ) -> None:
        if connection is not None:
            connection.close()
        if container is not None:
            container.stop()
        with self._lock:
            self.notes.append(f"MCP server {server.name!r} did not start: {reason}")

    def offer(self, gives: Callable[[str, str], bool], *, read_only: bool) -> McpOffer:
        """The tools GIVES (server, tool) grants an agent; READ_ONLY offers only those
        that read (plan mode); the others are still known, so that a call of one is
        refused with guidance."""
        mine = [tool for tool in self.tools if gives(tool.server, tool.name)]
        return McpOffer(
            specs=tuple(tool.spec for tool in mine if tool.read_only or not read_only),
            names=frozenset(tool.spec.name for tool in mine),
            read_only=frozenset(tool.spec.name for tool in mine if tool.read_only),
            call=self.call,
        )

    def call(self, call: ToolCall, stop: Any = None) -> ToolResult:
        """Run one tool call on its server; every problem is an error result."""
        tool = next((tool for tool in self.tools if tool.spec.name == call.name), None)
        running = self._running.get(tool.server) if tool is not None else None
        if tool is None or running is None:
            server = call.name.split("__")[1] if call.name.count("__") >= 2 else ""
            why = self._stopped.get(server, "its server does not run")
            return ToolResult(call.id, f"{call.name} cannot be called: {why}.", True)
        outcome = running.connection.call(
            tool.name, dict(call.input), running.server.grants.timeout
        )
        if outcome.timed_out:
            # A server that hangs holds its container for nothing: it goes, and says why.
            self.stop_server(tool.server, f"it hung on {tool.name}")
        elif outcome.is_error and running.connection.ended and running.container is not None:
            running.container.stop()  # a crashed or flooding server leaves no container
        return ToolResult(call.id, cap_result(call.name, outcome.text), outcome.is_error)

    def running(self) -> list[str]:
        """The names of the servers that run, in the order they are defined."""
        return [name for name in (s.name for s in self.servers.servers) if name in self._running]

    def stop_server(self, name: str, why: str) -> None:
        """Stop one server (its tools are no longer offered), noting WHY."""
        with self._lock:
            entry = self._running.pop(name, None)
            self.tools = [tool for tool in self.tools if tool.server != name]
            self.notes.append(f"MCP server {name!r} was stopped: {why}")
            self._stopped[name] = f"planrun stopped MCP server {name!r}: {why}"
        if entry is not None:
            entry.connection.close()
            if entry.container is not None:
                entry.container.stop()

    def stop(self) -> None:
        """End every session and remove every container; safe more than once."""
        with self._lock:
            running, self._running = list(self._running.values()), {}
        for entry in running:
            entry.connection.close()
            if entry.container is not None:
                entry.container.stop()


def _stdio_connection(server: ServerDefinition, container: ServerContainer) -> McpConnection:
    attached = AttachedStdio(container.start())

    def explain() -> str:
        if attached.problem:
            return attached.problem
        why = container.why_it_died()
        tail = bytes(attached.stderr_tail).decode("utf-8", "replace").strip().splitlines()
        return f"{why}; its last error output: {tail[-1][:200]}" if tail else why

    return McpConnection(server.name, attached.open, explain)


def _remote_opener(server: ServerDefinition) -> Any:
    """Opens a remote server's transport from the host (only ever with a grant); its
    HTTP client closes with it."""
    import httpx2
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    headers = dict(server.headers)
    if server.transport == "sse":
        return lambda: sse_client(server.url, headers=headers)

    @asynccontextmanager
    async def opener() -> AsyncIterator[tuple[Any, Any]]:
        timeout = httpx2.Timeout(REMOTE_TIMEOUT, read=REMOTE_READ_TIMEOUT)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
            streamable_http_client(server.url, http_client=client) as (read, write),
        ):
            yield read, write

    return opener


def _offered(server: ServerDefinition, listed: list[RemoteTool]) -> tuple[list[McpTool], list[str]]:
    tools: list[McpTool] = []
    skipped: list[str] = []
    for remote in listed:
        full = f"mcp__{server.name}__{remote.name}"
        schema = remote.input_schema or {"type": "object", "properties": {}}
        if (
            not API_TOOL_NAME.fullmatch(full)
            or any(tool.spec.name == full for tool in tools)
            or len(tools) >= MAX_TOOLS_PER_SERVER
            or schema.get("type") != "object"
            or len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS
        ):
            skipped.append(remote.name[:60])
            continue
        description = f"[MCP server {server.name}] {remote.description}".strip()
        read_only = remote.read_only_hint or remote.name in server.grants.read_only_tools
        spec = ToolSpec(full, description[:MAX_DESCRIPTION_CHARS], schema)
        tools.append(McpTool(server.name, remote.name, spec, read_only, remote.read_only_hint))
    return tools, skipped
