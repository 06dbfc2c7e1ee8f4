"""The model layer: the real anthropic SDK against the fake Messages API, and cassettes."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.errors import ConfigError
from sandbox_runner.model import (
    CassetteError,
    ContextBudgetError,
    ModelAPIError,
    ModelError,
    RecordingModel,
    ReplayModel,
    create_model,
    estimate_tokens,
)
from sandbox_runner.model.anthropic_model import AnthropicModel
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse, ToolResult, ToolSpec
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    drop,
    error,
    hang,
    message,
    nested_tool_use,
    raw,
    stream_events,
    text,
    thinking,
    tool_use,
    usage,
)
from tests.support.scripted_model import ScriptedModel, reply, use

TOOLS = [
    ToolSpec("Read", "Read a file", {"type": "object", "properties": {"file_path": {}}}),
    ToolSpec("Grep", "Search files", {"type": "object", "properties": {"pattern": {}}}),
]
OVERLOADED = error(529, "overloaded_error", "Overloaded")


def make_request(
    messages: list[dict[str, Any]] | None = None, *, max_tokens: int = 1024
) -> ModelRequest:
    return ModelRequest(
        model="claude-test",
        system="You are a planner.",
        messages=messages or [{"role": "user", "content": "Plan the change."}],
        tools=TOOLS,
        max_tokens=max_tokens,
    )


def follow_up(request: ModelRequest, response: ModelResponse, result: str) -> ModelRequest:
    """The next turn of the conversation: the response, then a result for each tool call."""
    results = [ToolResult(call.id, result).to_block() for call in response.tool_calls]
    messages = [
        *request.messages,
        {"role": "assistant", "content": response.content},
        {"role": "user", "content": results},
    ]
    return make_request(messages, max_tokens=request.max_tokens)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def model(api: FakeMessagesAPI, waits: list[float]) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", api_key="test-key", base_url=api.base_url, sleep=waits.append
    )


# --- AnthropicModel against the fake API ---------------------------------------------------


@pytest.mark.parametrize("max_tokens", [1024, 32000], ids=["non-streaming", "streaming"])
def test_round_trip_returns_text_tool_use_thinking_and_usage(
    api: FakeMessagesAPI, model: AnthropicModel, max_tokens: int
) -> None:
    read = tool_use("Read", {"file_path": "src/app.py", "offset": 10}, id="toolu_1")
    api.add(message(thinking("Look first."), text("Reading."), read, usage=usage(11, 22, 33, 44)))

    response = model.complete(make_request(max_tokens=max_tokens))

    assert api.message_requests[0].body.get("stream", False) is (max_tokens > 16000)
    assert response.content == [
        {"type": "thinking", "thinking": "Look first.", "signature": "fake-signature"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": read["input"]},
    ]
    assert response.stop_reason == "tool_use"
    assert response.model == "claude-test"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 22)
    assert response.usage.cache_creation_input_tokens == 33
    assert response.usage.cache_read_input_tokens == 44
    assert [call.name for call in response.tool_calls] == ["Read"]


def test_streamed_tool_input_arrives_in_several_chunks() -> None:
    reply = message(tool_use("Grep", {"pattern": "def main", "path": "src"}))
    deltas = [
        data["delta"]
        for name, data in stream_events(reply, "msg_1", "claude-test")
        if name == "content_block_delta"
    ]
    assert len(deltas) > 1
    assert all(delta["type"] == "input_json_delta" for delta in deltas)


def test_cache_breakpoints_on_system_last_tool_and_last_user_block(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(message(tool_use("Read", {"file_path": "a.py"}, id="t1")), message(text("Done.")))
    first = make_request()
    second = follow_up(first, model.complete(first), "print('a')")
    caller_messages = copy.deepcopy(second.messages)

    model.complete(second)

    body = api.message_requests[1].body
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "You are a planner.", "cache_control": ephemeral}
    ]
    assert [tool.get("cache_control") for tool in body["tools"]] == [None, ephemeral]
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    assert body["messages"][0] == {"role": "user", "content": "Plan the change."}
    assert second.messages == caller_messages
    # A conversation that starts with a plain string gets its breakpoint on a text block.
    assert api.message_requests[0].body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Plan the change.", "cache_control": ephemeral}],
        }
    ]


def test_429_is_retried_after_the_retry_after_header(
    api: FakeMessagesAPI, model: AnthropicModel, waits: list[float]
) -> None:
    api.add(error(429, "rate_limit_error", "Slow down", retry_after=7), message(text("ok")))
    assert model.complete(make_request()).text == "ok"
    assert waits == [7.0]


def test_retry_after_is_capped_at_a_minute(
    api: FakeMessagesAPI, model: AnthropicModel, waits: list[float]
) -> None:
    api.add(error(429, "rate_limit_error", "Slow down", retry_after=3600), message(text("ok")))
    model.complete(make_request())
    assert waits == [60.0]


def test_529_and_500_are_retried_with_growing_backoff(
    api: FakeMessagesAPI, model: AnthropicModel, waits: list[float]
) -> None:
    api.add(OVERLOADED, error(500, "api_error", "Internal error"), message(text("ok")))
    assert model.complete(make_request()).text == "ok"
    assert len(api.message_requests) == 3
    # Overloads back off from 5 s, doubling (with jitter), to ride out a typical storm.
    assert 3.75 <= waits[0] <= 5.0 and 7.5 <= waits[1] <= 10.0


def test_the_overload_schedule_rides_out_about_three_minutes() -> None:
    from sandbox_runner.limits import API_RETRIES
    from sandbox_runner.model.retry_policy import overload_schedule

    schedule = overload_schedule(API_RETRIES)
    assert schedule == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0]
    assert 180 <= sum(schedule) <= 200


def test_a_hung_api_is_given_up_at_the_call_deadline(api: FakeMessagesAPI) -> None:
    """Each attempt waited 600 s whatever the subagent's time limit."""
    api.add(hang())
    model = AnthropicModel("m", api_key="k", base_url=api.base_url, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ModelError):
        model.complete(make_request(), ModelCall(deadline=time.monotonic() + 1.5))
    assert time.monotonic() - started < 5


