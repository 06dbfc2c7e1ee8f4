"""Which servers start: a repository's only once approved (a session asks, and a yes is
remembered); a session's servers start once, hold a slot of its container budget each,
and stop with it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from sandbox_runner.mcp.approvals import Approvals
from sandbox_runner.mcp.hub import McpHub, ServerContainer
from sandbox_runner.mcp.servers import ServerDefinition, ServerList
from sandbox_runner.session.mcp_servers import SessionServers
from sandbox_runner.tools.mcp_offer import McpOffer
from sandbox_runner.tools.permissions import Approval, Ask
from sandbox_runner.types import ToolCall, ToolResult


class Answers:
    """A session UI that answers every question with ANSWER and keeps what it was shown."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[Ask] = []
        self.shown: list[str] = []

    def show(self, text: str) -> None:
        self.shown.append(text)

    def approve(self, ask: Ask) -> Approval:
        self.asked.append(ask)
        return Approval(self.answer)


class FakeHub:
    """Running servers without containers: what SessionServers needs of a hub."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.notes: list[str] = []
        self.stopped: list[str] = []
        self.all_stopped = False

    def running(self) -> list[str]:
        return [name for name in self.names if name not in self.stopped]

    def stop_server(self, name: str, why: str) -> None:
        self.stopped.append(name)
        self.notes.append(f"MCP server {name!r} was stopped: {why}")

    def offer(self, gives: Callable[[str, str], bool], *, read_only: bool) -> McpOffer:
        return McpOffer((), frozenset(), frozenset(), self.call)

    def call(self, call: ToolCall, stop: object) -> ToolResult:
        return ToolResult(call.id, "ok")

    def stop(self) -> None:
        self.all_stopped = True


def repository_server(name: str) -> ServerDefinition:
    return ServerDefinition(name, "repository", "/repo/.mcp.json", "stdio", command=name)


def test_a_repository_server_starts_once_approved_and_a_yes_is_remembered(
    tmp_path: Path,
) -> None:
    servers = ServerList((repository_server("git"), repository_server("time")))
    approvals = Approvals(tmp_path / "approvals.json")

    def no_container(server: ServerDefinition) -> ServerContainer:
        raise AssertionError("startable() starts nothing")

    def hub() -> McpHub:
        return McpHub(servers, tmp_path, containers=no_container, approvals=approvals)

    asked = hub()
    ready = asked.startable(lambda server: server.name == "git")
    assert [server.name for server in ready] == ["git"]
    [note] = asked.notes
    assert "'time'" in note and "planrun mcp approve time" in note
    # Nobody to ask (a plan run): what was approved starts, nothing else.
    later = hub()
    assert [server.name for server in later.startable()] == ["git"]
    assert "planrun mcp approve time" in later.notes[0]


def test_session_servers_start_once_and_hold_the_container_budget(tmp_path: Path) -> None:
    hub = FakeHub(["git", "time", "docs"])
    starts: list[object] = []

    def start(ask: object) -> FakeHub:
        starts.append(ask)
        return hub

    ui = Answers(True)
    slots = threading.Semaphore(2)
    servers = SessionServers(start, ui, slots)  # type: ignore[arg-type]
    assert servers.offer(lambda server, tool: True, read_only=True) is not None
    assert servers.offer(lambda server, tool: True, read_only=False) is not None
    assert len(starts) == 1
    # A budget of two: the third server is stopped, and the session says why.
    assert hub.stopped == ["docs"]
    assert any("'docs' was stopped: the session's container budget" in s for s in ui.shown)
    assert not slots.acquire(blocking=False)
    servers.stop()
    assert hub.all_stopped
    assert slots.acquire(blocking=False) and slots.acquire(blocking=False)


def test_the_start_question_says_what_runs_and_is_asked_each_time(tmp_path: Path) -> None:
    ui = Answers(False)
    servers = SessionServers(lambda ask: None, ui)
    server = repository_server("git")
    assert servers._ask(server) is False
    [ask] = ui.asked
    assert ask.once_only and ask.request.args["runs"] == "git"
    assert "start MCP server 'git' of /repo/.mcp.json" in ask.question
    assert "no network" in ask.question and "planrun mcp revoke git" in ask.question


def test_a_hostile_tool_listing_cannot_break_the_requests() -> None:
    from sandbox_runner.mcp.connection import RemoteTool
    from sandbox_runner.mcp.hub import MAX_TOOLS_PER_SERVER, _offered
    from sandbox_runner.mcp.servers import Grants

    server = ServerDefinition(
        "git",
        "user",
        "config",
        "stdio",
        command="x",
        grants=Grants(read_only_tools=frozenset({"b"})),
    )
    good = {"type": "object", "properties": {}}
    listed = [
        RemoteTool("a", "reads " * 2000, good, True),
        RemoteTool("b", "", good, False),
        RemoteTool("a", "again", good, True),
        RemoteTool("bad name", "", good, True),
        RemoteTool("array", "", {"type": "array"}, True),
        RemoteTool("huge", "", {"type": "object", "description": "x" * 50_000}, True),
        *(RemoteTool(f"t{n}", "", good, False) for n in range(MAX_TOOLS_PER_SERVER)),
    ]
    tools, skipped = _offered(server, listed)
    assert len(tools) == MAX_TOOLS_PER_SERVER
    assert [tool.spec.name for tool in tools[:2]] == ["mcp__git__a", "mcp__git__b"]
    assert len(tools[0].spec.description) == 4000
    # b: the user's list makes it read-only; the server did not say so.
    assert tools[1].read_only and not tools[1].annotated
    assert skipped[:4] == ["a", "bad name", "array", "huge"] and len(skipped) == 6
