"""The one agent loop, beyond plan runs: modes and approvals read on every call, the
Approver seam, run_turn, and a conversation that can be rebuilt from its transcript."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runner import Model
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.agents.conversation import saved_conversation
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.agents.hooks import Approver, LoopHooks
from sandbox_runner.agents.loop import AgentLoop, Headless
from sandbox_runner.agents.loop_config import HostTool, LoopConfig
from sandbox_runner.agents.run_state import LimitReached, TurnEnded
from sandbox_runner.model.errors import ModelRefusal
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import ToolCall, ToolResult
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use

TOOLS = tools_for(dict.fromkeys(["Read", "Bash", "Write", "Edit"]))


class Recording:
    """An approver that answers from a list and remembers what it was asked; after each
    answer it runs `then` (the user pressing Shift+Tab while the agent works, say)."""

    def __init__(self, *answers: Approval, then: Callable[[], object] = lambda: None) -> None:
        self.answers = list(answers)
        self.asked: list[Ask] = []
        self.then = then

    def approve(self, ask: Ask) -> Approval:
        self.asked.append(ask)
        answer = self.answers.pop(0)
        self.then()
        return answer


def make_loop(
    tmp_path: Path,
    model: Model,
    mode: list[PermissionMode],
    approver: Approver,
    host_tools: dict[str, HostTool] | None = None,
    events: list[AgentEvent] | None = None,
) -> tuple[AgentLoop, LocalSandbox]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("hello\n")
    sandbox = LocalSandbox(workspace, tmp_path / "plan")
    (tmp_path / "plan").mkdir(exist_ok=True)
    tools = TOOLS + tools_for(host_tools or {})
    config = LoopConfig(
        model=model,
        model_id="claude-test",
        system_prompt="You work.",
        tools=lambda: tools,
        context=ToolContext(offered=frozenset(t.name for t in tools)),
        mode=lambda: mode[0],
        rules=lambda: Rules(),
        transcript=tmp_path / "transcript.jsonl",
        host_tools=host_tools or {},
    )
    on_event = events.append if events is not None else None
    loop = AgentLoop(
        config, sandbox=sandbox, approver=approver, hooks=LoopHooks(), on_event=on_event
    )
    return loop, sandbox


def test_the_mode_is_read_at_every_call_and_asks_go_to_the_approver(tmp_path: Path) -> None:
    mode = [PermissionMode.DEFAULT]
    model = ScriptedModel(
        [
            reply(use("Bash", {"command": "touch /plan/x"})),
            reply(use("Bash", {"command": "touch /plan/y"})),
            reply(say("done")),
        ]
    )

    def shift_tab_to_plan() -> None:
        mode[0] = PermissionMode.PLAN

    approver = Recording(Approval(False, feedback="use the plan instead"), then=shift_tab_to_plan)
    loop, sandbox = make_loop(tmp_path, model, mode, approver)
    with sandbox:
        loop.run("make files")
    [asked] = approver.asked
    assert asked.question == "run `touch /plan/x`" and asked.prefix == "touch"
    results = [m for m in loop.state.messages if m["role"] == "user"][1:3]
    first, second = (r["content"][0]["content"] for r in results)
    assert "Not approved" in first and "use the plan instead" in first
    assert "Plan mode is read-only" in second  # denied, never asked, in plan mode
    assert not (tmp_path / "plan" / "x").exists() and not (tmp_path / "plan" / "y").exists()


def test_a_headless_run_is_told_it_cannot_ask(tmp_path: Path) -> None:
    model = ScriptedModel(
        [reply(use("Write", {"file_path": "a.txt", "content": "x"})), reply(say("ok"))]
    )
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox:
        loop.run("write")
    result = loop.state.messages[2]["content"][0]
    assert result["is_error"] and "cannot ask for approval" in result["content"]


def test_run_turn_continues_the_conversation_and_the_transcript_rebuilds_it(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            reply(use("Read", {"file_path": "notes.txt"})),
            reply(say("It says hello.")),
            reply(say("Goodbye.")),
        ]
    )
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.ACCEPT_EDITS], Headless())
    with sandbox:
        loop.run("read the notes")
        loop.add_note("(a note from planrun)")
        loop.run_turn("and now?")
    roles = [m["role"] for m in loop.state.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert loop.state.messages[4]["content"][0]["text"] == "(a note from planrun)"
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert saved_conversation(lines).messages == loop.state.messages


def test_a_host_tool_that_ends_the_turn_leaves_every_call_answered(tmp_path: Path) -> None:
    model = ScriptedModel(
        [reply(use("ExitPlanMode", {}), use("Read", {"file_path": "notes.txt"})), reply(say("no"))]
    )

    def accept(call: ToolCall, stop: Cancel) -> ToolResult:
        raise TurnEnded(ToolResult(call.id, "The user accepted the plan."))

    loop, sandbox = make_loop(
        tmp_path, model, [PermissionMode.DEFAULT], Headless(), {"ExitPlanMode": accept}
    )
    with sandbox, pytest.raises(TurnEnded):
        loop.run("plan")
    assert len(model.requests) == 1 and not loop.cancel.is_set()
    accepted, cut = loop.state.messages[-1]["content"]
    assert accepted["content"] == "The user accepted the plan."
    assert cut["is_error"] and cut["content"].startswith("Not run")
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert saved_conversation(lines).messages == loop.state.messages


def nested(depth: int) -> dict[str, object]:
    """A tool input with objects nested DEPTH levels deep."""
    value: dict[str, object] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_a_tool_input_nested_too_deeply_is_refused_and_the_run_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            reply(use("Read", nested(100_000)), use("Read", {"file_path": "notes.txt"})),
            reply(say("The input was too deep; the notes say hello.")),
        ]
    )
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox:
        loop.run("read the notes")
    assert loop.state.final_text == "The input was too deep; the notes say hello."
    deep, flat = loop.state.messages[2]["content"]
    assert deep["is_error"] and "nested more than 64 levels deep" in deep["content"]
    assert not flat.get("is_error") and "hello" in flat["content"]
    # The next request, and the transcript a resume reads, hold no deep input.
    assert model.requests[1].messages[1]["content"][0]["input"] == {
        "planrun_removed": "the tool input is nested more than 64 levels deep"
    }
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert saved_conversation(lines).messages == loop.state.messages


def test_a_tool_input_within_the_depth_limit_is_run(tmp_path: Path) -> None:
    model = ScriptedModel(
        [reply(use("Read", {"file_path": "notes.txt", "x": nested(63)})), reply(say("ok"))]
    )
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox:
        loop.run("read the notes")
    [result] = loop.state.messages[2]["content"]
    assert "nested more than" not in result["content"]


# --- the API's stop reasons -----------------------------------------------------------------


def test_a_tool_call_cut_by_the_output_limit_is_never_run(tmp_path: Path) -> None:
    # The limit struck while the model wrote the Write call's content: what arrived of
    # its input must not be written, though the complete Read before it runs.
    cut = use("Write", {"file_path": "/plan/plan.md", "content": "# Plan\n\n## Step"})
    model = ScriptedModel(
        [
            reply(use("Read", {"file_path": "notes.txt"}), cut, stop_reason="max_tokens"),
            reply(say("Written in parts.")),
        ]
    )
    events: list[AgentEvent] = []
    loop, sandbox = make_loop(
        tmp_path, model, [PermissionMode.ACCEPT_EDITS], Headless(), events=events
    )
    with sandbox:
        loop.run("write the plan")
    assert not (tmp_path / "plan" / "plan.md").exists()
    read, write = loop.state.messages[2]["content"]
    assert not read.get("is_error") and "hello" in read["content"]
    assert write["is_error"] and "output limit of 16000 tokens" in write["content"]
    assert "Not run" in write["content"]
    [notice] = [event for event in events if event.kind == "notice"]
    assert notice.tool == "Write" and "\n" not in notice.detail
    assert "output limit of 16000 tokens cut the model's Write call short" in notice.detail
    assert loop.state.final_text == "Written in parts."


def test_a_refusal_ends_the_turn_with_its_category_and_explanation(tmp_path: Path) -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Exploit\ndevelopment."}
    model = ScriptedModel([reply(stop_reason="refusal", stop_details=details)])
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox, pytest.raises(ModelRefusal) as refused:
        loop.run("write an exploit")
    assert str(refused.value) == (
        "the API stopped the model's answer as a refusal (category cyber): Exploit development."
    )
    # The refused (empty) answer is replaced, so the conversation can go on.
    assert loop.state.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": f"(planrun: {refused.value})"}],
    }


def test_a_paused_turn_is_sent_back_as_it_is_and_goes_on(tmp_path: Path) -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    model = ScriptedModel(
        [
            reply(say("Searching."), search, stop_reason="pause_turn"),
            reply(say("Found it.")),
        ]
    )
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox:
        loop.run("look it up")
    assert loop.state.final_text == "Found it."
    # The second request ends with the paused answer as it came, with no user turn after it.
    assert model.requests[1].messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching."}, search],
    }
    assert loop.state.messages[-1]["content"][-1] == {"type": "text", "text": "Found it."}
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert saved_conversation(lines).messages == loop.state.messages


def test_a_turn_paused_again_and_again_is_stopped_and_said_so(tmp_path: Path) -> None:
    model = ScriptedModel([reply(say("..."), stop_reason="pause_turn") for _ in range(6)])
    loop, sandbox = make_loop(tmp_path, model, [PermissionMode.DEFAULT], Headless())
    with sandbox, pytest.raises(LimitReached, match=r"paused the model's answer 5 times"):
        loop.run("look it up")
    assert len(model.requests) == 5


def test_a_failed_command_reaches_the_model_and_the_user_as_an_error(tmp_path: Path) -> None:
    commands = ["echo fine", "echo broken >&2; exit 3", "sleep 5"]
    calls = [reply(use("Bash", {"command": c, "timeout": 1000})) for c in commands]
    model = ScriptedModel([*calls, reply(say("done"))])
    events: list[AgentEvent] = []
    loop, sandbox = make_loop(
        tmp_path, model, [PermissionMode.DEFAULT], Recording(*[Approval(True)] * 3), events=events
    )
    with sandbox:
        loop.run("run them")
    fine, broken, slow = (m["content"][0] for m in loop.state.messages[2:7:2])
    assert not fine.get("is_error") and fine["content"] == "fine"
    assert broken["is_error"] and broken["content"].startswith("Exit code 3\n")
    assert "broken" in broken["content"]
    assert slow["is_error"] and "timed out" in slow["content"].splitlines()[0]
    outcomes = [e.detail for e in events if e.kind == "tool_result"]
    assert outcomes[0] == "ok" and outcomes[1] == "error: Exit code 3"