def test_retries_are_reported_to_the_caller_and_stop_when_it_aborts(
    api: FakeMessagesAPI,
) -> None:
    api.add(OVERLOADED, OVERLOADED, message(text("never")))
    retries: list[tuple[int, int, str]] = []
    call = ModelCall(on_retry=lambda: retries.append((call.attempt, call.attempts, call.problem)))
    model = AnthropicModel("m", api_key="k", base_url=api.base_url, max_retries=4)
    threading.Timer(1.0, call.abort).start()
    started = time.monotonic()
    with pytest.raises(ModelError, match="cancelled"):
        model.complete(make_request(), call)
    assert time.monotonic() - started < 4
    assert retries == [(2, 5, "529 overloaded_error: Overloaded")]


def test_an_overload_inside_a_stream_is_retried(
    api: FakeMessagesAPI, model: AnthropicModel, waits: list[float]
) -> None:
    api.add(error(529, "overloaded_error", "Overloaded", mid_stream=True), message(text("ok")))
    assert model.complete(make_request(max_tokens=32000)).text == "ok"
    assert len(waits) == 1


def test_exhausted_retries_give_a_one_line_error(api: FakeMessagesAPI, waits: list[float]) -> None:
    api.add(OVERLOADED, OVERLOADED, OVERLOADED)
    model = AnthropicModel(
        "claude-test", api_key="k", base_url=api.base_url, max_retries=2, sleep=waits.append
    )
    with pytest.raises(ModelError) as caught:
        model.complete(make_request())
    assert str(caught.value) == (
        "the Anthropic API failed (529 overloaded_error: Overloaded), gave up after 3 attempts"
    )
    assert (caught.value.status, caught.value.attempts) == (529, 3)
    assert len(waits) == 2


def test_a_rejected_api_key_fails_at_once(waits: list[float]) -> None:
    with FakeMessagesAPI([message(text("never"))], api_key="the-right-key") as api:
        model = AnthropicModel("m", api_key="wrong", base_url=api.base_url, sleep=waits.append)
        with pytest.raises(ModelError, match="the API key was rejected") as caught:
            model.complete(make_request())
    assert caught.value.status == 401
    assert len(api.requests) == 1 and waits == []


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (403, "permission_error"), (404, "not_found_error")],
)
def test_client_errors_fail_at_once(
    api: FakeMessagesAPI, model: AnthropicModel, waits: list[float], status: int, kind: str
) -> None:
    api.add(error(status, kind, "model: claude-nope"), message(text("never")))
    with pytest.raises(ModelError, match=f"{status} {kind}: model: claude-nope"):
        model.complete(make_request())
    assert len(api.requests) == 1 and waits == []


