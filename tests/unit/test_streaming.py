"""Streaming, from the wire to the loop: the real SDK streams from the fake Messages API
when someone listens, a broken-off stream is taken back and retried, an abort or an
interrupt stops a slow stream at once, and the loop tells its text to the UI in order."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.agents.loop import AgentLoop
from sandbox_runner.agents.run_state import Interrupted
from sandbox_runner.model.anthropic_model import AnthropicModel
from sandbox_runner.model.errors import ModelError
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.types import ModelCall, ModelRequest, StreamEvent
from tests.support.fake_messages_api import FakeMessagesAPI, error, message, text, tool_use
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say
from tests.unit.test_agent_loop import Recording, make_loop

ANSWER = "Here is **the** answer, in several words."


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


def request() -> ModelRequest:
    return ModelRequest("claude-test", "You help.", [{"role": "user", "content": "hi"}], [], 1024)


def model_of(api: FakeMessagesAPI) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key="k", base_url=api.base_url, sleep=lambda _: None)


def test_a_listener_hears_each_word_then_the_block_and_gets_the_same_answer(
    api: FakeMessagesAPI,
) -> None:
    read = tool_use("Read", {"file_path": "a.py"}, id="toolu_1")
    api.add(message(text(ANSWER), read, text("Then this."), pace=0.01))
    heard: list[StreamEvent] = []

    response = model_of(api).complete(request(), ModelCall(on_stream=heard.append))

    assert api.message_requests[0].body["stream"] is True
    words = [event.text for event in heard[:7]]
    assert words == ["Here", " is", " **the**", " answer,", " in", " several", " words."]
    assert heard[7] == StreamEvent("text_end", ANSWER)
    assert heard[8:] == [
        StreamEvent("text", "Then"),
        StreamEvent("text", " this."),
        StreamEvent("text_end", "Then this."),
    ]
    assert response.content == [text(ANSWER), read, text("Then this.")]


def test_nobody_listening_and_a_short_answer_is_not_streamed(api: FakeMessagesAPI) -> None:
    """A plan run's requests (and its cassettes) stay what they were."""
    api.add(message(text("ok")))
    assert model_of(api).complete(request()).text == "ok"
    assert api.message_requests[0].body["stream"] is False


def test_a_stream_broken_off_is_taken_back_then_streamed_again(api: FakeMessagesAPI) -> None:
    api.add(
        error(529, "overloaded_error", "Overloaded", after_text="Half an"), message(text("Whole."))
    )
    heard: list[StreamEvent] = []
    retries: list[int] = []
    call = ModelCall(on_stream=heard.append, on_retry=lambda: retries.append(call.attempt))

    response = model_of(api).complete(request(), call)

    assert [event.kind for event in heard[:3]] == ["text"] * 3
    assert "".join(event.text for event in heard[:3]) == "Half an"
    assert heard[3] == StreamEvent("restart")
    assert heard[-1] == StreamEvent("text_end", "Whole.") and response.text == "Whole."
    assert retries == [2]


def test_an_abort_ends_a_slow_stream_at_its_next_event(api: FakeMessagesAPI) -> None:
    api.add(message(text(" ".join(["word"] * 40)), pace=0.2))
    heard: list[StreamEvent] = []

    def hear(event: StreamEvent) -> None:
        heard.append(event)
        call.abort()  # the user's interrupt, as the first word arrives

    call = ModelCall(on_stream=hear)
    started = time.monotonic()
    with pytest.raises(ModelError, match="cancelled"):
        model_of(api).complete(request(), call)
    assert time.monotonic() - started < 5  # the whole stream would take 8 s
    assert heard == [StreamEvent("text", "word")]  # nothing passed on after the abort


# --- the loop --------------------------------------------------------------------------


class EventLog(list[AgentEvent]):
    """The loop's events, with the threads they were told in; the first text can set
    INTERRUPT (the user pressing Esc as the answer starts to arrive)."""

    def __init__(self, interrupt: threading.Event | None = None) -> None:
        super().__init__()
        self.threads: set[str] = set()
        self.interrupt = interrupt
        self.interrupted_at: float | None = None

    def append(self, event: AgentEvent) -> None:
        self.threads.add(threading.current_thread().name)
        super().append(event)
        if self.interrupt is not None and event.kind == "text" and self.interrupted_at is None:
            self.interrupted_at = time.monotonic()
            threading.Timer(0.1, self.interrupt.set).start()


def streaming_loop(
    tmp_path: Path, model: AnthropicModel | ScriptedModel, events: EventLog
) -> tuple[AgentLoop, LocalSandbox]:
    mode = [PermissionMode.DEFAULT]
    loop, sandbox = make_loop(tmp_path, ScriptedModel([]), mode, Recording(), None, events)
    loop.config = dataclasses.replace(loop.config, model=model, stream_text=True)
    if events.interrupt is not None:
        loop.cancel = events.interrupt
    return loop, sandbox


def test_the_loop_tells_the_text_in_its_own_thread_before_the_tool_calls(
    api: FakeMessagesAPI, tmp_path: Path
) -> None:
    api.add(
        message(text("Let me look."), tool_use("Read", {"file_path": "notes.txt"}), pace=0.01),
        message(text("It says hello."), pace=0.01),
    )
    events = EventLog()
    loop, sandbox = streaming_loop(tmp_path, model_of(api), events)

    with sandbox:
        loop.run("what is in notes.txt?")

    kinds = [event.kind for event in events if event.kind != "waiting"]
    assert kinds == [
        "turn_started", "text", "text", "text", "text_end", "tool_call", "tool_result",
        "turn_started", "text", "text", "text", "text_end",
    ]  # fmt: skip
    ended = [event.detail for event in events if event.kind == "text_end"]
    assert ended == ["Let me look.", "It says hello."]
    assert events.threads == {threading.current_thread().name}


def test_an_interrupt_mid_stream_stops_at_once_and_keeps_what_was_read(
    api: FakeMessagesAPI, tmp_path: Path
) -> None:
    api.add(message(text("First words, then " + "more " * 50), pace=0.3))
    events = EventLog(interrupt=threading.Event())
    loop, _ = streaming_loop(tmp_path, model_of(api), events)
    with pytest.raises(Interrupted):
        loop.run("write a lot")
    assert events.interrupted_at is not None
    assert time.monotonic() - events.interrupted_at < 1.0
    last = events[-1]
    assert last.kind == "text_end" and last.detail.startswith("First")
    assert [m["role"] for m in loop.state.messages] == ["user"]  # the cut answer is not kept


def test_a_model_that_cannot_stream_has_its_text_told_whole(tmp_path: Path) -> None:
    events = EventLog()
    loop, _ = streaming_loop(tmp_path, ScriptedModel([reply(say("One."), say("Two."))]), events)
    loop.run("hi")
    told = [(event.kind, event.detail) for event in events if event.kind.startswith("text")]
    assert told == [("text", "One."), ("text_end", "One."), ("text", "Two."), ("text_end", "Two.")]


def test_a_quiet_turn_tells_nothing(api: FakeMessagesAPI, tmp_path: Path) -> None:
    """planrun's own summary (compaction) is not the model talking to the user."""
    api.add(message(text("Summary."), pace=0.01))
    events = EventLog()
    loop, _ = streaming_loop(tmp_path, model_of(api), events)
    loop.add_user("summarise")
    assert loop.turn(loop.request(), quiet=True).text == "Summary."
    assert not [event for event in events if event.kind.startswith("text")]
    assert api.message_requests[0].body["stream"] is False
