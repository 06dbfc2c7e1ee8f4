"""A Model for unit tests that answers from a script and records what it was asked."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

from sandbox_runner.model.errors import ModelError
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse, Usage

Step = ModelResponse | Exception | Callable[[ModelRequest], ModelResponse]


def reply(
    *blocks: dict[str, Any],
    stop_reason: str | None = None,
    tokens: int = 100,
    stop_details: dict[str, Any] | None = None,
) -> ModelResponse:
    """A response; stop_reason defaults to tool_use when there are tool calls."""
    has_tools = any(block.get("type") == "tool_use" for block in blocks)
    return ModelResponse(
        content=list(blocks),
        stop_reason=stop_reason or ("tool_use" if has_tools else "end_turn"),
        usage=Usage(input_tokens=tokens, output_tokens=tokens // 4),
        model="scripted",
        stop_details=stop_details,
    )


def say(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def use(name: str, tool_input: Any) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_{uuid.uuid4().hex[:12]}",
        "name": name,
        "input": tool_input,
    }


class ScriptedModel:
    """Plays its steps in order; each may be a response, an exception, or a function."""

    def __init__(self, steps: list[Step], *, tokens: int = 1000) -> None:
        self.steps = list(steps)
        self.requests: list[ModelRequest] = []
        self.tokens = tokens

    def complete(self, request: ModelRequest, call: ModelCall | None = None) -> ModelResponse:
        self.requests.append(copy.deepcopy(request))
        if not self.steps:
            raise ModelError("the script has no more responses")
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(request)
        return step

    def count_tokens(self, request: ModelRequest) -> int:
        return self.tokens
