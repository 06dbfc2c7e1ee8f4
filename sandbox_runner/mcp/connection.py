"""A session with one MCP server through the official SDK, driven from planrun's threads:
its own event loop in a thread, a timeout on the handshake and on every call."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from mcp import ClientSession

Opener = Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]
"""Opens the transport: yields the (read, write) streams a ClientSession takes."""
CLOSE_SECONDS = 5.0


@dataclass(frozen=True)
class RemoteTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only_hint: bool
    """The server annotates it `readOnlyHint: true`."""


@dataclass(frozen=True)
class CallOutcome:
    """A tool call's answer as text for the model."""

    text: str
    is_error: bool
    timed_out: bool = False


class McpError(Exception):
    """The server cannot be used: it did not start, hung, crashed or flooded."""


class McpConnection:
    """One server's session; start() lists its tools, call() runs one, close() ends it."""

    def __init__(self, server: str, opener: Opener, explain: Callable[[], str]) -> None:
        """
        Args:
            server: its name, for messages.
            opener: opens the transport (a container's stream, an HTTP connection).
            explain: why the transport ended, when it did (an exit code, a flood).
        """
        self.server = server
        self._opener = opener
        self._explain = explain
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"mcp-{server}", daemon=True
        )
        self._ready: concurrent.futures.Future[list[RemoteTool]] = concurrent.futures.Future()
        self._session: ClientSession | None = None
        self._stop: asyncio.Event | None = None
        self._owner: concurrent.futures.Future[None] | None = None
        self._ended = ""

    @property
    def ended(self) -> bool:
        """Whether the session is over (the server crashed, flooded or was closed)."""
        return bool(self._ended)

    def start(self, timeout: float) -> list[RemoteTool]:
        """Open the transport, initialize, and list the tools, all within TIMEOUT seconds.

        Raises:
            McpError: it did not answer in time, or ended; the message says which.
        """
        self._thread.start()
        self._owner = asyncio.run_coroutine_threadsafe(self._own(timeout), self._loop)
        try:
            return self._ready.result(timeout + CLOSE_SECONDS)
        except concurrent.futures.TimeoutError:
            raise McpError(f"it did not start within {timeout:g} s") from None

    def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallOutcome:
        """Run one tool; every failure is an outcome with is_error, never an exception."""
        session = self._session
        if session is None:
            return CallOutcome(f"MCP server {self.server!r} is not running: {self._why()}", True)
        future = asyncio.run_coroutine_threadsafe(
            _call(session, tool, arguments, timeout), self._loop
        )
        try:
            return future.result(timeout + CLOSE_SECONDS)
        except (TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            return CallOutcome(
                f"MCP server {self.server!r} did not answer {tool} within {timeout:g} s", True, True
            )
        except Exception as error:
            if getattr(_first(error), "code", None) == mcp_types.CONNECTION_CLOSED:
                # The server went away (crashed, killed, flooded): the session is over.
                self._ended = self._ended or "the connection closed"
                self.close()
            if self._ended:
                return CallOutcome(f"MCP server {self.server!r} stopped: {self._why()}", True)
            return CallOutcome(f"MCP server {self.server!r}: {reason(error)}", True)

    def close(self) -> None:
        """End the session and the transport; safe to call more than once."""
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._owner is not None:
            try:
                self._owner.result(CLOSE_SECONDS)
            except BaseException:
                self._owner.cancel()
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CLOSE_SECONDS)

    def _why(self) -> str:
        return self._explain() or self._ended or "it stopped"

    async def _own(self, timeout: float) -> None:
        self._stop = asyncio.Event()
        try:
            async with self._opener() as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(timeout):
                    await session.initialize()
                    tools = await _all_tools(session)
                self._session = session
                self._ready.set_result(tools)
                await self._stop.wait()
        except BaseException as error:
            self._ended = reason(error)
            if not self._ready.done():
                if isinstance(_first(error), TimeoutError):
                    message = f"it did not start within {timeout:g} s"
                else:
                    message = self._explain() or self._ended
                self._ready.set_exception(McpError(message))
        finally:
            self._session = None
            self._ended = self._ended or "the session ended"


async def _all_tools(session: ClientSession) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(100):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await session.list_tools(params=params)
        for tool in listed.tools:
            hint = tool.annotations.read_only_hint if tool.annotations is not None else None
            tools.append(
                RemoteTool(tool.name, tool.description or "", dict(tool.input_schema), hint is True)
            )
        cursor = listed.next_cursor
        if not cursor:
            break
    return tools


async def _call(
    session: ClientSession, tool: str, arguments: dict[str, Any], timeout: float
) -> CallOutcome:
    with anyio.fail_after(timeout):
        result = await session.call_tool(tool, arguments)
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        else:
            parts.append(f"[{block.type} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return CallOutcome("\n".join(parts) or "(no output)", result.is_error)


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def reason(error: BaseException) -> str:
    """One line for an error the SDK raised (the first of a group)."""
    first = _first(error)
    text = str(first).strip().splitlines()[0][:300] if str(first).strip() else ""
    return text or type(first).__name__
