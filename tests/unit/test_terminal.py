"""The terminal session without a terminal: prompt_toolkit's pipe input and dummy output
drive the prompt, its key bindings, the dialogs; the badge and completion as data."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from sandbox_runner.session.commands import Commands
from sandbox_runner.session.dialogs import approval_dialog, review_dialog
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.terminal import Terminal
from sandbox_runner.session.terminal_output import TerminalUI
from sandbox_runner.session.terminal_ui import (
    SPINNER,
    Activity,
    SlashCompleter,
    toolbar,
    wrap_parts,
)
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode
from sandbox_runner.tools.policy import ToolKind
from sandbox_runner.types import ToolRequest
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import FakeUI, Models, open_session

SHIFT_TAB, DOWN, UP, CTRL_C, CTRL_D = "\x1b[Z", "\x1b[B", "\x1b[A", "\x03", "\x04"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


@pytest.fixture
def session(workspace: Path, tmp_path: Path) -> Iterator[Session]:
    made = open_session(workspace, tmp_path, Models({}), FakeUI())
    yield made
    made.close()


@pytest.fixture
def pipe() -> Iterator[PipeInput]:
    with create_pipe_input() as made, create_app_session(input=made, output=DummyOutput()):
        yield made


def run_terminal(session: Session, pipe: PipeInput, keys: str) -> Terminal:
    """Type KEYS into a terminal session until it ends (Ctrl-D, Ctrl-C twice, /quit)."""
    ui = TerminalUI()
    ui.session = session
    terminal = Terminal(session, Commands(session), ui, input=pipe, output=DummyOutput())
    pipe.send_text(keys)
    asyncio.run(asyncio.wait_for(terminal.run(), 30))
    return terminal


def plain(fragments: list[tuple[str, str]]) -> str:
    return "".join(text for _, text in fragments)


def test_shift_tab_cycles_default_accept_edits_plan_default(
    session: Session, pipe: PipeInput
) -> None:
    run_terminal(session, pipe, SHIFT_TAB + CTRL_D)
    assert session.state.mode == "acceptEdits"
    run_terminal(session, pipe, SHIFT_TAB + CTRL_D)
    assert session.state.mode == "plan" and session.state.plan_file
    run_terminal(session, pipe, "\x1bm" + CTRL_D)  # Alt+M, the same
    assert session.state.mode == "default"


def test_a_second_ctrl_c_on_an_empty_prompt_quits_and_typing_disarms_it(
    session: Session, pipe: PipeInput
) -> None:
    terminal = run_terminal(session, pipe, CTRL_C + "x" + CTRL_C + CTRL_C + CTRL_C)
    assert not terminal.prompt.default_buffer.text
    # Ctrl-C, typing, Ctrl-C (clears the line), Ctrl-C (arms), Ctrl-C (quits): it ended.


def test_messages_run_in_the_worker_and_queued_commands_after_them(
    workspace: Path, tmp_path: Path, pipe: PipeInput
) -> None:
    ui = FakeUI()
    session = open_session(workspace, tmp_path, Models({"work": [reply(say("Hi."))]}), ui)

    def quit_when_done() -> None:
        deadline = time.monotonic() + 30
        while session.state.mode != "plan" and time.monotonic() < deadline:
            time.sleep(0.01)
        pipe.send_text(CTRL_D)

    try:
        terminal = Terminal(session, Commands(session), TerminalUI(), input=pipe)
        pipe.send_text("hello\r/mode plan\r")
        threading.Thread(target=quit_when_done, daemon=True).start()
        asyncio.run(asyncio.wait_for(terminal.run(), 30))
    finally:
        session.close()
    assert ui.shown == ["Hi."]
    assert session.state.mode == "plan"  # the command ran after the turn, in order
    assert [m["role"] for m in session.messages("work")] == ["user", "assistant"]


def test_a_message_sent_while_the_session_starts_waits_under_a_spinner(
    workspace: Path, tmp_path: Path, pipe: PipeInput
) -> None:
    """The prompt takes a message before the containers are up; the toolbar says what is
    still starting, and the message runs once it is done."""
    shown = FakeUI()
    session = open_session(workspace, tmp_path, Models({"work": [reply(say("Hi."))]}), shown)
    ui = TerminalUI()
    release = threading.Event()
    toolbars: list[str] = []
    answered_early: list[str] = []

    def first() -> None:
        with ui.preparing("starting the session"):
            release.wait(30)

    def type_then_release() -> None:
        pipe.send_text("hello\r")
        deadline = time.monotonic() + 30
        while not ui.activity.preparing and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # time enough for the message to run, were it not waiting
        toolbars.append(plain(toolbar(session, PermissionMode.DEFAULT, ui.activity, "")))
        answered_early.extend(shown.shown)
        release.set()
        while (not shown.shown or ui.activity.busy) and time.monotonic() < deadline:
            time.sleep(0.01)
        toolbars.append(plain(toolbar(session, PermissionMode.DEFAULT, ui.activity, "")))
        pipe.send_text(CTRL_D)

    try:
        terminal = Terminal(session, Commands(session), ui, input=pipe, output=DummyOutput())
        threading.Thread(target=type_then_release, daemon=True).start()
        asyncio.run(asyncio.wait_for(terminal.run(first), 30))
    finally:
        session.close()
    waiting, done = toolbars
    assert waiting.startswith(tuple(f"{frame} starting the session…\n" for frame in SPINNER))
    assert done.startswith("default mode (shift+tab to cycle)")
    assert answered_early == [] and shown.shown == ["Hi."]


def test_the_badge_texts_colours_and_the_plan_tooltip(session: Session) -> None:
    activity = Activity()
    default = toolbar(session, PermissionMode.DEFAULT, activity, "")
    assert plain(default).startswith("default mode (shift+tab to cycle)")
    assert ("class:badge.default", "default mode (shift+tab to cycle)") in default
    edits = toolbar(session, PermissionMode.ACCEPT_EDITS, activity, "")
    assert ("class:badge.accept-edits", "⏵⏵ accept edits on (shift+tab to cycle)") in edits
    session.enter_plan()
    shown = toolbar(session, PermissionMode.PLAN, activity, "", width=400)
    assert ("class:badge.plan", "⏸ plan mode on (shift+tab to cycle)") in shown
    text = plain(shown)
    assert f"read-only · edits only to {session.state.plan_file} · /apply-plan to" in text
    assert "/exit-plan to leave · shift+tab to cycle" in text
    assert session.state.model in text and session.state.id in text
    activity.begin()
    assert "esc to interrupt" in plain(toolbar(session, PermissionMode.PLAN, activity, ""))


def test_the_tooltip_wraps_rather_than_losing_the_way_out() -> None:
    lines = wrap_parts(["read-only", "edits only to /a/long/path.md", "/exit-plan to leave"], 30)
    assert lines == ["read-only", "edits only to /a/long/path.md", "/exit-plan to leave"]


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("/exit-p", ["/exit-plan"]),
        ("/a", ["/accept", "/apply-plan", "/apply-patches", "/attach"]),
        ("/apply-plan a", ["acceptEdits"]),
        ("/mode ", ["default", "acceptEdits", "plan"]),
        ("hello /ex", []),
    ],
)
def test_slash_commands_and_their_arguments_complete(typed: str, expected: list[str]) -> None:
    found = SlashCompleter().get_completions(Document(typed), CompleteEvent(True))
    assert [completion.text for completion in found] == expected


def ask(prefix: str | None) -> Ask:
    request = ToolRequest("bash", {"command": "npm test"})
    kind = ToolKind.COMMAND if prefix else ToolKind.EDIT
    return Ask(request, "run `npm test`", kind, prefix=prefix)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("\r", Approval(True)),
        (DOWN + "\r", Approval(True, always=True)),
        (
            DOWN + DOWN + "\rrun the unit tests only\r",
            Approval(False, feedback="run the unit tests only"),
        ),
    ],
)
def test_an_approval_from_the_keyboard(pipe: PipeInput, keys: str, expected: Approval) -> None:
    pipe.send_text(keys)
    assert approval_dialog(ask("npm test")) == expected


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("\r", PlanReview(True, PermissionMode.DEFAULT)),  # the cursor starts on a safe yes
        (UP + "\r", PlanReview(True, PermissionMode.ACCEPT_EDITS)),
        (DOWN + DOWN + "\rsplit step 2\r", PlanReview(False, feedback="split step 2")),
    ],
)
def test_a_plan_review_from_the_keyboard(
    pipe: PipeInput, tmp_path: Path, keys: str, expected: PlanReview
) -> None:
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan\n")
    pipe.send_text(keys)
    assert review_dialog(plan, "# Plan\n", lambda: None) == expected


def test_edit_in_editor_then_accept(
    pipe: PipeInput, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan\n")
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "edited by me" >> "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    restaged: list[bool] = []
    pipe.send_text(DOWN + "\r" + "\r")  # "Edit the plan in $EDITOR first", then the safe yes
    review = review_dialog(plan, "# Plan\n", lambda: restaged.append(True))
    assert review == PlanReview(True, PermissionMode.DEFAULT)
    assert plan.read_text() == "# Plan\nedited by me\n" and restaged == [True]


def test_a_mode_asked_for_during_a_turn_applies_at_the_next_tool_call(
    workspace: Path, tmp_path: Path
) -> None:
    """Shift+Tab while the agent works: the turn's own thread switches before its next
    tool call, so the edit after the approved command needs no approval."""

    class SwitchingUI(FakeUI):
        def approve(self, ask: Ask) -> Approval:
            assert running.working
            running.request_mode(PermissionMode.ACCEPT_EDITS)
            assert running.state.mode == "default"  # not under the loop's feet
            assert running.wanted_mode is PermissionMode.ACCEPT_EDITS
            return super().approve(ask)

    steps = [
        reply(use("Bash", {"command": "npm test"})),
        reply(use("Write", {"file_path": "src/new.py", "content": "x = 1\n"})),
        reply(say("Done.")),
    ]
    ui = SwitchingUI()
    ui.approvals = [Approval(True)]
    running = open_session(workspace, tmp_path, Models({"work": steps}), ui)
    try:
        running.send("go")
    finally:
        running.close()
    assert [a.question for a in ui.asked] == ["run `npm test`"]
    assert running.state.mode == "acceptEdits" and not running.working


def test_a_tool_line_says_why_a_call_failed() -> None:
    from sandbox_runner.agents.events import AgentEvent
    from sandbox_runner.session.terminal_ui import tool_line

    def ended(detail: str) -> AgentEvent:
        return AgentEvent("tool_result", "work", 1, "Bash", detail, 1, 0, 0.0)

    assert tool_line(ended("error: Exit code 127"), "Bash npm test") == (
        "● Bash npm test ✗ Exit code 127"
    )
    assert tool_line(ended("ok"), "Bash ls") == "● Bash ls ✓"