def test_a_prompt_too_long_is_a_context_budget_error(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(
        error(400, "invalid_request_error", "prompt is too long: 250123 tokens > 200000 maximum")
    )
    with pytest.raises(ContextBudgetError, match="250123 input tokens > 200000") as caught:
        model.complete(make_request())
    assert (caught.value.input_tokens, caught.value.limit) == (250123, 200000)


def test_a_refused_connection_is_retried_then_reported(waits: list[float]) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}"
    model = AnthropicModel("m", api_key="k", base_url=base_url, max_retries=2, sleep=waits.append)
    with pytest.raises(ModelError, match=f"cannot reach the Anthropic API at {base_url}") as caught:
        model.complete(make_request())
    assert "gave up after 3 attempts" in str(caught.value)
    assert len(waits) == 2


def test_a_dropped_connection_is_retried(
    api: FakeMessagesAPI, model: AnthropicModel, waits: list[float]
) -> None:
    api.add(drop(), message(text("ok")))
    assert model.complete(make_request()).text == "ok"
    assert len(waits) == 1


@pytest.mark.parametrize("max_tokens", [1024, 32000], ids=["non-streaming", "streaming"])
def test_malformed_tool_input_is_passed_through(
    api: FakeMessagesAPI, model: AnthropicModel, max_tokens: int
) -> None:
    api.add(message(tool_use("Read", [1, 2], id="t1"), tool_use("NoSuchTool", {"x": 1}, id="t2")))
    response = model.complete(make_request(max_tokens=max_tokens))
    assert [(block["name"], block["input"]) for block in response.content] == [
        ("Read", [1, 2]),
        ("NoSuchTool", {"x": 1}),
    ]


def test_a_string_tool_input_is_passed_through(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(message(tool_use("Read", "README.md", id="t1")))
    assert model.complete(make_request()).content[0]["input"] == "README.md"


def test_streamed_tool_input_the_sdk_cannot_parse_is_retried_then_reported(
    api: FakeMessagesAPI, waits: list[float]
) -> None:
    api.add(message(tool_use("Read", "a string, not an object")), message(tool_use("Read", "x")))
    model = AnthropicModel(
        "m", api_key="k", base_url=api.base_url, max_retries=1, sleep=waits.append
    )
    with pytest.raises(ModelError, match="tool input that is not valid JSON"):
        model.complete(make_request(max_tokens=32000))
    assert len(waits) == 1


def test_an_answer_nested_too_deeply_to_parse_is_retried_then_reported(
    api: FakeMessagesAPI, waits: list[float]
) -> None:
    api.add(nested_tool_use("Read", 100_000), message(text("flat")))
    model = AnthropicModel("m", api_key="k", base_url=api.base_url, sleep=waits.append)
    assert model.complete(make_request()).text == "flat"
    api.add(nested_tool_use("Read", 100_000), nested_tool_use("Read", 100_000))
    model = AnthropicModel(
        "m", api_key="k", base_url=api.base_url, max_retries=1, sleep=waits.append
    )
    with pytest.raises(ModelError, match="the model kept answering with JSON nested too deeply"):
        model.complete(make_request())
    assert len(waits) == 2


def test_a_plain_json_answer_to_a_streaming_request_is_read(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    # A proxy or compatible endpoint may ignore "stream": true and answer with the Message.
    read = tool_use("Read", {"file_path": "a.py"}, id="toolu_1")
    answer = message(text("Reading."), read, usage=usage(7, 3)).to_json("msg_1", "claude-x")
    api.add(raw(answer))
    response = model.complete(make_request(max_tokens=32000))
    assert api.message_requests[0].body["stream"] is True
    assert response.content == [{"type": "text", "text": "Reading."}, read]
    assert (response.stop_reason, response.model) == ("tool_use", "claude-x")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 3)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("<html>502 Bad Gateway</html>", "the API's answer is not valid JSON"),
        ([1, 2], "the API's answer is not a Messages API response (TypeError"),
    ],
)
def test_a_streaming_request_answered_with_something_else_says_what(
    api: FakeMessagesAPI, model: AnthropicModel, body: Any, said: str
) -> None:
    api.add(raw(body, content_type="text/html"))
    with pytest.raises(ModelAPIError) as caught:
        model.complete(make_request(max_tokens=32000))
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)


