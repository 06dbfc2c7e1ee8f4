"""MCP tools and the permission modes: read-only tools run, others are refused with
guidance in plan mode (kept as suggestions) and asked about elsewhere, "always" per tool."""

from __future__ import annotations

from sandbox_runner.agents.definitions import PLAN, AgentDefinition
from sandbox_runner.tools.permissions import Allow, Ask, Deny, PermissionMode, Rules, check
from sandbox_runner.tools.policy import ToolContext, ToolKind
from sandbox_runner.types import ToolCall

LOG, COMMIT = "mcp__git__git_log", "mcp__git__git_commit"


def context(offered: set[str]) -> ToolContext:
    return ToolContext(
        frozenset({"Read", *offered}),
        "/repo",
        "Plan",
        mcp_tools=frozenset({LOG, COMMIT}),
        mcp_read_only=frozenset({LOG}),
    )


def call(name: str) -> ToolCall:
    return ToolCall("1", name, {"repo_path": "/workspace", "message": "x"})


def test_plan_mode_runs_a_read_only_tool_and_refuses_a_writing_one_with_guidance() -> None:
    plan = context({LOG})
    allowed = check(call(LOG), plan, PermissionMode.PLAN, Rules())
    assert isinstance(allowed, Allow) and allowed.request.args["repo_path"] == "/workspace"
    refused = check(call(COMMIT), plan, PermissionMode.PLAN, Rules())
    assert isinstance(refused, Deny)
    assert "not allowed in plan mode" in refused.message and "readOnlyHint" in refused.message
    assert refused.suggested_command is not None
    assert refused.suggested_command.startswith(COMMIT + " {")


def test_an_unknown_or_ungiven_mcp_tool_is_not_available() -> None:
    refused = check(call("mcp__git__git_push"), context({LOG}), PermissionMode.DEFAULT, Rules())
    assert isinstance(refused, Deny) and "not available" in refused.message


def test_the_work_session_asks_in_default_and_accept_edits_and_always_is_per_tool() -> None:
    work = context({LOG, COMMIT})
    for mode in (PermissionMode.DEFAULT, PermissionMode.ACCEPT_EDITS):
        asked = check(call(COMMIT), work, mode, Rules())
        assert isinstance(asked, Ask) and asked.kind is ToolKind.MCP
        assert asked.prefix == COMMIT and asked.question == f"call {COMMIT}"
    approved = Rules(approved_prefixes=frozenset({COMMIT}))
    assert isinstance(check(call(COMMIT), work, PermissionMode.DEFAULT, approved), Allow)
    other = Rules(approved_prefixes=frozenset({"mcp__git__git_add"}))
    assert isinstance(check(call(COMMIT), work, PermissionMode.DEFAULT, other), Ask)
    # Plan mode in the work session refuses it all the same.
    assert isinstance(check(call(COMMIT), work, PermissionMode.PLAN, approved), Deny)


def test_an_agent_gets_all_mcp_tools_unless_its_tools_name_some() -> None:
    assert PLAN.gives_mcp_tool("git", "git_log")
    named = AgentDefinition("r", "R", "", tools=("Read", "mcp__git__git_log", "mcp__time"))
    assert named.gives_mcp_tool("git", "git_log") and named.gives_mcp_tool("time", "now")
    assert not named.gives_mcp_tool("git", "git_commit")
    barred = AgentDefinition("b", "B", "", tools=("Read",), disallowed_tools=("mcp__git",))
    assert not barred.gives_mcp_tool("git", "git_log") and barred.gives_mcp_tool("time", "now")
    # A read-only agent may name MCP tools: which of them only read is known at run time.
    reader = AgentDefinition("p", "P", "", tools=("Read", "mcp__git"), read_only=True)
    assert reader.writing_tools() == () and reader.planrun_tools() == ("Read",)
