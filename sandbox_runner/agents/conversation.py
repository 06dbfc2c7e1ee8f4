"""A conversation kept in its transcript: rebuilt from it to resume or continue a run,
compacted into a summary when it outgrows the context window."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sandbox_runner.types import ToolCall, ToolResult, Usage

NOT_RUN = "Not run: the run stopped before this call finished. Call it again if you still need it."
"""The answer to a call whose result the transcript does not hold (the run died during it)."""


def summary_message(summary: str) -> dict[str, Any]:
    """The user message that stands for a compacted conversation."""
    text = f"Summary of the conversation so far (older messages were compacted):\n\n{summary}"
    return {"role": "user", "content": [{"type": "text", "text": text}]}


@dataclass
class SavedConversation:
    """A conversation read back from its transcript, ready to go on.

    Calls that never got an answer (the run died while one ran) are answered with
    NOT_RUN in `messages` and listed in `unanswered`, so the loop can log those answers.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    unanswered: list[ToolCall] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """The transcript lines that were read (a torn last line left out)."""
    system: str | None = None
    """The system prompt the conversation was held under."""
    model: str | None = None
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    damaged: int = 0
    """Lines before the last that could not be read, or that do not fit the conversation."""
    paused: bool = False
    """Whether the API paused the model's last answer (pause_turn): the next goes on with it."""

    @property
    def intact(self) -> bool:
        """Whether it can be continued as it is: its start, at least one answer of the
        model, and nothing lost on the way (a torn last line and unanswered calls are fine)."""
        return self.system is not None and self.turns > 0 and self.damaged == 0

    def answer(self, calls: dict[str, ToolCall], *, last: bool) -> None:
        """Answer calls that have no result with NOT_RUN, after the results they have
        (those of the last turn are listed in `unanswered`, for the loop to log)."""
        if not calls:
            return
        if not self.messages or self.messages[-1]["role"] != "user":
            self.messages.append({"role": "user", "content": []})
        for call in calls.values():
            if last:
                self.unanswered.append(call)
            self.messages[-1]["content"].append(ToolResult(call.id, NOT_RUN, True).to_block())


def transcript_lines(text: str) -> list[str]:
    """A transcript's lines: split at newlines only (str.splitlines would also split inside
    an entry at U+2028, U+0085 and the like, which JSON leaves unescaped)."""
    return text.split("\n")


def saved_conversation(lines: list[str]) -> SavedConversation:
    """The conversation of a transcript, repaired where a killed run left it unfinished.

    User-side entries that follow each other (the task, tool results, planrun's notes)
    form one user message, in order, as the loop sent them.
    """
    saved = SavedConversation()
    lines = [line for line in lines if line.strip()]
    pending: dict[str, ToolCall] = {}
    for number, line in enumerate(lines):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            if number < len(lines) - 1:
                saved.damaged += 1
            continue
        saved.lines.append(line)
        try:
            pending = _apply(saved, entry, pending)
        except (KeyError, TypeError, ValueError, ArithmeticError, RecursionError):
            saved.damaged += 1
    saved.answer(pending, last=True)
    return saved


def _apply(
    saved: SavedConversation, entry: dict[str, Any], pending: dict[str, ToolCall]
) -> dict[str, ToolCall]:
    """Add one transcript entry to the conversation; returns the calls still unanswered."""
    messages = saved.messages
    kind = entry.get("type")
    if kind == "system":
        saved.system, saved.model = str(entry["text"]), str(entry.get("model") or "")
        return pending
    if kind == "compacted":
        saved.messages[:] = [summary_message(str(entry["summary"]))]
        return {}
    if kind == "cleared":
        # The user started over (/clear): the next message starts a new conversation.
        saved.messages.clear()
        saved.paused = False
        return {}
    if kind == "withdrawn":
        withdraw_text(messages, str(entry["text"]))
        return pending
    if kind == "assistant":
        # Everything that can fail comes first: a bad entry changes nothing.
        going_on = not pending and bool(messages) and messages[-1]["role"] == "assistant"
        if going_on and not saved.paused:
            raise ValueError("two answers of the model in a row")
        content = entry["content"]
        if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
            raise ValueError("an answer whose content is not a list of blocks")
        message = {"role": "assistant", "content": content}
        counts = {k: max(0, int(v)) for k, v in dict(entry.get("usage") or {}).items()}
        usage = Usage(**counts)
        calls = _tool_uses(message)
        if pending:
            saved.answer(pending, last=False)  # answers that were never logged
        if going_on:
            messages[-1]["content"] = [*messages[-1]["content"], *content]
        else:
            messages.append(message)
        saved.paused = entry.get("stop_reason") == "pause_turn"
        saved.turns += 1
        saved.usage.add(usage)
        return calls
    if kind == "usage":
        # A tool's own model call (a WebSearch): its tokens, outside the conversation.
        saved.usage.add(Usage(**{k: max(0, int(v)) for k, v in dict(entry["usage"]).items()}))
        return pending
    if kind == "user":
        block: dict[str, Any] = {"type": "text", "text": str(entry["text"])}
    elif kind == "tool_result":
        call_id = str(entry["call_id"])
        if call_id not in pending:
            raise ValueError("a result for a call the conversation does not hold")
        del pending[call_id]
        saved.tool_calls += 1
        block = ToolResult(call_id, str(entry["content"]), bool(entry["is_error"])).to_block()
    else:
        return pending
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"].append(block)
    else:
        messages.append({"role": "user", "content": [block]})
    return pending


def withdraw_text(messages: list[dict[str, Any]], text: str) -> bool:
    """Remove TEXT when it is the last block of the last message, a user's; whether it was."""
    last = messages[-1] if messages else None
    if last is None or last["role"] != "user" or not isinstance(last["content"], list):
        return False
    if not last["content"] or last["content"][-1] != {"type": "text", "text": text}:
        return False
    last["content"].pop()
    if not last["content"]:
        messages.pop()
    return True


def _tool_uses(message: dict[str, Any]) -> dict[str, ToolCall]:
    """The calls of an assistant message that its conversation has not answered yet."""
    return {
        # The input is kept as the model sent it, an object or not (the loop answered it).
        str(block["id"]): ToolCall(str(block["id"]), str(block["name"]), block.get("input") or {})
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }
