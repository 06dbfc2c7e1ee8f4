"""Value types shared across layers, so that no layer leaks docker or anthropic objects."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class ToolRequest:
    """One operation for the in-container tool server (read, grep, bash, ...)."""

    op: str
    args: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None


@dataclass(frozen=True)
class ExecResult:
    """What the tool server answered: text for the model, or an error, plus details."""

    ok: bool
    output: str
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text a model should see: the output, or the error message."""
        return self.output if self.ok else (self.error or "tool error")


@dataclass(frozen=True)
class ToolCall:
    """A tool_use block from the model: the call id, tool name and its input."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """The answer to a ToolCall, sent back to the model as a tool_result block."""

    call_id: str
    content: str
    is_error: bool = False

    def to_block(self) -> dict[str, Any]:
        """The Messages API tool_result content block."""
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.call_id,
            "content": self.content,
        }
        if self.is_error:
            block["is_error"] = True
        return block


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def to_param(self) -> dict[str, Any]:
        """The Messages API tool definition."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass
class Usage:
    """Tokens used by one or more model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Accumulate another call's usage into this one."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens

    @property
    def total(self) -> int:
        """All tokens, cached ones included."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )


@dataclass(frozen=True)
class ModelRequest:
    """One call to the model. Messages are Messages API dicts (plain JSON, no SDK objects)."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec]
    max_tokens: int = 8192
    tool_choice: str | None = None
    """The Messages API tool_choice type ("none" for a final turn without tools), or None."""
    server_tools: tuple[dict[str, Any], ...] = ()
    """Tools the API itself runs (its web search), as their Messages API definitions."""


@dataclass(frozen=True)
class ModelResponse:
    """What the model answered: its content blocks (as JSON dicts), stop reason and usage."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str = ""
    stop_details: dict[str, Any] | None = None
    """What the API says about the stop, when it says anything: for a refusal, its
    `category` and `explanation`."""

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool_use blocks, in order."""
        return [
            ToolCall(id=b["id"], name=b["name"], input=b.get("input") or {})
            for b in self.content
            if b.get("type") == "tool_use"
        ]


@dataclass(frozen=True)
class StreamEvent:
    """A piece of an answer as it streams in.

    Kinds: `text` (TEXT arrived in the current text block), `text_end` (the block is
    complete; TEXT is all of it) and `restart` (the attempt failed and is retried: the
    text streamed so far is void, the next attempt streams the answer again).
    """

    kind: Literal["text", "text_end", "restart"]
    text: str = ""


class ModelCall:
    """One model call as its caller steers it: a deadline, an abort switch, the attempts made,
    and who hears the answer as it streams.

    The model reports its attempts and retries here, waits between attempts with wait()
    (which an abort cuts short) and never lets an attempt run past the deadline.
    """

    def __init__(
        self,
        *,
        deadline: float | None = None,
        on_retry: Callable[[], None] | None = None,
        on_stream: Callable[[StreamEvent], None] | None = None,
    ) -> None:
        self.deadline = deadline
        """time.monotonic() by which the call must be over, or None."""
        self.on_stream = on_stream
        """Hears the answer's text as it arrives; a model that can stream does so when
        this is set (one that cannot just answers)."""
        self.streamed = False
        """Whether text was streamed in the current attempt."""
        self.attempt = 1
        self.attempts = 1
        self.problem = ""
        """Why the previous attempt failed ("" on the first attempt)."""
        self.retry_wait = 0.0
        """Seconds waited before the current attempt."""
        self._on_retry = on_retry or (lambda: None)
        self._aborted = threading.Event()

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None without one)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def abort(self) -> None:
        """Stop the call: no further attempt is made, and a wait between attempts ends."""
        self._aborted.set()

    @property
    def aborted(self) -> bool:
        """Whether abort() was called."""
        return self._aborted.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep between attempts; True when the call was aborted meanwhile."""
        return self._aborted.wait(seconds)

    def retrying(self, attempt: int, attempts: int, problem: str, wait: float) -> None:
        """Record that attempt number `attempt` of `attempts` follows after `wait` seconds
        (what the failed attempt streamed is taken back)."""
        self.attempt, self.attempts, self.problem, self.retry_wait = (
            attempt,
            attempts,
            problem,
            wait,
        )
        self.stream(StreamEvent("restart"))
        self._on_retry()

    def stream(self, event: StreamEvent) -> None:
        """Pass a piece of the streaming answer on (nothing once the call is aborted)."""
        if self.on_stream is None or self.aborted:
            return
        if event.kind == "restart":
            if not self.streamed:
                return  # nothing to take back
            self.streamed = False
        else:
            self.streamed = True
        self.on_stream(event)
