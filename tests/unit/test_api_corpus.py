"""Real Messages API answers recorded by other projects' test suites (tests/corpus/api,
SOURCES.md), served by the fake Messages API to the real SDK through AnthropicModel: what
planrun reads from each, down to the tool inputs, the usage and the refusal line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sandbox_runner.model.anthropic_model import AnthropicModel
from sandbox_runner.model.errors import ModelRefusal
from sandbox_runner.types import ModelRequest, ModelResponse
from tests.support.api_corpus import CORPUS, answer, corpus_files, streamed
from tests.support.fake_messages_api import FakeMessagesAPI

LLM_REFUSAL = (
    "the API stopped the model's answer as a refusal (category reasoning_extraction): This "
    "request was blocked as it seems to violate Anthropic's Terms of Service restrictions on "
    "reverse engineering or duplicating model outputs. To learn more, visit "
    "https://www.anthropic.com/legal/commercial-terms. API integrators: you can reduce "
    "refusals for your users by configuring a fallback model — see "
    "https://platform.claude.com/docs/en/build-with-claude/refusals-and-fallback"
)
WEATHER = [
    {"location": "San Francisco", "temperature": -5, "condition": "snowy"},
    {"location": "London", "temperature": 0, "condition": "snowy"},
    {"location": "Paris", "temperature": 23, "condition": "cloudy"},
    {"location": "Berlin", "temperature": -9, "condition": "snowy"},
]


@dataclass(frozen=True)
class Read:
    """What planrun should make of one recorded answer."""

    blocks: list[str]
    stop_reason: str
    usage: tuple[int, int]
    """Input and output tokens."""
    model: str
    text: str = ""
    """The start of the answer's text."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refusal: str | None = None
    """The line a user is shown for a refusal."""


EXPECTED = {
    "llm-anthropic-refusal.sse": Read(
        [], "refusal", (97, 0), "claude-fable-5-1", refusal=LLM_REFUSAL
    ),
    "llm-anthropic-text.sse": Read(
        ["text"], "end_turn", (10, 4), "claude-haiku-4-5-20251001", text="Hello"
    ),
    "llm-anthropic-thinking.sse": Read(
        ["thinking", "text"],
        "end_turn",
        (46, 133),
        "claude-haiku-4-5-20251001",
        text="1. **Pouch** - references their iconic bill pouch\n2. **Pelé**",
    ),
    "llm-anthropic-tool-calls.sse": Read(
        ["tool_use"],
        "tool_use",
        (543, 40),
        "claude-haiku-4-5-20251001",
        calls=[("pelican_name_generator", {})],
    ),
    "llm-anthropic-tools-then-text.sse": Read(
        ["text"],
        "end_turn",
        (678, 82),
        "claude-haiku-4-5-20251001",
        text="Here are two great names for your pet pelican:\n\n1. **Charles**",
    ),
    "llm-anthropic-web-search.sse": Read(
        ["server_tool_use", "web_search_tool_result", *["text"] * 10],
        "end_turn",
        (10423, 341),
        "claude-opus-4-1-20250805",
        text="Based on the search results, here's the current weather in San Francisco:",
    ),
    "vercel-anthropic-clear-thinking.1.chunks.txt": Read(
        ["thinking", "text"], "end_turn", (69, 53), "claude-sonnet-4-5-20250929", "925 ÷ 5 = 185"
    ),
    "vercel-anthropic-clear-thinking.1.json": Read(
        ["thinking", "text"], "end_turn", (69, 33), "claude-sonnet-4-5-20250929", "925 ÷ 5 = 185"
    ),
    "vercel-anthropic-json-tool.1.json": Read(
        ["tool_use"],
        "tool_use",
        (1151, 87),
        "claude-haiku-4-5-20251001",
        calls=[("json", {"elements": WEATHER})],
    ),
    "vercel-anthropic-refusal-no-details.json": Read(
        [],
        "refusal",
        (18, 5),
        "claude-fable-5",
        refusal="the API stopped the model's answer as a refusal",
    ),
    "vercel-anthropic-refusal.json": Read(
        [],
        "refusal",
        (18, 5),
        "claude-fable-5",
        refusal="the API stopped the model's answer as a refusal (category cyber): This request "
        "triggered restrictions on violative cyber content and was blocked under Anthropic's "
        "Usage Policy.",
    ),
    "vercel-anthropic-text.chunks.txt": Read(
        ["text"],
        "end_turn",
        (12, 30),
        "claude-sonnet-4-5-20250929",
        text="Hello! I'm doing well, thank you for asking. How are you doing today? Is there "
        "anything I can help you with?",
    ),
    "vercel-anthropic-text.json": Read(
        ["text"],
        "end_turn",
        (12, 29),
        "claude-sonnet-4-5-20250929",
        text="Hello! I'm doing well, thanks for asking.",
    ),
    "vercel-anthropic-tool-no-args.chunks.txt": Read(
        ["text", "tool_use"],
        "tool_use",
        (565, 48),
        "claude-sonnet-4-5-20250929",
        text="I'll update the issue list for you.",
        calls=[("updateIssueList", {})],
    ),
    "vercel-anthropic-tool-no-args.json": Read(
        ["text", "tool_use"],
        "tool_use",
        (602, 93),
        "claude-3-opus-20240229",
        text="<thinking>\nThe updateIssueList tool was provided",
        calls=[("updateIssueList", {})],
    ),
    "vercel-anthropic-web-fetch-tool.2.json": Read(
        ["text", "server_tool_use", "web_fetch_tool_result", "text"],
        "end_turn",
        (28638, 365),
        "claude-sonnet-4-20250514",
        text="I'll fetch the PDF from the URL you provided to see what it says about AI.",
    ),
}


def read(name: str) -> ModelResponse:
    """What AnthropicModel makes of the recorded answer NAME, served to the real SDK."""
    with FakeMessagesAPI([answer(name)]) as api:
        model = AnthropicModel("claude-test", api_key="test-key", base_url=api.base_url)
        request = ModelRequest(
            model="claude-test",
            system="You are a planner.",
            messages=[{"role": "user", "content": "Plan the change."}],
            tools=[],
            # Above 16,000 planrun streams: the events go to a streaming request.
            max_tokens=32000 if streamed(name) else 1024,
        )
        response = model.complete(request)
        assert api.message_requests[0].body.get("stream", False) is streamed(name)
    return response


def test_every_recorded_answer_has_its_source_and_its_expectation() -> None:
    sources = (CORPUS / "SOURCES.md").read_text()
    assert sorted(EXPECTED) == corpus_files()
    assert [name for name in corpus_files() if f"`{name}`" not in sources] == []
    assert 12 <= len(corpus_files()) <= 20


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_what_planrun_reads_from_a_recorded_answer(name: str) -> None:
    expected = EXPECTED[name]
    response = read(name)
    assert [block["type"] for block in response.content] == expected.blocks
    assert response.stop_reason == expected.stop_reason
    assert (response.usage.input_tokens, response.usage.output_tokens) == expected.usage
    assert response.model == expected.model
    assert response.text.startswith(expected.text)
    assert [(call.name, call.input) for call in response.tool_calls] == expected.calls
    for block in response.content:
        # Every block can go back to the API in the next request as it is.
        assert isinstance(block, dict) and block["type"]
        if block["type"] == "thinking":
            assert block["thinking"] and block["signature"]
    if expected.refusal is not None:
        assert str(ModelRefusal.of(response.stop_details)) == expected.refusal
    else:
        assert response.stop_details is None
