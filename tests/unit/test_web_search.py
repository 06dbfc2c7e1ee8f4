"""WebSearch through the real SDK and the fake Messages API: the server-side web search
tool sent with the granted domains, an endpoint without it said once, and server-side
blocks carried back in the conversation exactly as they came."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runner.agents.conversation import saved_conversation
from sandbox_runner.agents.loop import Headless
from sandbox_runner.agents.web_tools import SEARCH_TOOL_TYPE, WebTools
from sandbox_runner.model.anthropic_model import AnthropicModel
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.types import ToolCall, ToolResult, Usage
from sandbox_runner.web_grant import WebGrant
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    Scripted,
    error,
    message,
    server_tool_use,
    text,
    tool_use,
    usage,
    web_search_tool_result,
)
from tests.support.scripted_model import ScriptedModel, reply, say, use
from tests.unit.test_agent_loop import make_loop

UNSUPPORTED = (
    "tools.0: Input tag 'web_search_20250305' found using 'type' does not match any of the "
    "expected tags: 'custom'"
)


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


def web_tools(api: FakeMessagesAPI, notices: list[str], spent: list[Usage]) -> WebTools:
    model = AnthropicModel("claude-test", api_key="test-key", base_url=api.base_url, max_retries=0)
    grant = WebGrant.of(["docs.python.org", "*.readthedocs.io", "127.0.0.1"])
    return WebTools(grant, model, "claude-test", on_usage=spent.append, on_notice=notices.append)


def search(tools: WebTools, **arguments: object) -> ToolResult:
    call = ToolCall("toolu_s", "WebSearch", {"query": "asyncio timeout", **arguments})
    return tools.web_search(call, threading.Event())


def found(query: str) -> list[Scripted]:
    return [
        message(
            server_tool_use(query, id="srvtoolu_1"),
            web_search_tool_result(
                "srvtoolu_1",
                [("asyncio — Timeouts", "https://docs.python.org/3/library/asyncio-task.html")],
            ),
            text("asyncio.timeout() arrived in Python 3.11."),
            usage=usage(input_tokens=900, output_tokens=60),
        )
    ]


def test_the_search_tool_goes_with_the_granted_domains_and_its_results_come_back(
    api: FakeMessagesAPI,
) -> None:
    api.script = found("asyncio timeout")
    notices: list[str] = []
    spent: list[Usage] = []
    result = search(web_tools(api, notices, spent))
    assert not result.is_error, result.content
    [request] = api.message_requests
    assert request.body["tools"] == [
        {
            "type": SEARCH_TOOL_TYPE,
            "name": "web_search",
            "max_uses": 5,
            "allowed_domains": ["docs.python.org", "readthedocs.io"],
        }
    ]
    assert "asyncio timeout" in str(request.body["messages"])
    assert result.content.startswith('Web search results for "asyncio timeout":')
    assert (
        "1. asyncio — Timeouts — https://docs.python.org/3/library/asyncio-task.html"
        in result.content
    )
    assert result.content.endswith("asyncio.timeout() arrived in Python 3.11.")
    assert [u.input_tokens for u in spent] == [900] and notices == []


def test_the_call_may_narrow_the_domains_but_not_leave_the_grant(api: FakeMessagesAPI) -> None:
    api.script = found("asyncio timeout")
    tools = web_tools(api, [], [])
    assert not search(tools, allowed_domains=["requests.readthedocs.io"]).is_error
    assert api.message_requests[0].body["tools"][0]["allowed_domains"] == [
        "requests.readthedocs.io"
    ]
    outside = search(tools, allowed_domains=["evil.example"])
    assert outside.is_error and "evil.example is not in the web grant" in outside.content
    assert len(api.message_requests) == 1


def test_an_endpoint_without_server_side_search_is_said_once(api: FakeMessagesAPI) -> None:
    api.script = [error(400, "invalid_request_error", UNSUPPORTED)]
    notices: list[str] = []
    tools = web_tools(api, notices, [])
    first, second = search(tools), search(tools)
    assert first.is_error and second.is_error
    assert "does not support the server-side web search tool (web_search_20250305)" in (
        first.content
    )
    assert "Use WebFetch" in first.content and second.content == first.content
    assert notices == [first.content]
    assert len(api.message_requests) == 1


def test_an_endpoint_that_ignores_the_search_tool_is_said_too(api: FakeMessagesAPI) -> None:
    api.script = [message(text("I cannot browse the web."))]
    notices: list[str] = []
    result = search(web_tools(api, notices, []))
    assert result.is_error and "it answered without running a search" in result.content
    assert len(notices) == 1


def test_server_side_blocks_go_back_in_the_conversation_as_they_came(
    api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """An answer holding the API's own search (and text citing it) is sent back unchanged
    in the next request, beside the answer to the model's own tool call."""
    cited = text("Python 3.11 added it.") | {
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://docs.python.org/3/whatsnew/3.11.html",
                "title": "What's New In Python 3.11",
                "encrypted_index": "EqQBCioIAhgBIiQ",
                "cited_text": "asyncio.timeout() context manager",
            }
        ]
    }
    search_use = server_tool_use("asyncio timeout 3.11", id="srvtoolu_9")
    results = web_search_tool_result(
        "srvtoolu_9", [("What's New", "https://docs.python.org/3/whatsnew/3.11.html")]
    )
    read = tool_use("Read", {"file_path": "notes.txt"}, id="toolu_read")
    api.script = [message(search_use, results, cited, read), message(text("Done."))]
    model = AnthropicModel("claude-test", api_key="test-key", base_url=api.base_url, max_retries=0)
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox:
        loop.run("When did asyncio.timeout arrive?")
    second = api.message_requests[1].body["messages"]
    assert second[1] == {"role": "assistant", "content": [search_use, results, cited, read]}
    assert second[2]["content"][0]["tool_use_id"] == "toolu_read"


def test_a_searchs_tokens_count_in_the_run_and_survive_its_transcript(tmp_path: Path) -> None:
    search_model = ScriptedModel(
        [
            reply(
                server_tool_use("retry policy", id="srvtoolu_2"),
                web_search_tool_result("srvtoolu_2", [("Retries", "https://docs.python.org/r")]),
                say("They back off."),
                tokens=1000,
            )
        ]
    )
    web = WebTools(WebGrant.of(["docs.python.org"]), search_model, "claude-test")
    agent = ScriptedModel(
        [reply(use("WebSearch", {"query": "retry policy"}), tokens=100), reply(say("Done."))]
    )
    loop, sandbox = make_loop(
        tmp_path, agent, [PermissionMode.PLAN], Headless(), host_tools=web.handlers()
    )
    web.on_usage = lambda spent: loop.count_usage(spent, "WebSearch")
    with sandbox:
        loop.run("how are retries done?")
    assert search_model.requests[0].server_tools[0]["allowed_domains"] == ["docs.python.org"]
    assert loop.state.usage.input_tokens == 100 + 1000 + 100
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert saved_conversation(lines).usage == loop.state.usage