def test_a_stream_with_no_message_is_retried_then_reported(
    api: FakeMessagesAPI, waits: list[float]
) -> None:
    empty = raw(b'event: ping\ndata: {"type": "ping"}\n\n', content_type="text/event-stream")
    api.add(empty, empty)
    model = AnthropicModel(
        "m", api_key="k", base_url=api.base_url, max_retries=1, sleep=waits.append
    )
    with pytest.raises(ModelAPIError) as caught:
        model.complete(make_request(max_tokens=32000))
    assert str(caught.value).startswith("the API's streams kept ending before any message")
    assert "gave up after 2 attempts" in str(caught.value) and len(waits) == 1


@pytest.mark.parametrize("max_tokens", [1024, 32000], ids=["non-streaming", "streaming"])
def test_a_refusal_keeps_its_category_and_explanation(
    api: FakeMessagesAPI, model: AnthropicModel, max_tokens: int
) -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Malware."}
    api.add(message(text("I can"), stop_reason="refusal", stop_details=details))
    response = model.complete(make_request(max_tokens=max_tokens))
    assert (response.stop_reason, response.text) == ("refusal", "I can")
    assert response.stop_details == details


def test_count_tokens_asks_the_endpoint() -> None:
    with FakeMessagesAPI(count_tokens=1234) as api:
        model = AnthropicModel("claude-test", api_key="k", base_url=api.base_url)
        assert model.count_tokens(make_request()) == 1234
    body = api.requests[0].body
    assert api.requests[0].path == "/v1/messages/count_tokens"
    assert body["system"] == "You are a planner."
    assert [tool["name"] for tool in body["tools"]] == ["Read", "Grep"]


def test_count_tokens_estimates_when_the_endpoint_is_missing() -> None:
    request = make_request()
    with FakeMessagesAPI(count_tokens=None) as api:
        model = AnthropicModel("claude-test", api_key="k", base_url=api.base_url)
        assert model.count_tokens(request) == estimate_tokens(request)
        assert model.count_tokens(request) == estimate_tokens(request)
    # An endpoint that answered 404 once is not asked again.
    assert len(api.requests) == 1


def test_count_tokens_estimates_when_the_api_is_unreachable() -> None:
    model = AnthropicModel("m", api_key="k", base_url=f"http://127.0.0.1:{closed_port()}")
    request = make_request()
    assert model.count_tokens(request) == estimate_tokens(request) > 0


def test_estimate_is_json_characters_over_three_and_a_half() -> None:
    request = ModelRequest(model="m", system="abcdefg", messages=[], tools=[])
    # '"abcdefg"' + '[]' + '[]' is 13 characters.
    assert estimate_tokens(request) == 4


