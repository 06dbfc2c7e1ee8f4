"""Value types shared across layers, so that no layer leaks docker or anthropic objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True)
class ModelResponse:
    """What the model answered: its content blocks (as JSON dicts), stop reason and usage."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str = ""

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
