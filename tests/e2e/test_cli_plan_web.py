"""`planrun plan` with web access: WebFetch offered and used only when the user grants a
host (--allow-web), for the built-in Plan agent and for an agent file that lists it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.plan_scripts import PerspectiveScript
from tests.support.web_server import WebServer, page
from tests.unit.test_plan_loop import VALID_PLAN

DOCS = "<html><body><h1>Flags</h1><p>Use <code>--verbose</code> for detail.</p></body></html>"
RESEARCHER = """---
name: researcher
description: Reads the code and the library's documentation, then plans.
tools: Read, Grep, Glob, WebFetch
---
You research, then write a plan.
"""


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here runs real sandboxes."""


def plan(*args: str) -> Result:
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body["tools"]]


def fetches_then_plans(url: str) -> list[Any]:
    return [
        message(tool_use("WebFetch", {"url": url, "prompt": "Which flag prints detail?"})),
        message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
        message(text("The plan is in /plan/plan.md.")),
    ]


def test_a_granted_plan_run_fetches_a_page_and_its_transcript_shows_it(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    with WebServer({"/docs": page(DOCS)}) as server:
        api.script = PerspectiveScript({"plan": fetches_then_plans(server.url("/docs"))})
        out = tmp_path / "out"
        result = plan("Add a flag", "--repo", str(sample_repo), "--out", str(out),
                      "--allow-web", "127.0.0.1")  # fmt: skip
    assert result.exit_code == 0, result.output
    first = api.message_requests[0].body
    # 127.0.0.1 names an address, not a domain a search could return: no WebSearch.
    assert tool_names(first) == ["Glob", "Grep", "Read", "Bash", "LS", "LSP", "WebFetch",
                                 "Write", "Edit"]  # fmt: skip
    assert [seen.path for seen in server.seen] == ["/docs"]
    entries = [
        json.loads(line) for line in (out / "plan.transcript.jsonl").read_text().splitlines()
    ]
    [fetched] = [e for e in entries if e["type"] == "tool_result" and e["name"] == "WebFetch"]
    assert not fetched["is_error"]
    assert "# Flags" in fetched["content"] and "`--verbose`" in fetched["content"]
    answered = api.message_requests[1].body["messages"][-1]["content"][0]
    assert answered["type"] == "tool_result" and "# Flags" in answered["content"]
    assert json.loads((out / "run.json").read_text())["request"]["allow_web"] == ["127.0.0.1"]


def test_without_a_grant_no_web_tool_is_offered_and_a_call_is_refused(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    with WebServer({"/docs": page(DOCS)}) as server:
        api.script = PerspectiveScript({"plan": fetches_then_plans(server.url("/docs"))})
        result = plan("Add a flag", "--repo", str(sample_repo), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    first = api.message_requests[0].body
    assert not {"WebFetch", "WebSearch"} & set(tool_names(first))
    refused = api.message_requests[1].body["messages"][-1]["content"][0]
    assert refused["is_error"] and "Tool 'WebFetch' is not available" in refused["content"]
    assert server.seen == []


def test_an_agent_file_listing_webfetch_gets_it_only_when_granted(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    agents = sample_repo / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(RESEARCHER)
    with WebServer({"/docs": page(DOCS)}) as server:
        api.script = PerspectiveScript({"plan": fetches_then_plans(server.url("/docs"))})
        granted = plan("Add a flag", "--repo", str(sample_repo), "--agent", "researcher",
                       "--out", str(tmp_path / "a"), "--allow-web", "127.0.0.1")  # fmt: skip
        requests = len(api.message_requests)
        api.script = PerspectiveScript({"plan": fetches_then_plans(server.url("/docs"))})
        ungranted = plan("Add a flag", "--repo", str(sample_repo), "--agent", "researcher",
                         "--out", str(tmp_path / "b"))  # fmt: skip
    assert granted.exit_code == 0, granted.output
    assert tool_names(api.message_requests[0].body) == ["Read", "Grep", "Glob", "WebFetch",
                                                       "Write", "Edit"]  # fmt: skip
    assert [seen.path for seen in server.seen] == ["/docs"]
    assert "not offered" not in granted.stderr
    assert ungranted.exit_code == 0, ungranted.output
    assert tool_names(api.message_requests[requests].body) == ["Read", "Grep", "Glob", "Write",
                                                              "Edit"]  # fmt: skip
    notes = [line for line in ungranted.stderr.splitlines() if "not offered" in line]
    assert len(notes) == 1
    assert (
        "researcher.md lists WebFetch for agent researcher, not offered: no web access"
        in (notes[0])
    )
