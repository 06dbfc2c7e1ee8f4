"""The Messages API parameters of a request, with prompt-cache breakpoints on the prefix
that grows from one turn to the next."""

from __future__ import annotations

from typing import Any

from sandbox_runner.types import ModelRequest

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}


def build_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The Messages API parameters, with cache breakpoints on the prefix that grows.

    The system prompt, the tools and the conversation so far are the same from one turn
    to the next, so marking the end of each lets the API reuse them from its cache.
    """
    tools = [tool.to_param() for tool in request.tools]
    if tools:
        tools[-1] = tools[-1] | {"cache_control": CACHE_CONTROL}
    tools += [dict(tool) for tool in request.server_tools]
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "system": [{"type": "text", "text": request.system, "cache_control": CACHE_CONTROL}],
        "messages": _mark_last_user_message(request.messages),
    }
    if tools:
        params["tools"] = tools
        if request.tool_choice:
            # The tools stay defined (the conversation holds tool_use blocks); "none"
            # only forbids calling them.
            params["tool_choice"] = {"type": request.tool_choice}
    return params


def _mark_last_user_message(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the messages with a cache breakpoint on the last user block."""
    marked = list(messages)
    for index in range(len(marked) - 1, -1, -1):
        message = marked[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks or not isinstance(blocks[-1], dict):
            break
        # The API refuses a cache breakpoint on an empty text block.
        if blocks[-1].get("type") == "text" and not blocks[-1].get("text"):
            break
        last = blocks[-1] | {"cache_control": CACHE_CONTROL}
        marked[index] = message | {"content": [*blocks[:-1], last]}
        break
    return marked
