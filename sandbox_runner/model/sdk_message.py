"""An answer of the anthropic SDK (a Message) read into our own ModelResponse, its content
blocks as the plain JSON the API would accept back in the next request."""

from __future__ import annotations

from typing import Any

from anthropic.types import Message

from sandbox_runner.types import ModelResponse, Usage


def to_response(message: Message) -> ModelResponse:
    """Our ModelResponse for an SDK Message, with no SDK object left in it."""
    usage = message.usage
    details = getattr(message, "stop_details", None)
    return ModelResponse(
        content=[_block_to_dict(block) for block in message.content],
        stop_reason=str(message.stop_reason or ""),
        usage=Usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
            cache_read_input_tokens=usage.cache_read_input_tokens or 0,
        ),
        model=message.model,
        stop_details=_plain(details) if details is not None else None,
    )


def _plain(value: Any) -> dict[str, Any]:
    """An SDK object (or a dict, from an answer the SDK left unvalidated) as plain JSON."""
    if isinstance(value, dict):
        return dict(value)
    dumped: dict[str, Any] = value.model_dump(mode="json", exclude_none=True, warnings=False)
    return dumped


def _block_to_dict(block: Any) -> dict[str, Any]:
    """One content block as the JSON the API would accept back in the next request."""
    kind = getattr(block, "type", None)
    if kind == "text":
        cited = getattr(block, "citations", None)
        if not cited:
            return {"type": "text", "text": block.text}
        # Citations of a server-side search go back with the text, as the API sent them.
        citations = [_plain(citation) for citation in cited]
        return {"type": "text", "text": block.text, "citations": citations}
    if kind == "tool_use":
        # The input is kept as given even when it is not an object: the agent loop
        # answers a malformed call with an error instead of crashing on it.
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True, warnings=False)
    return dumped
