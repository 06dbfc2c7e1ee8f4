"""What an interrupt leaves behind in a session: every tool call answered, a /compact right
after it that works and leaks nothing into the next message, a line queued behind it given
back in the input; and one token count, the same in the spinner and the toolbar, going on
after a resume."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.model.errors import ModelError
from sandbox_runner.session.accounting import SUMMARY_REQUEST
from sandbox_runner.session.commands import Commands
from sandbox_runner.session.session import INTERRUPTED_NOTE, Session
from sandbox_runner.session.status_view import cost_lines
from sandbox_runner.session.terminal import Terminal
from sandbox_runner.session.terminal_output import TerminalUI
from sandbox_runner.session.terminal_ui import Activity, toolbar
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode
from sandbox_runner.types import ModelRequest, ModelResponse
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import FakeUI, Models, open_session

EXPLORE = {"description": "d", "prompt": "look around", "subagent_type": "Explore"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def texts(message: dict[str, Any]) -> list[str]:
    return [block.get("text", "") for block in message["content"] if block["type"] == "text"]


class Hung:
    """A model call that answers only once released (a slow model the user interrupts)."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.called.set()
        self.release.wait(30)
        return reply(say("too late"))


def interrupted_turn(session: Session, hung: Hung, text: str) -> None:
    """Send TEXT; interrupt as soon as the model is asked."""
    sending = threading.Thread(target=session.send, args=(text,))
    sending.start()
    assert hung.called.wait(30)
    session.interrupt()
    sending.join(30)
    assert not sending.is_alive()


