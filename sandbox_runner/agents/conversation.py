"""A conversation kept in its transcript: rebuilt from it to resume, compacted into a
summary when it outgrows the context window."""

from __future__ import annotations

import json
from typing import Any

from sandbox_runner.types import ToolResult


def summary_message(summary: str) -> dict[str, Any]:
    """The user message that stands for a compacted conversation."""
    text = f"Summary of the conversation so far (older messages were compacted):\n\n{summary}"
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def conversation_from_transcript(lines: list[str]) -> list[dict[str, Any]]:
    """The messages of a conversation, rebuilt from its transcript (to resume a run).

    User-side entries that follow each other (the task, tool results, planrun's notes)
    form one user message, in order, as the loop sent them.
    """
    messages: list[dict[str, Any]] = []
    for line in lines:
        entry = json.loads(line)
        kind = entry.get("type")
        if kind == "compacted":
            messages = [summary_message(entry["summary"])]
            continue
        if kind == "assistant":
            messages.append({"role": "assistant", "content": entry["content"]})
            continue
        if kind == "user":
            block = {"type": "text", "text": entry["text"]}
        elif kind == "tool_result":
            block = ToolResult(entry["call_id"], entry["content"], entry["is_error"]).to_block()
        else:
            continue
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": "user", "content": [block]})
    return messages