def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key, token or profile in the environment, and an empty home for the SDK to search."""
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_a_missing_api_key_is_a_clear_error_on_first_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, api: FakeMessagesAPI
) -> None:
    no_credentials(monkeypatch, tmp_path)
    model = AnthropicModel("claude-test", base_url=api.base_url)
    with pytest.raises(ModelError, match=r"^ANTHROPIC_API_KEY is not set; "):
        model.complete(make_request())
    assert api.requests == []


def test_unloadable_sdk_credentials_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("ANTHROPIC_PROFILE", "missing")
    model = AnthropicModel("claude-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ModelError, match=r"^the Anthropic credentials cannot be loaded: .*missing"):
        model.complete(make_request())


def test_the_key_and_url_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_credentials(monkeypatch, tmp_path)
    with FakeMessagesAPI([message(text("hi"))], api_key="env-key") as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        assert create_model("claude-test").complete(make_request()).text == "hi"


# --- cassettes -----------------------------------------------------------------------------


def write_cassette(path: Path, *responses: dict[str, Any]) -> Path:
    lines = [{"cassette": 1, "model": "claude-test", "recorded_at": "2025-01-01T00:00:00+00:00"}]
    lines += [{"request": {}, "response": response} for response in responses]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def recorded(*content: dict[str, Any], stop_reason: str = "end_turn") -> dict[str, Any]:
    counts = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 80}
    return {"content": list(content), "stop_reason": stop_reason, "usage": counts, "model": "m"}


def test_replay_plays_the_responses_in_order(tmp_path: Path) -> None:
    cassette = write_cassette(
        tmp_path / "run.jsonl",
        recorded(tool_use("Read", {"file_path": "a"}, id="t1"), stop_reason="tool_use"),
        recorded(text("The plan.")),
    )
    model = ReplayModel(cassette)
    first = make_request()
    response = model.complete(first)
    assert response.tool_calls[0].id == "t1"
    assert response.usage.cache_read_input_tokens == 80
    assert model.complete(follow_up(first, response, "contents")).text == "The plan."
    assert (model.played, model.remaining) == (2, 0)
    assert model.count_tokens(first) == estimate_tokens(first)


def test_replay_reports_a_conversation_that_runs_past_the_cassette(tmp_path: Path) -> None:
    model = ReplayModel(write_cassette(tmp_path / "short.jsonl", recorded(text("only"))))
    model.complete(make_request())
    with pytest.raises(CassetteError, match=r"short\.jsonl has no more responses \(1 played\)"):
        model.complete(make_request())


def test_replay_detects_tool_results_that_answer_other_calls(tmp_path: Path) -> None:
    cassette = write_cassette(
        tmp_path / "run.jsonl",
        recorded(tool_use("Read", {"file_path": "a"}, id="t1"), stop_reason="tool_use"),
        recorded(text("The plan.")),
    )
    model = ReplayModel(cassette)
    model.complete(make_request())
    diverged = make_request(
        [{"role": "user", "content": [ToolResult("t9", "contents").to_block()]}]
    )
    with pytest.raises(CassetteError, match=r"run\.jsonl exchange 2: .*\['t9'\].*\['t1'\]"):
        model.complete(diverged)


def test_replay_reads_a_cassette_directory_by_key(tmp_path: Path) -> None:
    write_cassette(tmp_path / "simplicity.jsonl", recorded(text("simple plan")))
    write_cassette(tmp_path / "default.jsonl", recorded(text("default plan")))
    assert ReplayModel(tmp_path, key="simplicity").complete(make_request()).text == "simple plan"
    assert ReplayModel(tmp_path, key="performance").complete(make_request()).text == "default plan"


@pytest.mark.parametrize(
    ("lines", "where"),
    [
        (['{"cassette": 1}', '{"response": {"content": []', "{}"], "line 2: not valid JSON"),
        (['{"version": 1}'], "line 1: the header"),
        (['{"cassette": 1}', '{"response": {"stop_reason": "end_turn"}}'], "line 2: response"),
        ([], "is empty"),
    ],
)
def test_a_malformed_cassette_names_the_file_and_line(
    tmp_path: Path, lines: list[str], where: str
) -> None:
    cassette = tmp_path / "bad.jsonl"
    cassette.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(CassetteError, match=f"bad.jsonl {where}"):
        ReplayModel(cassette)


def test_a_missing_cassette_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"nowhere\.jsonl does not exist"):
        ReplayModel(tmp_path / "nowhere.jsonl")


def test_a_recording_plays_back_identically(api: FakeMessagesAPI, tmp_path: Path) -> None:
    api.add(
        message(text("Reading."), tool_use("Read", {"file_path": "a"}), usage=usage(5, 6, 7, 8)),
        message(text("The plan."), usage=usage(9, 10, 0, 12)),
    )
    cassette = tmp_path / "cassettes" / "simplicity.jsonl"
    recorder = create_model(
        "claude-test",
        record=tmp_path / "cassettes",
        key="simplicity",
        api_key="k",
        base_url=api.base_url,
    )
    first = make_request()
    live = [recorder.complete(first)]
    assert len(cassette.read_text().splitlines()) == 2  # header and the first exchange
    second = follow_up(first, live[0], "contents")
    live.append(recorder.complete(second))

    replay = create_model("ignored", replay=tmp_path / "cassettes", key="simplicity")
    assert [replay.complete(first), replay.complete(second)] == live

    header, *exchanges = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert header["cassette"] == 1 and header["model"] == "claude-test"
    summary = exchanges[1]["request"]
    assert summary["system"] == hashlib.sha256(b"You are a planner.").hexdigest()
    assert summary["tools"] == ["Read", "Grep"]
    assert summary["messages_count"] == 3
    assert summary["last_message"] == second.messages[-1]


def test_a_refusal_is_recorded_and_replayed_with_its_details(
    api: FakeMessagesAPI, tmp_path: Path
) -> None:
    details = {"type": "refusal", "category": "bio", "explanation": "Lab methods."}
    api.add(message(stop_reason="refusal", stop_details=details))
    recorder = create_model(
        "claude-test", record=tmp_path / "run.jsonl", api_key="k", base_url=api.base_url
    )
    recorder.complete(make_request())
    replayed = ReplayModel(tmp_path / "run.jsonl").complete(make_request())
    assert (replayed.stop_reason, replayed.stop_details) == ("refusal", details)


def test_a_deep_tool_input_is_recorded_and_replayed_as_removed(tmp_path: Path) -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    cassette = tmp_path / "deep.jsonl"
    recorder = RecordingModel(ScriptedModel([reply(use("Read", {"file_path": deep}))]), cassette)
    removed = {"planrun_removed": "the tool input is nested more than 64 levels deep"}
    assert recorder.complete(make_request()).content[0]["input"] == removed
    assert ReplayModel(cassette).complete(make_request()).content[0]["input"] == removed


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ('{"type": "x", "y": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested too deeply"),
        ('{"type": "x", "y": ' + "[" * 300 + "]" * 300 + "}", "nested more than 66 levels"),
    ],
)
def test_a_cassette_nested_too_deeply_is_a_cassette_error(
    tmp_path: Path, block: str, problem: str
) -> None:
    cassette = tmp_path / "deep.jsonl"
    response = f'{{"content": [{block}], "stop_reason": "end_turn", "usage": {{}}}}'
    cassette.write_text('{"cassette": 1}\n{"response": ' + response + "}\n")
    with pytest.raises(CassetteError, match=f"deep.jsonl line 2: .*{problem}"):
        ReplayModel(cassette)


def test_replay_and_record_together_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        create_model("m", replay=tmp_path / "a.jsonl", record=tmp_path / "b.jsonl")
    assert isinstance(create_model("m", api_key="k", record=tmp_path / "c.jsonl"), RecordingModel)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("<html>502 Bad Gateway</html>", "the API's answer is not valid JSON (Expecting value"),
        ({"foo": 1}, "the API's answer is not a Messages API response (TypeError"),
        ({"content": "text"}, "the API's answer is not a Messages API response (AttributeError"),
    ],
)
def test_an_answer_that_is_not_a_message_says_what_was_wrong(
    api: FakeMessagesAPI, model: AnthropicModel, body: Any, said: str
) -> None:
    api.add(raw(body))
    with pytest.raises(ModelAPIError) as caught:
        model.complete(make_request())
    assert str(caught.value).startswith(said)
    assert "ANTHROPIC_BASE_URL" in str(caught.value) and "\n" not in str(caught.value)


def test_a_binary_cassette_is_reported_as_such(tmp_path: Path) -> None:
    cassette = tmp_path / "security.jsonl"
    cassette.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    with pytest.raises(CassetteError, match=r"security\.jsonl is not UTF-8 text \(byte \d+\)"):
        ReplayModel(cassette)


def test_recording_never_replaces_an_earlier_cassette(api: FakeMessagesAPI, tmp_path: Path) -> None:
    api.add(message(text("The plan.")))
    (tmp_path / "simplicity.jsonl").write_text("earlier recording\n")
    recorder = create_model(
        "claude-test", record=tmp_path, key="simplicity", api_key="k", base_url=api.base_url
    )
    with pytest.raises(CassetteError, match="never overwrites"):
        recorder.complete(make_request())
    assert (tmp_path / "simplicity.jsonl").read_text() == "earlier recording\n"