def test_an_interrupt_between_tool_calls_answers_them_all_and_the_session_goes_on(
    workspace: Path, tmp_path: Path
) -> None:
    """The API refuses a conversation with a tool_use left unanswered."""

    class InterruptingUI(FakeUI):
        def approve(self, ask: Ask) -> Approval:
            session.interrupt()  # Esc while the dialog is up; then the user says yes
            return Approval(True)

    first = use("Bash", {"command": "touch one"})
    second = use("Bash", {"command": "touch two"})
    models = Models({"work": [reply(first, second), reply(say("Next, then."))]})
    ui = InterruptingUI()
    session = open_session(workspace, tmp_path, models, ui)
    try:
        session.send("make two files")
        assert ui.shown == ["stopped: interrupted"]
        session.send("do something else")
    finally:
        session.close()
    sent = models.made["work"].requests[-1].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    results = [block for block in sent[2]["content"] if block["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [first["id"], second["id"]]
    assert "interrupted" in results[1]["content"] and results[1]["is_error"]
    assert texts(sent[2]) == [INTERRUPTED_NOTE, "do something else"]
    assert (workspace / "one").exists() and not (workspace / "two").exists()


def test_compact_right_after_an_interrupt_compacts_and_its_request_stays_out(
    workspace: Path, tmp_path: Path
) -> None:
    hung = Hung()
    models = Models({"work": [hung, reply(say("The summary.")), reply(say("On it."))]})
    ui = FakeUI()
    session = open_session(workspace, tmp_path, models, ui)
    try:
        interrupted_turn(session, hung, "write a long essay")
        session.compact()
        assert ui.shown == ["stopped: interrupted", "conversation compacted"]
        session.send("now the short version")
    finally:
        hung.release.set()
        session.close()
    summary_request, after = models.made["work"].requests[1:]
    assert summary_request.tool_choice == "none"
    [message] = after.messages
    assert message["content"][0]["text"].endswith("The summary.")
    assert texts(message)[1:] == ["now the short version"]


def test_a_failed_compact_takes_its_request_back_for_good(workspace: Path, tmp_path: Path) -> None:
    models = Models({"work": [reply(say("Hi.")), ModelError("the API failed"), reply(say("Ok."))]})
    ui = FakeUI()
    session = open_session(workspace, tmp_path, models, ui)
    try:
        session.send("hello")
        session.compact()
        assert ui.shown == ["Hi.", "could not compact: the API failed"]
        session.send("go on")
    finally:
        session.close()
    sent = models.made["work"].requests[-1].messages
    assert [texts(m) for m in sent] == [["hello"], ["Hi."], ["go on"]]
    again = open_session(workspace, tmp_path, Models({}), FakeUI(), resume=session.state.id)
    try:
        resumed = again.messages("work")
        assert [texts(m) for m in resumed] == [["hello"], ["Hi."], ["go on"], ["Ok."]]
        assert SUMMARY_REQUEST not in str(resumed)
    finally:
        again.close()


def counts(session: Session, activity: Activity) -> tuple[int, int]:
    """The spinner's token count and the toolbar's, as drawn."""
    drawn = "".join(text for _, text in toolbar(session, PermissionMode.DEFAULT, activity, ""))
    spinner, facts = re.findall(r"([\d,]+) tokens", drawn)
    return int(spinner.replace(",", "")), int(facts.replace(",", ""))


def test_one_token_count_in_spinner_and_toolbar_subagents_included_and_after_a_resume(
    workspace: Path, tmp_path: Path
) -> None:
    """Each scripted answer uses 125 tokens: the work turn's two, and the Explore
    subagent's one."""
    seen: list[tuple[int, int]] = []
    activity = Activity()
    activity.begin()

    class Watching(FakeUI):
        def event(self, event: AgentEvent) -> None:
            super().event(event)
            if event.kind == "tool_result":  # mid-turn: the subagent has answered
                seen.append(counts(session, activity))

    models = Models(
        {"work": [reply(use("Task", EXPLORE)), reply(say("Done."))], "task": [reply(say("ok"))]}
    )
    session = open_session(workspace, tmp_path, models, Watching())
    try:
        session.send("explore")
        assert seen == [(250, 250)]
        assert counts(session, activity) == (375, 375) and session.state.tokens == 375
        cost = session.state.cost_usd
    finally:
        session.close()
    again = open_session(
        workspace, tmp_path, Models({"work": [reply(say("More."))]}), FakeUI(), session.state.id
    )
    try:
        assert counts(again, activity) == (375, 375) and again.totals() == (375, cost)
        again.send("more")
        assert counts(again, activity) == (500, 500) and again.state.tokens == 500
        assert "before this resume: 375 tokens" in "\n".join(cost_lines(again))
        assert cost_lines(again)[-1].startswith("total: 500 tokens")
    finally:
        again.close()


def test_a_line_queued_behind_an_interrupted_turn_comes_back_in_the_input(
    workspace: Path, tmp_path: Path
) -> None:
    hung = Hung()
    models = Models({"work": [hung, reply(say("Shorter, then."))]})
    session = open_session(workspace, tmp_path, models, FakeUI())
    ui = TerminalUI()
    said: list[str] = []
    ui.say = lambda *lines: said.extend(lines)  # type: ignore[method-assign]

    def user() -> None:
        assert hung.called.wait(30)
        pipe.send_text("make it short\r")
        deadline = time.monotonic() + 30
        while not any("queued" in line for line in said) and time.monotonic() < deadline:
            time.sleep(0.01)
        pipe.send_text("\x1b")  # Esc: the turn stops, and the queued line comes back
        while ui.activity.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # were it still queued, it would have run by now
        given_back.append(terminal.prompt.default_buffer.text)
        pipe.send_text("\r")  # Enter sends it
        while len(models.made["work"].requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        pipe.send_text("\x04")

    given_back: list[str] = []
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        terminal = Terminal(session, Commands(session), ui, input=pipe, output=DummyOutput())
        pipe.send_text("write a long essay\r")
        threading.Thread(target=user, daemon=True).start()
        try:
            asyncio.run(asyncio.wait_for(terminal.run(), 60))
        finally:
            hung.release.set()
            session.close()
    assert given_back == ["make it short"]
    assert any("queued message is back in the input" in line for line in said)
    last = models.made["work"].requests[-1].messages[-1]
    assert texts(last) == ["write a long essay", INTERRUPTED_NOTE, "make it short"]
